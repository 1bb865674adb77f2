-- Acknowledge a batch of succeeded tasks of one queue.
-- KEYS[1]  the queue's stream, KEYS[2] its completed set, KEYS[3] its processed counter,
--          KEYS[4] its processed-per-minute hash of today, KEYS[5] its processed counter of today,
--          then 3 keys per task: task hash, done marker, unique lock (the task hash again when
--          the caller knows of none)
-- ARGV[1]  consumer group, ARGV[2] idempotency window ms
-- then 3 values per task: task id, stream entry id, retention ms (0 = delete at once)
-- Returns: how many of the tasks are completed by this delivery, counting those a first run of
-- this same call already completed (a re-sent call: the retained hash's `d`, or the done
-- marker, names the delivery) without touching them again. A task whose entry id no longer
-- matches otherwise (reclaimed, or deleted) is left alone.
-- A retained task leaves the stream, so its envelope moves from the entry into the hash's `e`;
-- `c` is its completion time, `d` the settled delivery. A task deleted at once within the
-- idempotency window of its delivery (or kept for less than that window) leaves a done marker
-- `<entry id>|<enqueue call token>` for that window, so an enqueue re-sent by a producer's client
-- after the task already ran is a no-op.
local group, window = ARGV[1], tonumber(ARGV[2]) or 0
local now = now_ms()
if not type_ok(KEYS[1], 'stream') or not type_ok(KEYS[2], 'zset') then
  return redis.error_reply('E_CORRUPT queue keys of the wrong type')
end
-- Reads first, so a corrupt record fails only itself and nothing errors after a write.
local live, before = {}, 0
for t = 0, (#ARGV - 2) / 3 - 1 do
  local a, k = 2 + t * 3, 5 + t * 3
  local id, mid, keep = ARGV[a + 1], ARGV[a + 2], tonumber(ARGV[a + 3]) or 0
  local h = read_hash(KEYS[k + 1], 'm', 'u', 'n', 'd', 's')
  if h and h[1] == mid then
    live[#live + 1] = {id, mid, keep, KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], h}
  elseif h and h[4] == mid and h[5] == 'completed' then
    before = before + 1
  elseif h and not h[1] then
    local marker = redis.pcall('GET', KEYS[k + 2])
    if type(marker) == 'string' and string.sub(marker, 1, #mid + 1) == mid .. '|' then
      before = before + 1
    end
  end
end
if #live == 0 then return before end
local acked, dropped = {}, {}
for _, t in ipairs(live) do
  local id, mid, keep, tkey, dkey, ukey, h = unpack(t)
  acked[#acked + 1] = mid
  if h[2] and h[2] == ukey then release_unique(ukey, id) end
  if keep > 0 then
    local fields = {tkey, 's', 'completed', 'c', now, 'd', mid}
    local env = entry_envelope(KEYS[1], mid)
    if env then fields[#fields + 1] = 'e'; fields[#fields + 1] = env end
    redis.call('HSET', unpack(fields))
    redis.call('HDEL', tkey, 'm')
    redis.call('PEXPIRE', tkey, keep)
    redis.call('ZADD', KEYS[2], now + keep, id)
  else
    dropped[#dropped + 1] = tkey
  end
  -- The hash is gone now (or sooner than a re-send could come, with a short retention).
  if window > 0 and keep < window and now - entry_time(mid) < window then
    redis.call('SET', dkey, mid .. '|' .. (h[3] or ''), 'PX', window)
  end
end
settle_entries(KEYS[1], group, acked)
if #dropped > 0 then redis.call('DEL', unpack(dropped)) end
bump(KEYS[3], #acked)
history(KEYS[4], KEYS[5], #acked, now)
return #acked + before
