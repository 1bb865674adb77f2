-- Refresh the concurrency tokens of tasks a worker still holds (with its lease heartbeat), so
-- they do not expire; a token already expired (and perhaps taken by another worker's grant) is
-- not brought back.
-- KEYS[1]  the queue's concurrency permits
-- ARGV[1]  token TTL ms, then tokens
-- Returns: how many tokens were refreshed.
if not type_ok(KEYS[1], 'zset') then return 0 end
local now = now_ms()
local exp = now + (tonumber(ARGV[1]) or 30000)
local kept = 0
for i = 2, #ARGV do
  local s = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[i]))
  if s and s > now then
    redis.call('ZADD', KEYS[1], 'XX', exp, ARGV[i])
    kept = kept + 1
  end
end
if kept > 0 then expire_with_last(KEYS[1]) end
return kept
