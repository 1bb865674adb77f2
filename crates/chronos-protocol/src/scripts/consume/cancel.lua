-- End a running task as cancelled because its handler said so (TaskError::cancel): no attempt,
-- no error, no dead letter. The task leaves the stream for the cancelled set, scored by when,
-- with its reason; its envelope moves from the entry into the hash's `e`, as for a dead letter,
-- so the inspector shows it and an operator can run it again.
-- KEYS[1]  the queue's stream, KEYS[2] its cancelled set, KEYS[3] the task hash, KEYS[4] its
--          unique lock (the task hash again when the caller knows of none); then, for a
--          delivery of the tenant stream, the tenants block (lib.lua: "Tenants": the task's
--          hold on its tenant's cap ends)
--          last, the queue's event stream (lib.lua: `EVENTS`)
-- ARGV[1]  consumer group, ARGV[2] task id, ARGV[3] stream entry id, ARGV[4] the reason,
-- ARGV[5]  how long the handler ran (ms; '' when unknown), ARGV[6] its log lines ('' for none),
--          for the attempt history
-- Returns: 1 cancelled (also for a re-sent call whose first run did it: the hash's `d` records
-- the settled delivery), 0 when the lease no longer matches (nothing changed).
-- The unique lock is released as when the task finishes (a lock released on start, or only at
-- expiry, is no longer named by the hash).
-- Its `cancelled` event comes after a `started` for an attempt never marked (lib.lua
-- `attempt_ended`).
local group, id, mid = ARGV[1], ARGV[2], ARGV[3]
local tkey, ukey = KEYS[3], KEYS[4]
if not type_ok(KEYS[1], 'stream') or not type_ok(KEYS[2], 'zset') then
  return redis.error_reply('E_CORRUPT queue keys of the wrong type')
end
materialize_if_plain(KEYS[1], group, tkey, id, mid)
local h = read_hash(tkey, F_DELIVERY, F_UNIQUE, F_SETTLED, F_STATE, F_RETRIED)
if h == nil then
  -- Not a hash: nothing of the task can be kept, but its delivery must not block the queue.
  settle_entries(KEYS[1], group, {mid})
  return 0
end
if h[1] ~= mid then
  if h[3] == mid and h[4] == 'cancelled' then return 1 end
  return 0
end
local now = now_ms()
local env = entry_envelope(KEYS[1], mid)
local attempt, worker = (count_of(h[5]) or 0) + 1, holder(KEYS[1], group, mid)
local row = attempt_row(tkey, attempt, worker, 'cancelled', ARGV[4], ARGV[5], now, ARGV[6])
settle_entries(KEYS[1], group, {mid})
if #KEYS >= 4 + TENANTS_LEN then tenant_release(5, tkey, id) end
if h[2] and h[2] == ukey then release_unique(ukey, id) end
local fields = {tkey, F_STATE, 'cancelled', F_CANCEL_REASON, ARGV[4], F_CANCELLED_AT, now,
  F_SETTLED, mid, F_ATTEMPTS, row}
if env then fields[#fields + 1] = F_ENVELOPE; fields[#fields + 1] = env end
redis.call('HSET', unpack(fields))
redis.call('HDEL', tkey, F_DELIVERY)
redis.call('ZADD', KEYS[2], now, id)
announce(tkey)
attempt_ended(h[4] == 'active', attempt, worker, EV.CANCELLED, id, env, E.REASON, ARGV[4])
return 1
