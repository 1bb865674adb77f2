-- Mark deliveries as started, right before their handlers run: from here on a lost worker costs
-- the task an attempt (so a task that keeps killing its workers ends in the dead letters), while
-- a delivery never started costs nothing.
-- KEYS[1]  the queue's stream, then one task hash per delivery
-- ARGV[1]  consumer group, then one stream entry id per delivery
-- Returns: one row per delivery:
--   {1, retried, max retry, last error, last failed at ms, unique lock key}  started (fields
--      the caller merges into the envelope it read with the entry; '' where absent)
--   {0}            the delivery is no longer this one (task deleted or settled): its entry is
--                  acked and removed so it never blocks the queue
--   {-1, reason}   the task record is corrupt: nothing written; the caller dead-letters it
-- Running twice gives the same rows (a started task is started again as a no-op).
local group = ARGV[1]
local out = {}
for i = 2, #ARGV do
  local mid, tkey = ARGV[i], KEYS[i]
  local h = read_hash(tkey, 'm', 'r', 'x', 'err', 'f', 'u')
  if h == nil then
    out[#out + 1] = {-1, 'corrupt task record: not a hash'}
  elseif h[1] ~= mid then
    settle_entries(KEYS[1], group, {mid})
    out[#out + 1] = {0}
  elseif not count_of(h[2]) or not count_of(h[3]) then
    out[#out + 1] = {-1, 'corrupt task record: retried = ' .. tostring(h[2]) ..
      ', max retry = ' .. tostring(h[3])}
  else
    redis.call('HSET', tkey, 's', 'active')
    out[#out + 1] = {1, h[2], h[3], h[4] or '', h[5] or '0', h[6] or ''}
  end
end
return out
