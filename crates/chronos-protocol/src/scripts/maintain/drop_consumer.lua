-- Delete a consumer from a queue's group only if it holds no pending entry (XGROUP DELCONSUMER
-- would silently drop them, losing their tasks).
-- KEYS[1]  the queue's stream
-- ARGV[1]  consumer group, ARGV[2] consumer
-- Returns: 1 deleted, 0 kept (it still holds entries, or does not exist).
local p = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2])
if #p > 0 then return 0 end
local ok = pcall(redis.call, 'XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
if ok then return 1 end
return 0
