-- Expire retained completed tasks and trim the archive of one queue.
-- KEYS[1]  the queue's stream
-- ARGV[1]  key prefix, ARGV[2] now (unix ms), ARGV[3] archive max age ms,
-- ARGV[4]  archive max length, ARGV[5] most tasks to remove per call
-- Returns: how many tasks were removed.
local prefix, now = ARGV[1], tonumber(ARGV[2])
local maxage, maxlen, limit = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local removed = 0
local function drop(zkey, ids)
  for _, id in ipairs(ids) do
    redis.call('DEL', prefix .. 't:' .. id)
    redis.call('ZREM', zkey, id)
    removed = removed + 1
  end
end
drop(prefix .. 'completed',
  redis.call('ZRANGEBYSCORE', prefix .. 'completed', '-inf', now, 'LIMIT', 0, limit))
local akey = prefix .. 'archived'
drop(akey, redis.call('ZRANGEBYSCORE', akey, '-inf', now - maxage, 'LIMIT', 0, limit))
local over = redis.call('ZCARD', akey) - maxlen
if over > 0 then
  drop(akey, redis.call('ZRANGE', akey, 0, math.min(over, limit) - 1))
end
return removed
