-- Remove expired retained tasks, and archived and cancelled tasks past the archive's age or
-- length cap (each set counted on its own).
-- KEYS[1]  the queue's completed set, KEYS[2] its archive, then one task hash per task, then
--          its cancelled set
-- ARGV[1]  archive max age ms, ARGV[2] archive max length,
-- then pairs: 'c' (completed), 'a' (archived) or 'x' (cancelled), task id (as listed by
-- due.lua)
-- Returns: how many set members were removed (a retained task whose hash already expired by its
-- TTL still counts: its member had to go too). Each id is checked again: a retained task must
-- have expired by Redis's clock; an archived one must be past the age, or still beyond the cap
-- counted from the oldest. A task's hash is deleted only while it is still in the state the set
-- stands for: an expired retained task may have been enqueued again under the same id, and that
-- new task must live. A re-sent call removes nothing twice.
local now = now_ms()
local maxage, maxlen = tonumber(ARGV[1]) or 0, tonumber(ARGV[2]) or 0
local X = #KEYS
if not type_ok(KEYS[1], 'zset') or not type_ok(KEYS[2], 'zset') or not type_ok(KEYS[X], 'zset') then
  return redis.error_reply('E_CORRUPT queue keys of the wrong type')
end
local todo = {}
local cards = {}
for t = 0, (#ARGV - 2) / 2 - 1 do
  local which, id, tkey = ARGV[3 + t * 2], ARGV[4 + t * 2], KEYS[3 + t]
  if which == 'c' then
    local score = tonumber(redis.call('ZSCORE', KEYS[1], id))
    if score and score <= now then todo[#todo + 1] = {KEYS[1], id, tkey, 'completed'} end
  else
    local zset, state = KEYS[2], 'archived'
    if which == 'x' then zset, state = KEYS[X], 'cancelled' end
    local score = tonumber(redis.call('ZSCORE', zset, id))
    if score then
      cards[zset] = cards[zset] or redis.call('ZCARD', zset)
      local rank = redis.call('ZRANK', zset, id)
      if score <= now - maxage or rank < cards[zset] - maxlen then
        todo[#todo + 1] = {zset, id, tkey, state}
      end
    end
  end
end
local removed = 0
for _, t in ipairs(todo) do
  local zkey, id, tkey, state = unpack(t)
  if redis.pcall('HGET', tkey, F_STATE) == state then redis.call('DEL', tkey) end
  removed = removed + redis.call('ZREM', zkey, id)
end
return removed
