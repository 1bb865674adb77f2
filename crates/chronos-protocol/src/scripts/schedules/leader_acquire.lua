-- Take the scheduler leadership if nobody holds it, with a new fencing epoch.
-- KEYS[1]  the leader lock, KEYS[2] the epoch counter, KEYS[3] the leader info hash
--          (id, epoch, since); all three share one hash tag
-- ARGV[1]  the candidate's token, ARGV[2] lock TTL ms, ARGV[3] candidate id, ARGV[4] unused
--          (the caller's clock; `since` is stamped with Redis' clock so all readers agree),
-- ARGV[5]  minimum epoch: the new epoch is above it (a fence seen higher than the counter)
-- Returns: the new epoch (a counter that only grows) when taken (or, for a re-sent call, the
-- epoch this token already holds), 0 when another holds the lock.
local floor = tonumber(ARGV[5] or '0')
if not tonumber(ARGV[2]) or not floor then
  return redis.error_reply('ERR leader_acquire: bad TTL or minimum epoch')
end
local holder = redis.call('GET', KEYS[1])
if holder then
  -- A re-sent call (the reply of the first was lost) finds our own token: we already lead.
  if holder == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return tonumber(redis.call('HGET', KEYS[3], 'epoch') or '0') or 0
  end
  return 0
end
local epoch = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
epoch = math.max(epoch, floor) + 1
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('SET', KEYS[2], epoch)
redis.call('HSET', KEYS[3], 'id', ARGV[3], 'epoch', epoch, 'since', now)
return epoch
