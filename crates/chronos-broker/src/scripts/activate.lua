-- Turn stream entries just read with XREADGROUP into active tasks and return their data.
-- KEYS[1]  the queue's stream
-- ARGV[1]  key prefix of the queue
-- ARGV[2]  consumer group
-- then pairs: stream entry id, task id ('' when the entry carries no task id)
-- Returns: per pair, {task id, envelope, retried, last error, last failed at ms}, or 0 when the
-- entry is stale (its task was deleted, or it is not ours to run): such an entry is acked and
-- deleted so it never blocks the queue. Running twice returns the same rows.
-- The envelope is '' when the hash holds none (the normal case: a task in the stream keeps its
-- envelope in the entry's `e` field, which the caller already read with the entry); it is the
-- hash's `e` only for a task written before envelopes moved into the stream.
local prefix, group = ARGV[1], ARGV[2]
local out = {}
for i = 3, #ARGV, 2 do
  local mid, id = ARGV[i], ARGV[i + 1]
  local h = {false, false, false, false, false}
  if id ~= '' then
    h = redis.call('HMGET', prefix .. 't:' .. id, 'm', 'e', 'r', 'err', 'f')
  end
  if h[1] == mid then
    redis.call('HSET', prefix .. 't:' .. id, 's', 'active')
    out[#out + 1] = {id, h[2] or '', h[3] or '0', h[4] or '', h[5] or '0'}
  else
    redis.call('XACK', KEYS[1], group, mid)
    redis.call('XDEL', KEYS[1], mid)
    out[#out + 1] = 0
  end
end
return out
