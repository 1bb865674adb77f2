-- Enqueue a chain's next step, exactly once per step however often its predecessor succeeds.
-- KEYS[1]  the step's queue stream, KEYS[2] its scheduled set, KEYS[3] the step's task hash,
--          KEYS[4] the step's successor marker (`<ns>:{<q>}:fl:<id>`); last, the queue's event
--          stream (lib.lua: `EVENTS`: the step written writes its `enqueued` event)
-- ARGV[1]  task id, ARGV[2] envelope bytes, ARGV[3] run-at ms (0 = none), ARGV[4] delay ms,
-- ARGV[5]  max retry, ARGV[6] dead-letter discard ('1'/'0'), ARGV[7] marker TTL ms
-- The marker outlives the step (it stays after the step completed and was deleted), so a
-- predecessor that runs again after a crash before its ack finds it and writes nothing. The task
-- is written as enqueue.lua writes one: a ready task as a stream entry plus a hash of small
-- fields, a delayed one as a hash with `e` plus its member in the scheduled set.
-- Returns: 1 written now, 0 enqueued before (marker or task present), -3 the queue's stream or
-- scheduled set has the wrong type (nothing written).
local id, env = ARGV[1], ARGV[2]
local at, delay = tonumber(ARGV[3]) or 0, tonumber(ARGV[4]) or 0
local ttl = tonumber(ARGV[7]) or 0
if redis.call('EXISTS', KEYS[4]) == 1 or redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
if not type_ok(KEYS[1], 'stream') or not type_ok(KEYS[2], 'zset') then return -3 end
local now = now_ms()
local run_at = now + delay
if at > 0 then run_at = at end
if run_at > now then
  wake(KEYS[2], run_at)
  redis.call('ZADD', KEYS[2], run_at, id)
  new_record(KEYS[3], ARGV[5], false, ARGV[6], nil, 'scheduled', F_ENVELOPE, env)
  transition(EV.ENQUEUED, id, env, E.AT, run_at)
else
  local mid = add_entry(KEYS[1], id, env)
  new_record(KEYS[3], ARGV[5], false, ARGV[6], nil, 'pending', F_DELIVERY, mid)
  transition(EV.ENQUEUED, id, env)
end
if ttl > 0 then redis.call('SET', KEYS[4], '1', 'PX', ttl) end
return 1
