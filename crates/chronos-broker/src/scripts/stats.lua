-- Counts of one queue for the inspector.
-- KEYS[1]  the queue's stream
-- ARGV[1]  key prefix, ARGV[2] consumer group
-- Returns: {stream length, active (pending in the group), scheduled, retry, archived, completed,
--           processed total, failed total}
local prefix, group = ARGV[1], ARGV[2]
local len = redis.call('XLEN', KEYS[1])
local active = 0
if len > 0 or redis.call('EXISTS', KEYS[1]) == 1 then
  local ok, p = pcall(redis.call, 'XPENDING', KEYS[1], group)
  if ok then active = p[1] end
end
return {len, active,
  redis.call('ZCARD', prefix .. 'scheduled'), redis.call('ZCARD', prefix .. 'retry'),
  redis.call('ZCARD', prefix .. 'archived'), redis.call('ZCARD', prefix .. 'completed'),
  tonumber(redis.call('GET', prefix .. 'processed') or '0'),
  tonumber(redis.call('GET', prefix .. 'failed') or '0')}
