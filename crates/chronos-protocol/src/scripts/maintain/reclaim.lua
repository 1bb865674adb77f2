-- Reclaim deliveries whose worker stopped heartbeating (crashed, frozen, cut off). A delivery
-- that had started (state `active`) counts as a failed attempt; one fetched but never started
-- costs nothing. The task goes back to the end of the stream, or is dead-lettered when it has
-- no retries left (a task that keeps killing its workers ends in the archive).
-- KEYS[1]  the queue's stream, KEYS[2] its archive, KEYS[3] its failed counter, KEYS[4] its
--          failed-per-minute hash of today, KEYS[5] its failed counter of today, KEYS[6] its
--          reclaim outbox, then 3 keys per delivery: task hash, unique lock (the task hash again
--          when it has none), done marker; then, for the tenant stream, the tenants block
--          (lib.lua: "Tenants": a tenant task goes back to its place in its tenant, its entry
--          parked again, or is dead-lettered; either way its hold on the cap ends); last, the
--          queue's event stream (lib.lua: `EVENTS`)
-- ARGV[1]  consumer group, ARGV[2] min idle ms, ARGV[3] idempotency window ms, ARGV[4] outbox
--          TTL ms, then pairs: entry id, task id (from idle.lua)
-- Returns: {re-queued count, {task id, envelope, '1' if discarded else '0'}...}
-- Every task dead-lettered here is also written to the outbox (field task id, value '1' or '0'
-- for discarded, then the envelope) in this same step: its group must hear of it even when the
-- caller dies before reporting, or this reply is lost. The recoverer reports and removes the
-- entries (Maintain::reclaimed_dead, ack_reclaimed); the TTL bounds what nobody drains.
-- Each delivery is checked again: still pending and still idle (a heartbeat may have refreshed
-- it since it was listed), so a re-sent call reclaims nothing twice. An entry without a live
-- task is acked and removed. A task record that is corrupt is archived with the reason.
-- Events: `reclaimed` for a task re-queued (with the attempt the loss cost, when it cost one),
-- `dead` for one dead-lettered; an attempt counted here that was never marked started gets
-- its `started` first (lib.lua `attempt_ended`).
local group, idle = ARGV[1], ARGV[2]
local window, keep = tonumber(ARGV[3]) or 0, tonumber(ARGV[4]) or 0
if not type_ok(KEYS[1], 'stream') or not type_ok(KEYS[2], 'zset') then
  return redis.error_reply('E_CORRUPT queue keys of the wrong type')
end
-- A stray outbox of another type must not stop recovery: its entries are then not written.
local outbox = type_ok(KEYS[6], 'hash') and KEYS[6] or false
local todo = {}
local n = (#ARGV - 4) / 2
local T = nil
if #KEYS >= 6 + 3 * n + TENANTS_LEN then T = 7 + 3 * n end
for t = 0, n - 1 do
  local mid, id = ARGV[5 + t * 2], ARGV[6 + t * 2]
  local tkey, ukey, dkey = KEYS[7 + t * 3], KEYS[8 + t * 3], KEYS[9 + t * 3]
  local p = redis.call('XPENDING', KEYS[1], group, 'IDLE', idle, mid, mid, 1)
  if p[1] then
    local worker = type(p[1]) == 'table' and p[1][2] or nil
    local h = false
    if id ~= '' then
      -- A started plain task's delivery count says so (lib.lua); its hash is written here.
      materialize_if_plain(KEYS[1], group, tkey, id, mid)
      h = read_hash(tkey, F_DELIVERY, F_MAX_RETRY, F_UNIQUE, F_DISCARD, F_STATE, F_RETRIED) or false
    end
    todo[#todo + 1] = {mid, id, tkey, ukey, dkey, h, worker}
  end
end
local now = now_ms()
local requeued, dead = 0, {}
for _, t in ipairs(todo) do
  local mid, id, tkey, ukey, dkey, h, worker = unpack(t)
  local env = entry_envelope(KEYS[1], mid)
  -- A tenant task handed back keeps its entry (parked again); every other case removes it.
  local tenant = T and h and h[1] == mid and redis.call('HEXISTS', tkey, F_TENANT) == 1
  if not tenant then settle_entries(KEYS[1], group, {mid}) end
  if h and h[1] == mid then
    local attempted = h[5] == 'active'
    if not attempted then
      -- Never marked started. A worker marks a delivery as its handler starts, without waiting
      -- for the reply, so a handler that kills its process at once may leave no mark: after
      -- three free re-deliveries within one attempt, the next lost one counts as that attempt,
      -- so even such a task ends in the dead letters.
      local z = redis.pcall('HINCRBY', tkey, F_FREE_REDELIVERIES, 1)
      attempted = type(z) == 'number' and z > 3
    end
    -- An attempt counted here ends the free re-deliveries of this one (retry.lua ends them
    -- too): the budget is per attempt, not for the task's whole life.
    if attempted then redis.call('HDEL', tkey, F_FREE_REDELIVERIES) end
    local marked = h[5] == 'active'
    local r, maxr = count_of(h[6]), count_of(h[2])
    local corrupt = not r or not maxr
    if attempted and not corrupt then r = r + 1 end
    local lost = 'worker lost: no heartbeat for ' .. idle .. ' ms'
    -- The attempt history has a row for an attempt counted here (the worker's is unknown).
    local row = nil
    if attempted and not corrupt then row = attempt_row(tkey, r, worker, 'lost', lost, '', now) end
    if attempted and (corrupt or r > maxr) then
      local err = lost
      if corrupt then
        err = 'corrupt task record: retried = ' .. tostring(h[6]) .. ', max retry = ' .. tostring(h[2])
      end
      bump(KEYS[3], 1)
      history(KEYS[4], KEYS[5], 1, now)
      if tenant then
        settle_entries(KEYS[1], group, {mid})
        tenant_release(T, tkey, id)
      end
      if h[3] and h[3] == ukey then release_unique(ukey, id) end
      if h[4] == '1' then
        redis.call('DEL', tkey)
        -- Not `<entry id>|` as dead.lua writes: a worker that still ran this delivery must not
        -- read it as a discard of its own. Results only ask whether a marker exists.
        if window > 0 then redis.call('SET', dkey, '~' .. mid, 'PX', window) end
        announce(tkey)
        attempt_ended(marked, r or 1, worker, EV.DEAD, id, env, E.REASON, err)
        dead[#dead + 1] = {id, env or false, '1'}
      else
        -- No `d`: a worker that still ran this delivery must find it stale, not settled by it
        -- (its dead-letter call would report an archive it did not make).
        local fields = {tkey, F_STATE, 'archived', F_ERROR, err, F_FAILED_AT, now}
        if not corrupt then fields[#fields + 1] = F_RETRIED; fields[#fields + 1] = r end
        if env then fields[#fields + 1] = F_ENVELOPE; fields[#fields + 1] = env end
        if row then fields[#fields + 1] = F_ATTEMPTS; fields[#fields + 1] = row end
        redis.call('HSET', unpack(fields))
        redis.call('HDEL', tkey, F_DELIVERY)
        redis.call('ZADD', KEYS[2], now, id)
        announce(tkey)
        attempt_ended(marked, r or 1, worker, EV.DEAD, id, env, E.REASON, err)
        dead[#dead + 1] = {id, env or false, '0'}
      end
    else
      -- Attempted here implies a sound record (a corrupt one was archived above).
      if row then
        redis.call('HSET', tkey, F_RETRIED, r, F_ERROR, lost, F_FAILED_AT, now, F_ATTEMPTS, row)
      end
      if tenant then
        tenant_back(T, tkey, id, mid)
      else
        back_to_stream(KEYS[1], tkey, id, env)
      end
      if attempted then
        attempt_ended(marked, r, worker, EV.RECLAIMED, id, env, E.ATTEMPT, r, E.WORKER,
          worker or '')
      else
        transition(EV.RECLAIMED, id, env, E.WORKER, worker or '')
      end
      requeued = requeued + 1
    end
  end
end
if outbox and #dead > 0 then
  for _, d in ipairs(dead) do
    redis.call('HSET', outbox, d[1], d[3] .. (d[2] or ''))
  end
  if keep > 0 then redis.call('PEXPIRE', outbox, keep) end
end
return {requeued, dead}
