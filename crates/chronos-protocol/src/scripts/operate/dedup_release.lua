-- Operator action "release a deduplication lock" (`chronos dedup rm`): deletes the lock while it
-- still names the expected holder, and takes the lock off the holder's record, so the holder's
-- later start or end leaves alone a lock a newer task may take meanwhile.
-- KEYS[1]  the lock, KEYS[2] the holder's task hash
-- ARGV[1]  the holder's task id
-- Returns: 1 released, 0 the lock is gone or names another task (nothing changed; a re-sent
-- call whose first run released it answers 0).
local lock = redis.pcall('GET', KEYS[1])
if type(lock) ~= 'string' or lock ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
if redis.pcall('HGET', KEYS[2], F_UNIQUE) == KEYS[1] then
  redis.call('HDEL', KEYS[2], F_UNIQUE, F_UNIQUE_RELEASE)
end
return 1
