-- Check fetched, not yet started deliveries against their rate key's limit (starts per period
-- per key, in fixed windows aligned to the period by Redis' clock). A delivery whose key has
-- room takes a start from it; one whose key is full is deferred: it leaves the stream for the
-- queue's scheduled set, due when its key's next window opens, without spending an attempt and
-- without an error (the forwarder brings it back then).
-- A delivery whose key is blocked by a handler (TaskError::rate_limited, backoff.lua) is
-- deferred the same way to the block's end plus a jitter (lib.lua `backoff_due`), whatever
-- room its window has; a rate of 0 checks blocks only (a queue without a per-key rate).
-- KEYS[1]  the queue's stream, KEYS[2] its scheduled set, KEYS[3] its blocked keys (lib.lua
--          `key_block_end`), then 2 keys per delivery: task hash,
--          the rate key's window (string `<window start ms>:<starts>:<deferred>`); then, for
--          deliveries of the tenant stream, the tenants block (lib.lua: "Tenants": a deferred
--          task's hold on its tenant's cap ends; the forwarder brings it back to its tenant);
--          last, the queue's event stream (lib.lua: `EVENTS`)
-- ARGV[1]  consumer group, ARGV[2] starts per period per key (0: none, blocks only), ARGV[3] period ms, then triples:
--          task id, stream entry id, rate key (0 rate: blocks only)
-- Returns: one row per delivery: {1} run it (also for a corrupt record, which start.lua then
-- reports), {0, due ms} deferred, {-1} no longer current (deleted or settled; its entry is
-- acked and removed).
-- A plain task (lib.lua: one entry, no hash) carries no rate key when Rust enqueued it, but an
-- entry written by another producer may, and it must never be taken for a gone delivery: a
-- deferred one gets its hash first (`materialize`, as retry does: it leaves the stream and is
-- kept), and one that runs takes its start without a record (a hash its worker's plain-task
-- path would never settle), so a re-sent call may count its start twice in that window.
-- A re-sent call answers the same without counting twice: a delivery that took its start
-- records it in the hash's `k`, and a deferred one its entry id in `d` (the settled delivery,
-- as retry does) with state `scheduled`. Each deferred delivery writes its `deferred` event
-- (once: a re-sent call writes none).
-- Deferred deliveries of one key are spread over the windows ahead (the k-th deferred in a
-- window is due `1 + floor(k / rate)` windows later), so a backlog of one key comes back about
-- `rate` per window instead of all at once and again and again.
local group, rate, period = ARGV[1], tonumber(ARGV[2]) or 1, tonumber(ARGV[3]) or 1000
-- Rate 0: no per-key rate, only blocks (then no window is read or written).
if period < 1 then period = 1 end
if not type_ok(KEYS[1], 'stream') or not type_ok(KEYS[2], 'zset') then
  return redis.error_reply('E_CORRUPT queue keys of the wrong type')
end
local now = now_ms()
local w = now - now % period
local n = (#ARGV - 3) / 3
local T = nil
if #KEYS >= 3 + 2 * n + TENANTS_LEN then T = 4 + 2 * n end
-- Blocked keys, read once per key and only when any block exists.
local blocked = nil
if redis.call('EXISTS', KEYS[3]) == 1 then blocked = {} end
-- Reads first: the hash of each task and the window of each key.
local todo, windows = {}, {}
for t = 0, n - 1 do
  local id, mid, rk = ARGV[4 + t * 3], ARGV[5 + t * 3], ARGV[6 + t * 3]
  local tkey, kkey = KEYS[4 + t * 2], KEYS[5 + t * 2]
  local h = read_hash(tkey, F_DELIVERY, F_RATE_TAKEN, F_SETTLED, F_STATE)
  -- A live plain task's delivery is its entry, whose id is the task's.
  local plain = nil
  if h and not h[1] and not h[4] and id == mid then
    local ps, pf = plain_state(KEYS[1], group, tkey, id, true)
    if ps then
      plain = {ps, pf}
      h = {mid, false, false, ps}
    end
  end
  if blocked and blocked[kkey] == nil then
    blocked[kkey] = key_block_end(KEYS[3], rk, now)
  end
  if windows[kkey] == nil and rate <= 0 then
    windows[kkey] = {0, 0}
  elseif windows[kkey] == nil then
    local v = redis.pcall('GET', kkey)
    local used, deferred = 0, 0
    if type(v) == 'string' then
      local vw, vn, vd = string.match(v, '^(%-?%d+):(%d+):(%d+)$')
      if tonumber(vw) == w then used, deferred = tonumber(vn) or 0, tonumber(vd) or 0 end
    end
    windows[kkey] = {used, deferred}
  end
  todo[#todo + 1] = {id, mid, tkey, kkey, h, plain}
end
local out, touched = {}, {}
for _, t in ipairs(todo) do
  local id, mid, tkey, kkey, h, plain = unpack(t)
  -- Before a plain task is set aside it gets the record a deferred task keeps.
  local function keep_plain()
    if plain and redis.call('EXISTS', tkey) == 0 then materialize(tkey, id, plain[1], plain[2]) end
  end
  if h == nil then
    -- Not a hash: start.lua reports the corrupt record and the worker dead-letters it.
    out[#out + 1] = {1}
  elseif h[1] == mid then
    if h[2] == mid then
      out[#out + 1] = {1}
    elseif blocked and blocked[kkey] > 0 then
      local due = backoff_due(id, blocked[kkey], now)
      keep_plain()
      local env = set_aside(KEYS[1], group, tkey, id, mid, {F_STATE, 'scheduled', F_SETTLED, mid},
        KEYS[2], due, T)
      transition(EV.DEFERRED, id, env, E.AT, due, E.REASON, 'rate key blocked')
      out[#out + 1] = {0, due}
    elseif rate <= 0 then
      out[#out + 1] = {1}
    elseif windows[kkey][1] < rate then
      windows[kkey][1] = windows[kkey][1] + 1
      touched[kkey] = true
      if not plain then redis.call('HSET', tkey, F_RATE_TAKEN, mid) end
      out[#out + 1] = {1}
    else
      local due = w + period * (1 + math.floor(windows[kkey][2] / rate))
      windows[kkey][2] = windows[kkey][2] + 1
      touched[kkey] = true
      keep_plain()
      local fields = {tkey, F_STATE, 'scheduled', F_SETTLED, mid}
      local env = entry_envelope(KEYS[1], mid)
      if env then fields[#fields + 1] = F_ENVELOPE; fields[#fields + 1] = env end
      settle_entries(KEYS[1], group, {mid})
      if T then tenant_release(T, tkey, id) end
      redis.call('HSET', unpack(fields))
      redis.call('HDEL', tkey, F_DELIVERY)
      wake(KEYS[2], due)
      redis.call('ZADD', KEYS[2], due, id)
      transition(EV.DEFERRED, id, env, E.AT, due, E.REASON, 'rate key full')
      out[#out + 1] = {0, due}
    end
  elseif h[3] == mid and h[4] == 'scheduled' then
    local due = tonumber(redis.call('ZSCORE', KEYS[2], id)) or (w + period)
    out[#out + 1] = {0, due}
  else
    settle_entries(KEYS[1], group, {mid})
    out[#out + 1] = {-1}
  end
end
for kkey in pairs(touched) do
  local c = windows[kkey]
  redis.call('SET', kkey, w .. ':' .. c[1] .. ':' .. c[2], 'PXAT', w + period)
end
return out
