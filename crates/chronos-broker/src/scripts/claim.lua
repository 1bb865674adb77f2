-- Read new entries for a consumer and activate their tasks in one call: the busy-queue fetch
-- path (one round trip per batch). The blocking path reads with XREADGROUP BLOCK on its own
-- connection and then calls activate.lua.
-- KEYS[1]  the queue's stream
-- ARGV[1]  key prefix, ARGV[2] consumer group, ARGV[3] consumer, ARGV[4] most entries to read
-- Returns: per entry read, {entry id, task id, envelope, retried, last error, last failed at}
-- for a live task, or {entry id} for a stale one (acked and deleted, as in activate.lua).
-- The envelope is the entry's `e` field (or the hash's `e`, for a task written before envelopes
-- moved into the stream; '' when neither has one).
-- A re-sent call reads nothing new: entries delivered by the first run wait in the consumer's
-- pending list and are reclaimed if the reply was lost.
local prefix, group = ARGV[1], ARGV[2]
local res = redis.call('XREADGROUP', 'GROUP', group, ARGV[3], 'COUNT', ARGV[4], 'STREAMS', KEYS[1], '>')
local out = {}
if not res then return out end
for _, entry in ipairs(res[1][2]) do
  local mid, fields = entry[1], entry[2]
  local id, env = field_of(fields, 'i'), field_of(fields, 'e')
  local h = {false, false, false, false, false}
  if id then h = redis.call('HMGET', prefix .. 't:' .. id, 'm', 'e', 'r', 'err', 'f') end
  if h[1] == mid then
    redis.call('HSET', prefix .. 't:' .. id, 's', 'active')
    out[#out + 1] = {mid, id, h[2] or env or '', h[3] or '0', h[4] or '', h[5] or '0'}
  else
    redis.call('XACK', KEYS[1], group, mid)
    redis.call('XDEL', KEYS[1], mid)
    out[#out + 1] = {mid}
  end
end
return out
