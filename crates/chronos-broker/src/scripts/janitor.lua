-- Expire retained completed tasks and trim the archive of one queue.
-- KEYS[1]  the queue's stream
-- ARGV[1]  key prefix, ARGV[2] now (unix ms), ARGV[3] archive max age ms,
-- ARGV[4]  archive max length, ARGV[5] most tasks to remove per call
-- Returns: how many task hashes were removed.
local prefix, now = ARGV[1], tonumber(ARGV[2])
local maxage, maxlen, limit = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local removed = 0
-- Deletes a task's hash only while it is still in the state the set stands for: an expired
-- retained task may have been enqueued again under the same id, and that new task must live.
local function drop(zkey, ids, state)
  for _, id in ipairs(ids) do
    local tkey = prefix .. 't:' .. id
    if redis.call('HGET', tkey, 's') == state then
      redis.call('DEL', tkey)
      removed = removed + 1
    end
    redis.call('ZREM', zkey, id)
  end
end
drop(prefix .. 'completed',
  redis.call('ZRANGEBYSCORE', prefix .. 'completed', '-inf', now, 'LIMIT', 0, limit), 'completed')
local akey = prefix .. 'archived'
drop(akey, redis.call('ZRANGEBYSCORE', akey, '-inf', now - maxage, 'LIMIT', 0, limit), 'archived')
local over = redis.call('ZCARD', akey) - maxlen
if over > 0 then
  drop(akey, redis.call('ZRANGE', akey, 0, math.min(over, limit) - 1), 'archived')
end
return removed
