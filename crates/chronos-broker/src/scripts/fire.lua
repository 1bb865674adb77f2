-- Enqueue scheduler triggers into one queue, exactly once per trigger across the cluster.
-- KEYS[1]  the queue's stream (every other key derives from ARGV[1], same hash tag)
-- ARGV[1]  key prefix, ARGV[2] the caller's leader epoch, ARGV[3] now (ms),
-- ARGV[4]  dedup key TTL ms
-- then 7 values per trigger: schedule id, trigger time ms, task id, envelope bytes,
--   max retry, dead-letter discard ('1'/'0'), forbid overlap ('1'/'0')
-- Returns: one integer per trigger:
--    1  enqueued
--   -1  already fired (dedup key present, or last fired is at or past this trigger)
--   -2  skipped: the previous run of this schedule is still pending or running
--   -3  refused: the caller's epoch is older than the queue's fence (a deposed leader)
-- Per trigger, the checks and the enqueue are one atomic step; last fired only moves forward.
local prefix, epoch, now, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local out = {}
local fkey = prefix .. 'sched:fence'
local fence = tonumber(redis.call('GET', fkey) or '0')
if epoch < fence then
  for i = 5, #ARGV, 7 do out[#out + 1] = -3 end
  return out
end
if epoch > fence then redis.call('SET', fkey, epoch) end
local live = {pending = true, active = true, scheduled = true, retry = true}
for i = 5, #ARGV, 7 do
  local sid, at, id, env = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2], ARGV[i + 3]
  local maxr, discard, forbid = ARGV[i + 4], ARGV[i + 5], ARGV[i + 6]
  local last = tonumber(redis.call('HGET', prefix .. 'sched:last', sid) or '-1')
  local dkey = prefix .. 'sched:d:' .. sid .. ':' .. math.floor(at / 1000)
  if at <= last or redis.call('EXISTS', dkey) == 1 then
    out[#out + 1] = -1
  else
    local prev = redis.call('HGET', prefix .. 'sched:task', sid)
    local busy = false
    if forbid == '1' and prev then
      local st = redis.call('HGET', prefix .. 't:' .. prev, 's')
      busy = st and live[st] or false
    end
    redis.call('SET', dkey, id, 'PX', ttl)
    redis.call('HSET', prefix .. 'sched:last', sid, at)
    if busy then
      out[#out + 1] = -2
    else
      -- Same layout as enqueue.lua: the envelope in the stream entry, small fields in the hash.
      local tkey = prefix .. 't:' .. id
      local mid = redis.call('XADD', KEYS[1], '*', 'i', id, 'e', env)
      local fields = {tkey, 'r', '0', 'x', maxr, 's', 'pending', 'm', mid}
      if discard == '1' then fields[#fields + 1] = 'dl'; fields[#fields + 1] = '1' end
      redis.call('HSET', unpack(fields))
      redis.call('HSET', prefix .. 'sched:task', sid, id)
      out[#out + 1] = 1
    end
  end
end
return out
