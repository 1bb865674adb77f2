-- Take the scheduler leadership if nobody holds it, with a new fencing epoch.
-- KEYS[1]  the leader lock; the epoch counter and leader info share its hash tag
-- ARGV[1]  the candidate's token, ARGV[2] lock TTL ms, ARGV[3] candidate id, ARGV[4] now (ms),
-- ARGV[5]  minimum epoch: the new epoch is above it (a fence seen higher than the counter)
-- Returns: the new epoch (a counter that only grows) when taken (or, for a re-sent call, the
-- epoch this token already holds), 0 when another holds the lock.
local base = string.sub(KEYS[1], 1, #KEYS[1] - #'leader')
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  -- A re-sent call (the reply of the first was lost) finds our own token: we already lead.
  if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return tonumber(redis.call('HGET', base .. 'leader-info', 'epoch') or '0')
  end
  return 0
end
local epoch = redis.call('INCR', base .. 'epoch')
local floor = tonumber(ARGV[5] or '0') or 0
if epoch <= floor then
  epoch = floor + 1
  redis.call('SET', base .. 'epoch', epoch)
end
redis.call('HSET', base .. 'leader-info', 'id', ARGV[3], 'epoch', epoch, 'since', ARGV[4])
return epoch
