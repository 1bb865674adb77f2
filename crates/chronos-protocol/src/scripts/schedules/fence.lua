-- Raise a queue's fencing epoch to the new leader's, so a deposed leader's fires into this
-- queue are refused from now on.
-- KEYS[1]  the queue's fence (string; the queue's hash tag)
-- ARGV[1]  epoch
-- Returns: the queue's fence after the call.
local cur = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
local epoch = tonumber(ARGV[1])
if not epoch then return redis.error_reply('ERR fence: bad epoch') end
if epoch > cur then
  redis.call('SET', KEYS[1], epoch)
  return epoch
end
return cur
