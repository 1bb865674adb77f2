-- Deliver new entries of a queue to a consumer: the only fetch path (a blocking wait uses a plain
-- XREAD on its own connection as a wake-up, then calls this).
-- KEYS[1]  the queue's stream, KEYS[2] the consumer's fetch receipt
-- ARGV[1]  consumer group, ARGV[2] consumer, ARGV[3] most entries, ARGV[4] receipt TTL ms,
-- ARGV[5]  this call's nonce (random per call, the same in a re-send)
-- Returns: {cursor, rows}. Each row is {entry id, task id, envelope} for an entry to run, or
-- {entry id} for an entry that carries no task (foreign or emptied; acked and deleted here so it
-- never blocks the queue). `cursor` is '' when rows came back, else the group's last delivered
-- id: a blocking XREAD from it wakes as soon as anything newer arrives.
-- The task hash is not touched: a delivery becomes an attempt only when start.lua marks it
-- active, right before its handler runs, so entries fetched but never started (a lost reply, a
-- crash with a prefetched batch) are re-delivered later without spending an attempt.
-- A re-sent call (its first reply was lost) finds its nonce in the consumer's receipt
-- (`<nonce>:<entry id>,<entry id>...`, written by the call that delivered them) and returns the
-- same entries again instead of reading new ones, so nothing is stranded in the consumer's
-- pending list. One receipt per consumer is enough because a consumer fetches one call at a
-- time; a call that overlapped another only risks waiting for the recoverer, never an attempt.
local group, me, nonce = ARGV[1], ARGV[2], ARGV[5]
local out = {}
local receipt = redis.pcall('GET', KEYS[2])
if type(receipt) == 'string' and string.sub(receipt, 1, #nonce + 1) == nonce .. ':' then
  for mid in string.gmatch(string.sub(receipt, #nonce + 2), '[^,]+') do
    local r = redis.call('XRANGE', KEYS[1], mid, mid)
    local fields = r[1] and r[1][2]
    local id, env = field_of(fields, 'i'), field_of(fields, 'e')
    if id and env then out[#out + 1] = {mid, id, env} end
  end
  return {'', out}
end
local res = redis.call('XREADGROUP', 'GROUP', group, me, 'COUNT', ARGV[3], 'STREAMS', KEYS[1], '>')
local mids = {}
if res then
  for _, entry in ipairs(res[1][2]) do
    local mid, fields = entry[1], entry[2]
    local id, env = field_of(fields, 'i'), field_of(fields, 'e')
    if id and env then
      out[#out + 1] = {mid, id, env}
      mids[#mids + 1] = mid
    else
      redis.call('XACK', KEYS[1], group, mid)
      redis.call('XDEL', KEYS[1], mid)
      out[#out + 1] = {mid}
    end
  end
end
if #mids > 0 then
  redis.call('SET', KEYS[2], nonce .. ':' .. table.concat(mids, ','), 'PX', ARGV[4])
end
if #out > 0 then return {'', out} end
local info = redis.call('XINFO', 'GROUPS', KEYS[1])
for _, g in ipairs(info) do
  if field_of(g, 'name') == group then return {field_of(g, 'last-delivered-id') or '0-0', out} end
end
return {'0-0', out}
