-- Enqueue scheduler triggers into one queue, exactly once per trigger across the cluster, and
-- count them in the queue's scheduler counters in the same atomic step.
-- KEYS[1]  the queue's stream          KEYS[2]  the queue's fence (string)
-- KEYS[3]  sched:last (hash: schedule id -> last fired trigger ms)
-- KEYS[4]  sched:task (hash: schedule id -> last task id)
-- KEYS[5]  sched:metrics (hash: fired, missed, suppressed)
-- KEYS[6]  this call's marker (string): the outcomes of a call that already ran
-- KEYS[7]  sched:fires (hash: schedule id -> its last fires, lib.lua `record_fire`)
-- KEYS[8..] per-trigger keys (dedup key, task hash, unique lock) and the task hashes of the
--          schedules' previous tasks (for the overlap check); all share the queue's hash tag;
--          last, the queue's event stream (lib.lua: `EVENTS`: each task enqueued writes its
--          `enqueued` event)
-- ARGV[1]  the caller's leader epoch, ARGV[2] dedup key and marker TTL ms,
-- ARGV[3]  triggers the caller's misfire policy skipped (added to `missed`)
-- then FIRE_STRIDE (13) values per trigger: schedule id, trigger time ms, task id, envelope
--   bytes, max retry, dead-letter discard ('1'/'0'), forbid overlap ('1'/'0'), deadline ms (0 = none),
--   KEYS index of its dedup key, of its task hash, of its unique lock (0 = not unique),
--   unique lock TTL ms, when the lock is let go (lib.lua `lock_record`: '' when the task ends)
-- Returns: one integer per trigger:
--    1  enqueued
--   -1  already fired (dedup key or task present, or last fired at or past this trigger)
--   -2  skipped: the schedule's previous task is still pending, scheduled, retrying or running
--   -3  refused: the caller's epoch is older than the queue's fence (a deposed leader)
--   -4  skipped: another task holds the unique lock of this kind and payload
--   -5  skipped: the task's deadline had passed (Redis' clock)
-- or {'missing', key...}, with nothing written, when the stored previous task of a schedule
-- that forbids overlap is not among the declared keys: the caller declares it and sends again.
-- Every check runs before the first write. A re-sent call (its marker exists) returns the first
-- run's outcomes and writes and counts nothing.
local done = redis.call('GET', KEYS[6])
if done then
  local out = {}
  for c in string.gmatch(done, '[^,]+') do out[#out + 1] = tonumber(c) end
  return out
end
local epoch, ttl, missed = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
if not epoch or not tonumber(ttl) or not missed then
  return redis.error_reply('ERR fire: bad epoch, TTL or missed count')
end
local n = math.floor((#ARGV - 3) / FIRE_STRIDE)
if #ARGV ~= 3 + n * FIRE_STRIDE then
  return redis.error_reply('ERR fire: bad argument count')
end
local fence = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
if epoch < fence then
  local out = {}
  for _ = 1, n do out[#out + 1] = -3 end
  return out
end

-- Checks before any write: argument shapes, key indexes, and that the stored previous task of
-- every schedule that forbids overlap is declared.
local declared = {}
for k = 1, #KEYS do declared[KEYS[k]] = true end
local function key_at(x)
  local k = tonumber(x)
  if not k or k < 0 or k > #KEYS or k ~= math.floor(k) then return nil end
  if k == 0 then return false end
  return KEYS[k]
end
local missing = {}
local prev_key_of = {}
for j = 0, n - 1 do
  local i = 4 + j * FIRE_STRIDE
  local sid, id = ARGV[i], ARGV[i + 2]
  if not tonumber(ARGV[i + 1]) or not tonumber(ARGV[i + 4]) or not tonumber(ARGV[i + 7])
      or not tonumber(ARGV[i + 11]) then
    return redis.error_reply('ERR fire: bad trigger time, max retry, deadline or unique TTL')
  end
  local dkey, tkey, ukey = key_at(ARGV[i + 8]), key_at(ARGV[i + 9]), key_at(ARGV[i + 10])
  if not dkey or not tkey or ukey == nil then
    return redis.error_reply('ERR fire: bad key index')
  end
  if ARGV[i + 6] == '1' and prev_key_of[sid] == nil then
    -- Task hashes are `<queue prefix>t:<id>`: the previous task's key has this one's prefix.
    local tprefix = string.sub(tkey, 1, #tkey - #id)
    local prev = redis.call('HGET', KEYS[4], sid)
    if prev then
      local pkey = tprefix .. prev
      if declared[pkey] then prev_key_of[sid] = pkey else missing[#missing + 1] = pkey end
    else
      prev_key_of[sid] = false
    end
  end
end
if #missing > 0 then
  table.insert(missing, 1, 'missing')
  return missing
end

if epoch > fence then redis.call('SET', KEYS[2], epoch) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local live = {pending = true, active = true, scheduled = true, retry = true}
local fired, suppressed = 0, 0
local out = {}
for j = 0, n - 1 do
  local i = 4 + j * FIRE_STRIDE
  local sid, at, id, env = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2], ARGV[i + 3]
  local maxr, discard, forbid, deadline = ARGV[i + 4], ARGV[i + 5], ARGV[i + 6], tonumber(ARGV[i + 7])
  local dkey, tkey, ukey = key_at(ARGV[i + 8]), key_at(ARGV[i + 9]), key_at(ARGV[i + 10])
  local last = tonumber(redis.call('HGET', KEYS[3], sid) or '-1') or -1
  local code
  if at <= last or redis.call('EXISTS', dkey) == 1 or redis.call('EXISTS', tkey) == 1 then
    code = -1
  else
    redis.call('SET', dkey, id, 'PX', ttl)
    redis.call('HSET', KEYS[3], sid, at)
    local pkey = prev_key_of[sid]
    local busy = false
    if forbid == '1' and pkey then
      local st = redis.call('HGET', pkey, F_STATE)
      busy = st and live[st] or false
    end
    if deadline > 0 and now > deadline then
      code = -5
    elseif busy then
      code = -2
    elseif ukey and not redis.call('SET', ukey, id, 'NX', 'PX', ARGV[i + 11]) then
      code = -4
    else
      -- Same layout as enqueue.lua: the envelope in the stream entry, small fields in the hash.
      local mid = add_entry(KEYS[1], id, env)
      local rkey, extra = lock_record(ukey, ARGV[i + 12], {})
      new_record(tkey, maxr, rkey, discard, nil, 'pending', F_DELIVERY, mid, nil, nil, nil, extra)
      transition(EV.ENQUEUED, id, env)
      redis.call('HSET', KEYS[4], sid, id)
      prev_key_of[sid] = tkey
      code = 1
    end
  end
  if code ~= -1 then record_fire(KEYS[7], sid, at, code, id, false) end
  if code == 1 then
    fired = fired + 1
  elseif code == -5 then
    missed = missed + 1
  else
    suppressed = suppressed + 1
  end
  out[#out + 1] = code
end
if fired > 0 then redis.call('HINCRBY', KEYS[5], 'fired', fired) end
if suppressed > 0 then redis.call('HINCRBY', KEYS[5], 'suppressed', suppressed) end
if missed > 0 then redis.call('HINCRBY', KEYS[5], 'missed', missed) end
redis.call('SET', KEYS[6], table.concat(out, ','), 'PX', ttl)
return out
