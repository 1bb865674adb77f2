-- Delete a consumer from a queue's group only if it holds no pending entry (XGROUP DELCONSUMER
-- would silently drop them, losing their tasks), and pay the completion counts its fetch
-- receipt still owes (claim.lua: `<owed>|...`) to the queue's counters.
-- KEYS[1]  the queue's stream (a level's stream: only the consumer is deleted there)
-- KEYS[2]  (main stream only) the consumer's fetch receipt, KEYS[3] the queue's processed
--          counter, KEYS[4] its per-minute hash and KEYS[5] its counter of today
-- ARGV[1]  consumer group, ARGV[2] consumer
-- Returns: 1 deleted, 0 kept (it still holds entries, or does not exist).
local p = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2])
if #p > 0 then return 0 end
if KEYS[5] then
  local receipt = redis.pcall('GET', KEYS[2])
  local owed = type(receipt) == 'string' and tonumber(string.match(receipt, '^(%d+)|'))
  if owed and owed > 0 then
    bump(KEYS[3], owed)
    history(KEYS[4], KEYS[5], owed, now_ms())
  end
  redis.call('DEL', KEYS[2])
end
local ok = pcall(redis.call, 'XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
if ok then return 1 end
return 0
