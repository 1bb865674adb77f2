-- Dead-letter a task: archive it, or drop it when it was enqueued with discard.
-- KEYS[1]  the queue's stream
-- ARGV[1]  key prefix, ARGV[2] consumer group, ARGV[3] now (unix ms)
-- ARGV[4]  task id, ARGV[5] stream entry id, ARGV[6] error message,
-- ARGV[7]  '1' when this failure counts as an attempt
-- Returns: 1 archived, 2 discarded, 0 when the lease no longer matches (nothing changed).
-- The unique lock is released either way.
local prefix, group, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local id, mid = ARGV[4], ARGV[5]
local tkey = prefix .. 't:' .. id
if redis.call('HGET', tkey, 'm') ~= mid then return 0 end
redis.call('XACK', KEYS[1], group, mid)
redis.call('XDEL', KEYS[1], mid)
redis.call('INCR', prefix .. 'failed')
local ukey = redis.call('HGET', tkey, 'u')
if ukey and redis.call('GET', ukey) == id then redis.call('DEL', ukey) end
if redis.call('HGET', tkey, 'dl') == '1' then
  redis.call('DEL', tkey)
  return 2
end
if ARGV[7] == '1' then redis.call('HINCRBY', tkey, 'r', 1) end
redis.call('HSET', tkey, 's', 'archived', 'err', ARGV[6], 'f', now)
redis.call('HDEL', tkey, 'm')
redis.call('ZADD', prefix .. 'archived', now, id)
return 1
