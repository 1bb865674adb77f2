-- Acknowledge a batch of succeeded tasks of one queue.
-- KEYS[1]  the queue's stream
-- ARGV[1]  key prefix of the queue
-- ARGV[2]  consumer group
-- ARGV[3]  now, unix ms
-- then triples: task id, stream entry id, retention ms (0 = delete at once)
-- Returns: how many tasks were completed. A task whose entry id no longer matches (already
-- completed by a re-sent call, reclaimed, or deleted) is left alone, which makes re-sends no-ops.
local prefix, group, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local done = 0
for i = 4, #ARGV, 3 do
  local id, mid, keep = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local tkey = prefix .. 't:' .. id
  if redis.call('HGET', tkey, 'm') == mid then
    redis.call('XACK', KEYS[1], group, mid)
    redis.call('XDEL', KEYS[1], mid)
    local ukey = redis.call('HGET', tkey, 'u')
    if ukey and redis.call('GET', ukey) == id then redis.call('DEL', ukey) end
    if keep > 0 then
      redis.call('HSET', tkey, 's', 'completed', 'f', now)
      redis.call('HDEL', tkey, 'm')
      redis.call('PEXPIRE', tkey, keep)
      redis.call('ZADD', prefix .. 'completed', now + keep, id)
    else
      redis.call('DEL', tkey)
    end
    done = done + 1
  end
end
if done > 0 then redis.call('INCRBY', prefix .. 'processed', done) end
return done
