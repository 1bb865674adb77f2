-- Release a lock only if the caller holds it, and announce the release.
-- KEYS[1]  the lock
-- ARGV[1]  the holder's token, ARGV[2] channel to publish the token on ('' = none)
-- Returns: 1 released, 0 not the holder.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if ARGV[2] ~= '' then redis.call('PUBLISH', ARGV[2], ARGV[1]) end
  return 1
end
return 0
