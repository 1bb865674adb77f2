-- Put a running task back for later because its handler said "not now" (TaskError::snooze):
-- like a retry, but no attempt is spent and no error recorded; the record's snooze counter
-- (`F_SNOOZES`) goes up instead, and the task waits in the scheduled set, as a task enqueued
-- with a delay does, until the forwarder brings it back (to its level, or to its tenant).
-- KEYS[1]  the queue's stream, KEYS[2] its scheduled set, KEYS[3] the task hash; then, for a
--          delivery of the tenant stream, the tenants block (lib.lua: "Tenants": the task's
--          hold on its tenant's cap ends)
--          last, the queue's event stream (lib.lua: `EVENTS`)
-- ARGV[1]  consumer group, ARGV[2] task id, ARGV[3] stream entry id, ARGV[4] delay ms (from
--          Redis's clock), ARGV[5] the most snoozes allowed (the task would be over it: nothing
--          changes, the caller dead-letters it), ARGV[6] how long the handler ran (ms; ''
--          when unknown), ARGV[7] its log lines ('' for none), for the attempt history
-- Returns: {1, snoozes} snoozed (also for a re-sent call whose first run did it: the hash's `d`
-- records the settled delivery), {2, snoozes} refused, the task has snoozed the most it may,
-- {0, 0} the lease no longer matches (reclaimed or deleted task): nothing changed.
-- Its `snoozed` event comes after a `started` for an attempt never marked (lib.lua
-- `attempt_ended`).
local group, id, mid = ARGV[1], ARGV[2], ARGV[3]
local delay = tonumber(ARGV[4]) or 0
local most = tonumber(ARGV[5]) or 0
local tkey = KEYS[3]
if not type_ok(KEYS[1], 'stream') or not type_ok(KEYS[2], 'zset') then
  return redis.error_reply('E_CORRUPT queue keys of the wrong type')
end
materialize_if_plain(KEYS[1], group, tkey, id, mid)
local h = read_hash(tkey, F_DELIVERY, F_SETTLED, F_SNOOZES, F_RETRIED, F_STATE)
if h == nil then return {0, 0} end
-- A corrupt counter restarts at 0 rather than failing the script after a write.
local n = count_of(h[3]) or 0
if h[1] ~= mid then
  if h[2] == mid then return {1, n} end
  return {0, 0}
end
if n >= most then return {2, n} end
local now = now_ms()
local T = nil
if #KEYS >= 3 + TENANTS_LEN then T = 4 end
local attempt, worker = (count_of(h[4]) or 0) + 1, holder(KEYS[1], group, mid)
local row = attempt_row(tkey, attempt, worker, 'snoozed', '', ARGV[6], now, ARGV[7])
local env = set_aside(KEYS[1], group, tkey, id, mid, {F_STATE, 'scheduled', F_SETTLED, mid,
  F_SNOOZES, n + 1, F_ATTEMPTS, row}, KEYS[2], now + delay, T)
attempt_ended(h[5] == 'active', attempt, worker, EV.SNOOZED, id, env, E.AT, now + delay)
return {1, n + 1}
