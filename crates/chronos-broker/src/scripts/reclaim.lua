-- Reclaim entries whose worker stopped heartbeating (crashed or cut off): each counts as a failed
-- attempt (unless it was never activated, i.e. its fetch reply was lost); the task goes back to the end of the stream, or is dead-lettered when it has no
-- retries left (a task that keeps killing its workers ends in the archive).
-- KEYS[1]  the queue's stream
-- ARGV[1]  key prefix, ARGV[2] consumer group, ARGV[3] consumer name to claim into,
-- ARGV[4]  min idle ms, ARGV[5] XAUTOCLAIM cursor, ARGV[6] count, ARGV[7] now (unix ms)
-- Returns: {next cursor, re-queued count, {id, envelope, '1' if discarded else '0'}...}
-- The claiming consumer ends with nothing pending: every claimed entry is acked and deleted.
-- The envelope is the claimed entry's `e` (or the hash's `e`, for a task written before
-- envelopes moved into the stream): a re-queued task's new entry carries it, an archived task's
-- hash keeps it, and dead tasks return it.
local prefix, group, me = ARGV[1], ARGV[2], ARGV[3]
local now = ARGV[7]
local res = redis.call('XAUTOCLAIM', KEYS[1], group, me, ARGV[4], ARGV[5], 'COUNT', ARGV[6])
local requeued, dead = 0, {}
for _, entry in ipairs(res[2]) do
  local mid, fields = entry[1], entry[2]
  local id, eenv = field_of(fields, 'i'), field_of(fields, 'e')
  redis.call('XACK', KEYS[1], group, mid)
  redis.call('XDEL', KEYS[1], mid)
  if id then
    local tkey = prefix .. 't:' .. id
    local h = redis.call('HMGET', tkey, 'm', 'e', 'x', 'u', 'dl', 's')
    if h[1] == mid then
      local env = h[2] or eenv
      -- 'pending' means the delivery never reached a handler (the fetch reply was lost on a
      -- reconnect): no attempt was made, so none is counted.
      local attempted = h[6] ~= 'pending'
      local r = 0
      local maxr = tonumber(h[3] or '0') or 0
      if attempted then
        r = redis.call('HINCRBY', tkey, 'r', 1)
        local err = 'worker lost: no heartbeat for ' .. ARGV[4] .. ' ms'
        redis.call('HSET', tkey, 'err', err, 'f', now)
      end
      if attempted and r > maxr then
        redis.call('INCR', prefix .. 'failed')
        local ukey = h[4]
        if ukey and redis.call('GET', ukey) == id then redis.call('DEL', ukey) end
        if h[5] == '1' then
          redis.call('DEL', tkey)
          dead[#dead + 1] = {id, env or false, '1'}
        else
          if env and not h[2] then
            redis.call('HSET', tkey, 's', 'archived', 'e', env)
          else
            redis.call('HSET', tkey, 's', 'archived')
          end
          redis.call('HDEL', tkey, 'm')
          redis.call('ZADD', prefix .. 'archived', now, id)
          dead[#dead + 1] = {id, env or false, '0'}
        end
      else
        back_to_stream(KEYS[1], tkey, id, env, h[2])
        requeued = requeued + 1
      end
    end
  end
end
return {res[1], requeued, dead}
