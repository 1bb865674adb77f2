-- Compare-and-set of one runtime schedule definition, bumping the set's revision.
-- KEYS[1]  runtime definitions (hash: schedule id -> definition bytes)
-- KEYS[2]  revision (string counter)
-- KEYS[3]  the code registry (hash: schedule id -> registry entry), read only
-- ARGV[1]  schedule id, ARGV[2] '1' when a stored value is expected, ARGV[3] the expected
--          bytes, ARGV[4] '1' to write (else delete), ARGV[5] the new bytes
-- Returns: 1 written (revision bumped), 0 the store already holds the new value (a re-sent
-- call: nothing written), -1 the stored value is not the expected one (nothing written),
-- -2 a schedule registered in code uses this id (nothing written).
-- Every check runs before the first write.
if #ARGV ~= 5 then return redis.error_reply('ERR sched_put: bad argument count') end
local id, want_old, old, write, new = ARGV[1], ARGV[2] == '1', ARGV[3], ARGV[4] == '1', ARGV[5]
if redis.call('HEXISTS', KEYS[3], id) == 1 then return -2 end
local cur = redis.call('HGET', KEYS[1], id)
if write then
  if cur == new then return 0 end
else
  if not cur then return 0 end
end
if want_old then
  if cur ~= old then return -1 end
elseif cur then
  return -1
end
if write then
  redis.call('HSET', KEYS[1], id, new)
else
  redis.call('HDEL', KEYS[1], id)
end
redis.call('INCR', KEYS[2])
return 1
