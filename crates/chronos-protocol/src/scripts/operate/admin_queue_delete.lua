-- Deletes the keys of a queue that holds no task (the caller deletes the tasks first, in bounded
-- chunks, when forced): its sets, streams, counters and settings, and every other key of the
-- queue the caller found (SCAN of the queue's prefix): the event stream, the deduplication
-- counters, history and run-time counts, limiter and block state, locks, receipts, markers,
-- progress and group records, so a queue created again under the name starts empty. The
-- scheduler's keys of the queue (`sched:*`) are the caller's to leave: its fences and fire
-- state guard the schedules that still feed the queue against double fires.
-- KEYS[1]  the queue's stream, KEYS[2..5] its scheduled, retry, archived and completed sets,
-- KEYS[6..7] its processed and failed counters, KEYS[8] its cancel set, KEYS[9..19] its lanes
--          (lib.lua: `lane`), KEYS[20] its stored settings, then its tenants block (lib.lua:
--          "Tenants"; the tenant stream's entries are tasks, the tenants' settings go too), then
--          its cancelled set, then any other keys of the queue to delete, then its event stream
--          (lib.lua: `EVENTS`, always declared here, last)
-- Returns: the number of tasks still held (nothing deleted then), or 0 when the keys were
-- deleted (also for a re-sent call: the keys are gone already). A caller with more keys than
-- one call should take calls again with the rest: each checks that nothing is held first.
local held = 0
local t = redis.call('TYPE', KEYS[1])
t = t.ok or t
if t == 'stream' then
  -- The entries new levels left (lib.lua: `lane`) hold no task.
  held = held + redis.call('XLEN', KEYS[1]) - markers_in(KEYS[1], KEYS[9 + LEVELS])
elseif t ~= 'none' then
  return redis.error_reply('E_CORRUPT queue keys of the wrong type')
end
for l = 0, LEVELS - 1 do
  local key = KEYS[9 + l]
  if key ~= KEYS[1] then
    local lt = redis.call('TYPE', key)
    lt = lt.ok or lt
    if lt == 'stream' then held = held + redis.call('XLEN', key) end
  end
end
for j = 2, 5 do
  if not type_ok(KEYS[j], 'zset') then
    return redis.error_reply('E_CORRUPT queue keys of the wrong type')
  end
  held = held + redis.call('ZCARD', KEYS[j])
end
local X = 21 + TENANTS_LEN
if not type_ok(KEYS[X], 'zset') then
  return redis.error_reply('E_CORRUPT queue keys of the wrong type')
end
held = held + redis.call('ZCARD', KEYS[X])
local T = 21
local tt = redis.call('TYPE', KEYS[T])
tt = tt.ok or tt
if tt == 'stream' then held = held + redis.call('XLEN', KEYS[T]) end
if held > 0 then return held end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8])
for j = 9, 9 + LANES_LEN do redis.call('DEL', KEYS[j]) end
for j = T, T + TENANTS_LEN - 1 do redis.call('DEL', KEYS[j]) end
redis.call('DEL', KEYS[X])
for j = X + 1, #KEYS do redis.call('DEL', KEYS[j]) end
drop_events()
return 0
