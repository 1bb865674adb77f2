-- Extend a lock only if the caller still holds it.
-- KEYS[1]  the lock
-- ARGV[1]  the holder's token, ARGV[2] new TTL ms
-- Returns: 1 renewed, 0 not the holder (the lock expired or someone else holds it).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
