-- Schedule a failed task for a later attempt.
-- KEYS[1]  the queue's stream, KEYS[2] its retry set, KEYS[3] its failed counter, KEYS[4] the
--          task hash, KEYS[5] its failed-per-minute hash of today, KEYS[6] its failed counter
--          of today; then, for a delivery of the tenant stream, the tenants block (lib.lua:
--          "Tenants": the task's hold on its tenant's cap ends)
--          last, the queue's event stream (lib.lua: `EVENTS`)
-- ARGV[1]  consumer group, ARGV[2] task id, ARGV[3] stream entry id, ARGV[4] delay ms (from
--          Redis's clock), ARGV[5] error message, ARGV[6] how long the handler ran (ms; '' when
--          unknown), ARGV[7] its log lines ('' for none), for the attempt history (lib.lua
--          `attempt_row`)
-- Returns: 1 when moved to the retry set (also for a re-sent call whose first run did it: the
-- hash's `d` records the settled delivery), 0 when the lease no longer matches (reclaimed or
-- deleted task): nothing changed.
-- The task leaves the stream, so its envelope moves from the entry into the hash's `e`.
-- Its `retried` event comes after a `started` for an attempt never marked (lib.lua
-- `attempt_ended`).
local group, id, mid = ARGV[1], ARGV[2], ARGV[3]
local delay = tonumber(ARGV[4]) or 0
local tkey = KEYS[4]
if not type_ok(KEYS[1], 'stream') or not type_ok(KEYS[2], 'zset') then
  return redis.error_reply('E_CORRUPT queue keys of the wrong type')
end
materialize_if_plain(KEYS[1], group, tkey, id, mid)
local h = read_hash(tkey, F_DELIVERY, F_SETTLED, F_RETRIED, F_STATE)
if h == nil then return 0 end
if h[1] ~= mid then
  if h[2] == mid then return 1 end
  return 0
end
local now = now_ms()
-- A corrupt attempt counter restarts at 1 rather than failing the script after a write.
local r = (count_of(h[3]) or 0) + 1
local T = nil
if #KEYS >= 6 + TENANTS_LEN then T = 7 end
-- The attempt is counted: the free re-deliveries (`z`, reclaim.lua) start again for the next.
local worker = holder(KEYS[1], group, mid)
local row = attempt_row(tkey, r, worker, 'retried', ARGV[5], ARGV[6], now, ARGV[7])
local env = set_aside(KEYS[1], group, tkey, id, mid, {F_STATE, 'retry', F_ERROR, ARGV[5],
  F_FAILED_AT, now, F_SETTLED, mid, F_RETRIED, r, F_ATTEMPTS, row}, KEYS[2], now + delay, T)
bump(KEYS[3], 1)
history(KEYS[5], KEYS[6], 1, now)
attempt_ended(h[4] == 'active', r, worker, EV.RETRIED, id, env, E.ATTEMPT, r, E.REASON,
  string.sub(ARGV[5], 1, ATTEMPT_ERROR_BYTES), E.AT, now + delay)
return 1
