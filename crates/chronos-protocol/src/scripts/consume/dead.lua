-- Dead-letter a task: archive it, or drop it when it was enqueued with discard.
-- KEYS[1]  the queue's stream, KEYS[2] its archive, KEYS[3] its failed counter, KEYS[4] the task
--          hash, KEYS[5] its done marker, KEYS[6] its unique lock (the task hash again when the
--          caller knows of none), KEYS[7] its failed-per-minute hash of today, KEYS[8] its
--          failed counter of today; then, for a delivery of the tenant stream, the tenants
--          block (lib.lua: "Tenants": the task's hold on its tenant's cap ends)
--          last, the queue's event stream (lib.lua: `EVENTS`)
-- ARGV[1]  consumer group, ARGV[2] task id, ARGV[3] stream entry id, ARGV[4] error message,
-- ARGV[5]  '1' when this failure counts as an attempt, ARGV[6] idempotency window ms, ARGV[7]
--          how long the handler ran (ms; '' when unknown), ARGV[8] its log lines ('' for
--          none), for the attempt history
-- Returns: 1 archived, 2 discarded, 0 when the lease no longer matches (nothing changed).
-- A re-sent call whose first run settled this delivery answers what that run did: an archived
-- task's hash records the settled delivery in `d`; a discarded one leaves a done marker
-- `<entry id>|` for the idempotency window.
-- The unique lock is released either way. An archived task leaves the stream, so its envelope
-- moves from the entry into the hash's `e`. Either way the task is announced on its hash's
-- channel, for waiters, and its `dead` event written (after a `started` for an attempt never
-- marked: lib.lua `attempt_ended`).
local group, id, mid = ARGV[1], ARGV[2], ARGV[3]
local window = tonumber(ARGV[6]) or 0
local tkey, dkey, ukey = KEYS[4], KEYS[5], KEYS[6]
if not type_ok(KEYS[1], 'stream') or not type_ok(KEYS[2], 'zset') then
  return redis.error_reply('E_CORRUPT queue keys of the wrong type')
end
materialize_if_plain(KEYS[1], group, tkey, id, mid)
local h = read_hash(tkey, F_DELIVERY, F_UNIQUE, F_DISCARD, F_RETRIED, F_SETTLED, F_STATE)
if h == nil then
  -- Not a hash: nothing of the task can be kept, but its delivery must not block the queue.
  settle_entries(KEYS[1], group, {mid})
  return 0
end
if h[1] ~= mid then
  if h[5] == mid and h[6] == 'archived' then return 1 end
  local marker = redis.pcall('GET', dkey)
  if type(marker) == 'string' and string.sub(marker, 1, #mid + 1) == mid .. '|' then return 2 end
  return 0
end
local now = now_ms()
local env = entry_envelope(KEYS[1], mid)
local row = nil
local attempt = (count_of(h[4]) or 0) + 1
local worker = (h[3] ~= '1' or events_on()) and holder(KEYS[1], group, mid) or nil
if h[3] ~= '1' then
  row = attempt_row(tkey, attempt, worker, 'dead', ARGV[4], ARGV[7], now, ARGV[8])
end
local reason = string.sub(ARGV[4], 1, ATTEMPT_ERROR_BYTES)
settle_entries(KEYS[1], group, {mid})
if #KEYS >= 8 + TENANTS_LEN then tenant_release(9, tkey, id) end
bump(KEYS[3], 1)
history(KEYS[7], KEYS[8], 1, now)
if h[2] and h[2] == ukey then release_unique(ukey, id) end
if h[3] == '1' then
  redis.call('DEL', tkey)
  if window > 0 then redis.call('SET', dkey, mid .. '|', 'PX', window) end
  announce(tkey)
  attempt_ended(h[6] == 'active', attempt, worker, EV.DEAD, id, env, E.REASON, reason)
  return 2
end
local fields = {tkey, F_STATE, 'archived', F_ERROR, ARGV[4], F_FAILED_AT, now, F_SETTLED, mid}
local r = count_of(h[4])
if ARGV[5] == '1' and r then fields[#fields + 1] = F_RETRIED; fields[#fields + 1] = r + 1 end
if env then fields[#fields + 1] = F_ENVELOPE; fields[#fields + 1] = env end
if row then fields[#fields + 1] = F_ATTEMPTS; fields[#fields + 1] = row end
redis.call('HSET', unpack(fields))
redis.call('HDEL', tkey, F_DELIVERY)
redis.call('ZADD', KEYS[2], now, id)
announce(tkey)
attempt_ended(h[6] == 'active', attempt, worker, EV.DEAD, id, env, E.REASON, reason)
return 1
