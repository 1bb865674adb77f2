-- Acknowledge a batch of succeeded tasks of one queue.
-- KEYS[1]  the queue's stream, KEYS[2] its completed set, KEYS[3] its processed counter,
--          KEYS[4] its processed-per-minute hash of today, KEYS[5] its processed counter of today,
--          then 2 keys per task: task hash, unique lock (the task hash again when the caller
--          knows of none); then, for deliveries of the tenant stream, the tenants block
--          (lib.lua: "Tenants": each completed task's hold on its tenant's cap ends)
--          last, the queue's event stream (lib.lua: `EVENTS`)
-- ARGV[1]  consumer group, ARGV[2] how many tasks have a hash (n)
-- then COMPLETE_STRIDE (6) values per such task: task id, stream entry id, retention ms (0 =
--          delete at once), the handler's result ('' for none; kept as `res` only with a
--          retention), how long the handler ran (ms; '' when unknown) and its log lines (''
--          for none): a retained task's attempt history gets its row; then the entry ids of plain tasks (lib.lua: no hash, no lock, no
--          retention), which need nothing but their entry acked and deleted
-- Returns: how many of the tasks are completed by this delivery, counting retained ones a first
-- run of this same call already completed (a re-sent call: the hash's `d` names the delivery)
-- without touching them again. A task whose entry id no longer matches otherwise (completed
-- and deleted by a first run, reclaimed, or deleted) is left alone, which makes re-sends no-ops.
-- A retained task leaves the stream, so its envelope moves from the entry into the hash's `e`;
-- `c` is its completion time, `d` the settled delivery. A retained task is announced on its
-- hash's channel, for waiters; a deleted one is not (nothing would be left to read).
-- Each completion's `completed` event comes after a `started` for an attempt never marked (a
-- handler that ended within the worker's mark delay: lib.lua `attempt_ended`).
local group, n = ARGV[1], tonumber(ARGV[2]) or 0
local now = now_ms()
local T = nil
if #KEYS >= 5 + 2 * n + TENANTS_LEN then T = 6 + 2 * n end
-- A plain task is completed by its ack: XACK counts only deliveries still pending, so a stale
-- or re-sent one counts nothing.
local plain, acked_plain = {}, 0
for i = 3 + COMPLETE_STRIDE * n, #ARGV do plain[#plain + 1] = ARGV[i] end
if #plain > 0 and events_on() then
  -- One entry at a time, so that only a delivery this call completes is an event.
  for _, mid in ipairs(plain) do
    local env = entry_envelope(KEYS[1], mid)
    local worker, marked = plain_mark(KEYS[1], group, mid)
    local n = tonumber(redis.pcall('XACK', KEYS[1], group, mid)) or 0
    redis.pcall('XDEL', KEYS[1], mid)
    -- A plain task's attempt is its first (a retried task has a record).
    if n > 0 then attempt_ended(marked, 1, worker, EV.COMPLETED, mid, env) end
    acked_plain = acked_plain + n
  end
elseif #plain > 0 then
  for i = 1, #plain, 1000 do
    local part = {unpack(plain, i, math.min(i + 999, #plain))}
    acked_plain = acked_plain + (tonumber(redis.pcall('XACK', KEYS[1], group, unpack(part))) or 0)
    redis.pcall('XDEL', KEYS[1], unpack(part))
  end
end
-- Reads first, so a corrupt record fails only itself and nothing errors after a write.
local live, before = {}, 0
for t = 0, n - 1 do
  local a, k = 2 + t * COMPLETE_STRIDE, 5 + t * 2
  local id, mid, keep = ARGV[a + 1], ARGV[a + 2], tonumber(ARGV[a + 3]) or 0
  -- A plain task completed with a retention (its caller asked for one) needs its record.
  materialize_if_plain(KEYS[1], group, KEYS[k + 1], id, mid)
  local h = read_hash(KEYS[k + 1], F_DELIVERY, F_UNIQUE, F_SETTLED, F_STATE, F_RETRIED)
  if h and h[1] == mid then
    live[#live + 1] = {id, mid, keep, KEYS[k + 1], KEYS[k + 2], h, ARGV[a + 4], ARGV[a + 5],
      ARGV[a + 6]}
  elseif h and h[3] == mid and h[4] == 'completed' then
    before = before + 1
  end
end
if #live == 0 then
  if acked_plain > 0 then bump(KEYS[3], acked_plain) end
  history(KEYS[4], KEYS[5], acked_plain, now)
  return before + acked_plain
end
local acked, dropped = {}, {}
for _, t in ipairs(live) do
  local id, mid, keep, tkey, ukey, h, res, ran, logs = unpack(t)
  acked[#acked + 1] = mid
  if h[2] and h[2] == ukey then release_unique(ukey, id) end
  if T then tenant_release(T, tkey, id) end
  local attempt = (count_of(h[5]) or 0) + 1
  local result = (res and res ~= '') and '1' or ''
  if keep > 0 then
    local worker = holder(KEYS[1], group, mid)
    local row = attempt_row(tkey, attempt, worker, 'succeeded', '', ran, now, logs)
    local fields = {tkey, F_STATE, 'completed', F_COMPLETED_AT, now, F_SETTLED, mid, F_ATTEMPTS, row}
    local env = entry_envelope(KEYS[1], mid)
    if env then fields[#fields + 1] = F_ENVELOPE; fields[#fields + 1] = env end
    if res and res ~= '' then fields[#fields + 1] = F_RESULT; fields[#fields + 1] = res end
    redis.call('HSET', unpack(fields))
    redis.call('HDEL', tkey, F_DELIVERY)
    redis.call('PEXPIRE', tkey, keep)
    redis.pcall('ZADD', KEYS[2], now + keep, id)
    announce(tkey)
    attempt_ended(h[4] == 'active', attempt, worker, EV.COMPLETED, id, env, E.RESULT, result)
  else
    dropped[#dropped + 1] = tkey
    if events_on() then
      attempt_ended(h[4] == 'active', attempt, holder(KEYS[1], group, mid), EV.COMPLETED, id,
        entry_envelope(KEYS[1], mid), E.RESULT, result)
    end
  end
end
settle_entries(KEYS[1], group, acked)
if #dropped > 0 then redis.call('DEL', unpack(dropped)) end
bump(KEYS[3], #acked + acked_plain)
history(KEYS[4], KEYS[5], #acked + acked_plain, now)
return #acked + acked_plain + before
