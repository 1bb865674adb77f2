-- Write schedule registry entries for one instance and mark the instance alive.
-- KEYS[1]  registry hash (schedule id -> entry), KEYS[2] liveness zset (instance -> last seen
--          ms, Redis' clock), KEYS[3] the instance's set of schedule ids; one hash tag
-- ARGV[1]  instance id, then pairs: schedule id, entry bytes
-- Returns: 1; 0 (nothing written) for a liveness-only call (no pairs) when the registry does
-- not know the instance: its record was pruned or lost, and it must write its entries again.
if #ARGV % 2 ~= 1 then return redis.error_reply('ERR registry_publish: bad argument count') end
if #ARGV == 1 and redis.call('EXISTS', KEYS[3]) == 0 then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if #ARGV > 1 then
  local fields, ids = {}, {}
  for i = 2, #ARGV, 2 do
    fields[#fields + 1] = ARGV[i]
    fields[#fields + 1] = ARGV[i + 1]
    ids[#ids + 1] = ARGV[i]
  end
  redis.call('HSET', KEYS[1], unpack(fields))
  redis.call('SADD', KEYS[3], unpack(ids))
end
redis.call('ZADD', KEYS[2], now, ARGV[1])
return 1
