-- Reclaim entries whose worker stopped heartbeating (crashed or cut off): each counts as a failed
-- attempt; the task goes back to the end of the stream, or is dead-lettered when it has no
-- retries left (a task that keeps killing its workers ends in the archive).
-- KEYS[1]  the queue's stream
-- ARGV[1]  key prefix, ARGV[2] consumer group, ARGV[3] consumer name to claim into,
-- ARGV[4]  min idle ms, ARGV[5] XAUTOCLAIM cursor, ARGV[6] count, ARGV[7] now (unix ms)
-- Returns: {next cursor, re-queued count, {id, envelope, '1' if discarded else '0'}...}
-- The claiming consumer ends with nothing pending: every claimed entry is acked and deleted.
local prefix, group, me = ARGV[1], ARGV[2], ARGV[3]
local now = ARGV[7]
local res = redis.call('XAUTOCLAIM', KEYS[1], group, me, ARGV[4], ARGV[5], 'COUNT', ARGV[6])
local requeued, dead = 0, {}
for _, entry in ipairs(res[2]) do
  local mid, fields = entry[1], entry[2]
  local id = nil
  if fields then
    for j = 1, #fields, 2 do
      if fields[j] == 'i' then id = fields[j + 1] end
    end
  end
  redis.call('XACK', KEYS[1], group, mid)
  redis.call('XDEL', KEYS[1], mid)
  if id then
    local tkey = prefix .. 't:' .. id
    if redis.call('HGET', tkey, 'm') == mid then
      local r = redis.call('HINCRBY', tkey, 'r', 1)
      local maxr = tonumber(redis.call('HGET', tkey, 'x') or '0') or 0
      local err = 'worker lost: no heartbeat for ' .. ARGV[4] .. ' ms'
      redis.call('HSET', tkey, 'err', err, 'f', now)
      if r > maxr then
        redis.call('INCR', prefix .. 'failed')
        local ukey = redis.call('HGET', tkey, 'u')
        if ukey and redis.call('GET', ukey) == id then redis.call('DEL', ukey) end
        local env = redis.call('HGET', tkey, 'e')
        if redis.call('HGET', tkey, 'dl') == '1' then
          redis.call('DEL', tkey)
          dead[#dead + 1] = {id, env, '1'}
        else
          redis.call('HSET', tkey, 's', 'archived')
          redis.call('HDEL', tkey, 'm')
          redis.call('ZADD', prefix .. 'archived', now, id)
          dead[#dead + 1] = {id, env, '0'}
        end
      else
        local new = redis.call('XADD', KEYS[1], '*', 'i', id)
        redis.call('HSET', tkey, 's', 'pending', 'm', new)
        requeued = requeued + 1
      end
    end
  end
end
return {res[1], requeued, dead}
