-- Schedule a failed task for a later attempt.
-- KEYS[1]  the queue's stream
-- ARGV[1]  key prefix, ARGV[2] consumer group, ARGV[3] now (unix ms)
-- ARGV[4]  task id, ARGV[5] stream entry id, ARGV[6] retry at (unix ms), ARGV[7] error message
-- Returns: 1 when moved to the retry set, 0 when the lease no longer matches (re-sent call,
-- reclaimed or deleted task): nothing changed.
-- The task leaves the stream, so its envelope moves from the entry's `e` into the hash's `e`
-- before the entry is deleted.
local prefix, group, now = ARGV[1], ARGV[2], ARGV[3]
local id, mid = ARGV[4], ARGV[5]
local tkey = prefix .. 't:' .. id

local h = redis.call('HMGET', tkey, 'm', 'e')
if h[1] ~= mid then return 0 end
local fields = {tkey, 's', 'retry', 'err', ARGV[7], 'f', now}
local env = not h[2] and entry_envelope(KEYS[1], mid)
if env then fields[#fields + 1] = 'e'; fields[#fields + 1] = env end
redis.call('XACK', KEYS[1], group, mid)
redis.call('XDEL', KEYS[1], mid)
redis.call('HINCRBY', tkey, 'r', 1)
redis.call('HSET', unpack(fields))
redis.call('HDEL', tkey, 'm')
redis.call('ZADD', prefix .. 'retry', ARGV[6], id)
redis.call('INCR', prefix .. 'failed')
return 1
