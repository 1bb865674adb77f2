-- Take the scheduler leadership if nobody holds it, with a new fencing epoch.
-- KEYS[1]  the leader lock; the epoch counter and leader info share its hash tag
-- ARGV[1]  the candidate's token, ARGV[2] lock TTL ms, ARGV[3] candidate id, ARGV[4] now (ms)
-- Returns: the new epoch (a counter that only grows) when taken, 0 when another holds the lock.
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 0 end
local base = string.sub(KEYS[1], 1, #KEYS[1] - #'leader')
local epoch = redis.call('INCR', base .. 'epoch')
redis.call('HSET', base .. 'leader-info', 'id', ARGV[3], 'epoch', epoch, 'since', ARGV[4])
return epoch
