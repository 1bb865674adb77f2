-- Run a schedule now: enqueue one task of it, once per request id, counted as fired.
-- KEYS[1]  the queue's stream, KEYS[2] sched:metrics (hash: fired, missed, suppressed)
-- KEYS[3]  this request's marker (string, expiring), KEYS[4] the task hash
-- KEYS[5]  the task's unique lock (only when ARGV[5] > 0); all share the queue's hash tag
-- ARGV[1]  task id, ARGV[2] envelope bytes, ARGV[3] max retry, ARGV[4] dead-letter discard
--          ('1'/'0'), ARGV[5] unique lock TTL ms (0 = not unique), ARGV[6] marker TTL ms
-- Returns: 1 enqueued, -1 this request already ran (marker or task present), -4 another task
-- holds the unique lock (counted as suppressed). Every check runs before the first write; a
-- re-sent call finds its marker and writes nothing.
if #ARGV ~= 6 then return redis.error_reply('ERR sched_run: bad argument count') end
local id, env, maxr, discard = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local uttl, ttl = tonumber(ARGV[5]), tonumber(ARGV[6])
if not uttl or not ttl or not tonumber(maxr) then
  return redis.error_reply('ERR sched_run: bad TTL or max retry')
end
if uttl > 0 and not KEYS[5] then return redis.error_reply('ERR sched_run: unique key missing') end
if redis.call('EXISTS', KEYS[3]) == 1 or redis.call('EXISTS', KEYS[4]) == 1 then return -1 end
redis.call('SET', KEYS[3], id, 'PX', ttl)
if uttl > 0 and not redis.call('SET', KEYS[5], id, 'NX', 'PX', uttl) then
  redis.call('HINCRBY', KEYS[2], 'suppressed', 1)
  return -4
end
-- Same layout as enqueue.lua: the envelope in the stream entry, small fields in the hash.
local mid = redis.call('XADD', KEYS[1], '*', 'i', id, 'e', env)
local fields = {KEYS[4], 'r', '0', 'x', maxr, 's', 'pending', 'm', mid}
if uttl > 0 then fields[#fields + 1] = 'u'; fields[#fields + 1] = KEYS[5] end
if discard == '1' then fields[#fields + 1] = 'dl'; fields[#fields + 1] = '1' end
redis.call('HSET', unpack(fields))
redis.call('HINCRBY', KEYS[2], 'fired', 1)
return 1
