-- Acknowledge a batch of succeeded tasks of one queue.
-- KEYS[1]  the queue's stream
-- ARGV[1]  key prefix of the queue
-- ARGV[2]  consumer group
-- ARGV[3]  now, unix ms
-- then triples: task id, stream entry id, retention ms (0 = delete at once)
-- Returns: how many tasks were completed. A task whose entry id no longer matches (already
-- completed by a re-sent call, reclaimed, or deleted) is left alone, which makes re-sends no-ops.
-- A retained task leaves the stream, so its envelope moves from the entry's `e` into the hash's
-- `e` before the entry is deleted.
-- XACK, XDEL and DEL take the whole batch in one call each: per-command overhead dominates the
-- cost of this script.
local prefix, group, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local acked, dropped = {}, {}

for i = 4, #ARGV, 3 do
  local id, mid, keep = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local tkey = prefix .. 't:' .. id
  local h = redis.call('HMGET', tkey, 'm', 'u', 'e')
  if h[1] == mid then
    acked[#acked + 1] = mid
    if h[2] and redis.call('GET', h[2]) == id then redis.call('DEL', h[2]) end
    if keep > 0 then
      local fields = {tkey, 's', 'completed', 'f', now}
      if not h[3] then
        local env = entry_envelope(KEYS[1], mid)
        if env then fields[#fields + 1] = 'e'; fields[#fields + 1] = env end
      end
      redis.call('HSET', unpack(fields))
      redis.call('HDEL', tkey, 'm')
      redis.call('PEXPIRE', tkey, keep)
      redis.call('ZADD', prefix .. 'completed', now + keep, id)
    else
      dropped[#dropped + 1] = tkey
    end
  end
end
if #acked == 0 then return 0 end
redis.call('XACK', KEYS[1], group, unpack(acked))
redis.call('XDEL', KEYS[1], unpack(acked))
if #dropped > 0 then redis.call('DEL', unpack(dropped)) end
redis.call('INCRBY', prefix .. 'processed', #acked)
return #acked
