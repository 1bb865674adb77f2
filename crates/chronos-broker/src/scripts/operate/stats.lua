-- Counts of one queue for the inspector (read only).
-- KEYS[1]  the queue's stream, KEYS[2..5] its scheduled, retry, archived and completed sets,
-- KEYS[6]  processed counter, KEYS[7] failed counter
-- ARGV[1]  consumer group
-- Returns: {stream length, active (pending in the group), scheduled, retry, archived, completed,
--           processed total, failed total}
local group = ARGV[1]
local len = redis.call('XLEN', KEYS[1])
local active = 0
if len > 0 or redis.call('EXISTS', KEYS[1]) == 1 then
  local ok, p = pcall(redis.call, 'XPENDING', KEYS[1], group)
  if ok then active = p[1] end
end
return {len, active,
  redis.call('ZCARD', KEYS[2]), redis.call('ZCARD', KEYS[3]),
  redis.call('ZCARD', KEYS[4]), redis.call('ZCARD', KEYS[5]),
  tonumber(redis.call('GET', KEYS[6]) or '0') or 0,
  tonumber(redis.call('GET', KEYS[7]) or '0') or 0}
