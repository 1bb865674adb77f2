-- Raise a queue's fencing epoch to the new leader's, so a deposed leader's fires into this
-- queue are refused from now on.
-- KEYS[1]  the queue's stream (routing only); ARGV[1] key prefix, ARGV[2] epoch
-- Returns: the queue's fence after the call.
local fkey = ARGV[1] .. 'sched:fence'
local cur = tonumber(redis.call('GET', fkey) or '0')
local epoch = tonumber(ARGV[2])
if epoch > cur then
  redis.call('SET', fkey, epoch)
  return epoch
end
return cur
