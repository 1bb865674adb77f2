-- Move due delayed and retry tasks of one queue into its stream.
-- KEYS[1]  the queue's stream
-- ARGV[1]  key prefix, ARGV[2] now (unix ms), ARGV[3] most tasks to move per set
-- Returns: how many tasks were moved. A member whose task hash is gone (deleted) is dropped.
local prefix, now, limit = ARGV[1], ARGV[2], ARGV[3]
local moved = 0
for _, set in ipairs({'scheduled', 'retry'}) do
  local zkey = prefix .. set
  local ids = redis.call('ZRANGEBYSCORE', zkey, '-inf', now, 'LIMIT', 0, limit)
  for _, id in ipairs(ids) do
    local tkey = prefix .. 't:' .. id
    if redis.call('HEXISTS', tkey, 'e') == 1 then
      local mid = redis.call('XADD', KEYS[1], '*', 'i', id)
      redis.call('HSET', tkey, 's', 'pending', 'm', mid)
      moved = moved + 1
    end
    redis.call('ZREM', zkey, id)
  end
end
return moved
