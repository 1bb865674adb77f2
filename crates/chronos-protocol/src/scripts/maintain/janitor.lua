-- Remove expired retained tasks and archived tasks past the archive's age or length cap.
-- KEYS[1]  the queue's completed set, KEYS[2] its archive, then one task hash per task
-- ARGV[1]  archive max age ms, ARGV[2] archive max length,
-- then pairs: 'c' (completed) or 'a' (archived), task id (as listed by due.lua)
-- Returns: how many set members were removed (a retained task whose hash already expired by its
-- TTL still counts: its member had to go too). Each id is checked again: a retained task must
-- have expired by Redis's clock; an archived one must be past the age, or still beyond the cap
-- counted from the oldest. A task's hash is deleted only while it is still in the state the set
-- stands for: an expired retained task may have been enqueued again under the same id, and that
-- new task must live. A re-sent call removes nothing twice.
local now = now_ms()
local maxage, maxlen = tonumber(ARGV[1]) or 0, tonumber(ARGV[2]) or 0
if not type_ok(KEYS[1], 'zset') or not type_ok(KEYS[2], 'zset') then
  return redis.error_reply('E_CORRUPT queue keys of the wrong type')
end
local todo = {}
local card = redis.call('ZCARD', KEYS[2])
for t = 0, (#ARGV - 2) / 2 - 1 do
  local which, id, tkey = ARGV[3 + t * 2], ARGV[4 + t * 2], KEYS[3 + t]
  if which == 'c' then
    local score = tonumber(redis.call('ZSCORE', KEYS[1], id))
    if score and score <= now then todo[#todo + 1] = {KEYS[1], id, tkey, 'completed'} end
  else
    local score = tonumber(redis.call('ZSCORE', KEYS[2], id))
    if score then
      local rank = redis.call('ZRANK', KEYS[2], id)
      if score <= now - maxage or rank < card - maxlen then
        todo[#todo + 1] = {KEYS[2], id, tkey, 'archived'}
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
