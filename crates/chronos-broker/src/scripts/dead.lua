-- Dead-letter a task: archive it, or drop it when it was enqueued with discard.
-- KEYS[1]  the queue's stream
-- ARGV[1]  key prefix, ARGV[2] consumer group, ARGV[3] now (unix ms)
-- ARGV[4]  task id, ARGV[5] stream entry id, ARGV[6] error message,
-- ARGV[7]  '1' when this failure counts as an attempt
-- Returns: 1 archived, 2 discarded, 0 when the lease no longer matches (nothing changed).
-- The unique lock is released either way. An archived task leaves the stream, so its envelope
-- moves from the entry's `e` into the hash's `e` before the entry is deleted.
local prefix, group, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local id, mid = ARGV[4], ARGV[5]
local tkey = prefix .. 't:' .. id

local h = redis.call('HMGET', tkey, 'm', 'e', 'u', 'dl')
if h[1] ~= mid then return 0 end
local discard = h[4] == '1'
local env = not h[2] and not discard and entry_envelope(KEYS[1], mid)
redis.call('XACK', KEYS[1], group, mid)
redis.call('XDEL', KEYS[1], mid)
redis.call('INCR', prefix .. 'failed')
local ukey = h[3]
if ukey and redis.call('GET', ukey) == id then redis.call('DEL', ukey) end
if discard then
  redis.call('DEL', tkey)
  return 2
end
if ARGV[7] == '1' then redis.call('HINCRBY', tkey, 'r', 1) end
local fields = {tkey, 's', 'archived', 'err', ARGV[6], 'f', now}
if env then fields[#fields + 1] = 'e'; fields[#fields + 1] = env end
redis.call('HSET', unpack(fields))
redis.call('HDEL', tkey, 'm')
redis.call('ZADD', prefix .. 'archived', now, id)
return 1
