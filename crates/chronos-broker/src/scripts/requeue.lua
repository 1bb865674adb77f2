-- Put fetched but unstarted tasks back at the end of their queue without counting an attempt
-- (graceful shutdown).
-- KEYS[1]  the queue's stream
-- ARGV[1]  key prefix, ARGV[2] consumer group
-- then pairs: task id, stream entry id
-- Returns: how many tasks were re-queued; a pair whose lease no longer matches is skipped.
local prefix, group = ARGV[1], ARGV[2]
local n = 0
for i = 3, #ARGV, 2 do
  local id, mid = ARGV[i], ARGV[i + 1]
  local tkey = prefix .. 't:' .. id
  if redis.call('HGET', tkey, 'm') == mid then
    redis.call('XACK', KEYS[1], group, mid)
    redis.call('XDEL', KEYS[1], mid)
    local new = redis.call('XADD', KEYS[1], '*', 'i', id)
    redis.call('HSET', tkey, 's', 'pending', 'm', new)
    n = n + 1
  end
end
return n
