-- Move due delayed and retry tasks of one queue into its stream.
-- KEYS[1]  the queue's stream
-- ARGV[1]  key prefix, ARGV[2] now (unix ms), ARGV[3] most tasks to move per set
-- Returns: how many tasks were moved. A member whose task hash is gone (deleted) is dropped.
-- The envelope moves from the hash's `e` into the new entry (`i=<id> e=<envelope>`), and the
-- hash is rebuilt without it: a hash that once held the envelope was converted to a hashtable
-- (the envelope is longer than hash-max-listpack-value) and never converts back by itself,
-- while rebuilt with its small fields only it is a compact listpack again.
local prefix, now, limit = ARGV[1], ARGV[2], ARGV[3]
local moved = 0
for _, set in ipairs({'scheduled', 'retry'}) do
  local zkey = prefix .. set
  local ids = redis.call('ZRANGEBYSCORE', zkey, '-inf', now, 'LIMIT', 0, limit)
  for _, id in ipairs(ids) do
    local tkey = prefix .. 't:' .. id
    local env = redis.call('HGET', tkey, 'e')
    if env then
      local mid = redis.call('XADD', KEYS[1], '*', 'i', id, 'e', env)
      local all = redis.call('HGETALL', tkey)
      local args = {tkey, 's', 'pending', 'm', mid}
      for j = 1, #all, 2 do
        local k = all[j]
        if k ~= 'e' and k ~= 's' and k ~= 'm' then
          args[#args + 1] = k
          args[#args + 1] = all[j + 1]
        end
      end
      redis.call('DEL', tkey)
      redis.call('HSET', unpack(args))
      moved = moved + 1
    end
    redis.call('ZREM', zkey, id)
  end
end
return moved
