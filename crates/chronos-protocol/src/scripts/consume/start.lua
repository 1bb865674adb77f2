-- Mark deliveries as started, right before their handlers run: from here on a lost worker costs
-- the task an attempt (so a task that keeps killing its workers ends in the dead letters), while
-- a delivery never started costs nothing.
-- KEYS[1]  the queue's stream, then one task hash per delivery of a task with a hash, then the
--          unique lock of each of those deliveries whose lease names one, in the same order,
--          then the queue's event stream (lib.lua: `EVENTS`)
-- ARGV[1]  consumer group, ARGV[2] how many deliveries have a task hash (n), then for each of
--          them two values: its entry id, and its task id when its lock is declared ('' when
--          not); then the entry ids of plain tasks' deliveries (lib.lua), which have no hash
-- A task whose lock is let go on start (`ur` = '1' in its record, a deduplication's release
-- point) releases it here, if it still holds it, and forgets it (no `u` any more).
-- Returns: one row per delivery, in the order of ARGV:
--   {1, retried, max retry, last error, last failed at ms, unique lock key}  started (fields
--      the caller merges into the envelope it read with the entry; '' where absent)
--   {0}            the delivery is no longer this one (task deleted or settled): its entry is
--                  acked and removed so it never blocks the queue
--   {-1, reason}   the task record is corrupt: nothing written; the caller dead-letters it
-- A plain task's delivery is marked on its pending entry instead (one XCLAIM for all of them,
-- setting the delivery count to STARTED), and its row is {1, 0, max retry, '', 0, ''}: its
-- first attempt (a retried task has a hash), its max retry from the entry's `x` (the default
-- where it has none).
-- Running twice gives the same rows (a started task is started again as a no-op), and writes
-- the `started` event of a delivery only in the call that marked it.
local group = ARGV[1]
local n = tonumber(ARGV[2]) or 0
local out = {}
local next_lock = 2 + n
for j = 1, n do
  local mid, id, tkey = ARGV[1 + 2 * j], ARGV[2 + 2 * j], KEYS[1 + j]
  local ukey = nil
  if id ~= '' then
    ukey = KEYS[next_lock]
    next_lock = next_lock + 1
  end
  local h = read_hash(tkey, F_DELIVERY, F_RETRIED, F_MAX_RETRY, F_ERROR, F_FAILED_AT, F_UNIQUE,
    F_UNIQUE_RELEASE, F_STATE)
  if h == nil then
    out[#out + 1] = {-1, 'corrupt task record: not a hash'}
  elseif h[1] ~= mid then
    settle_entries(KEYS[1], group, {mid})
    out[#out + 1] = {0}
  elseif not count_of(h[2]) or not count_of(h[3]) then
    out[#out + 1] = {-1, 'corrupt task record: retried = ' .. tostring(h[2]) ..
      ', max retry = ' .. tostring(h[3])}
  else
    redis.call('HSET', tkey, F_STATE, 'active')
    local held = h[6]
    if held and h[7] == '1' then
      if ukey == held then release_unique(ukey, id) end
      redis.call('HDEL', tkey, F_UNIQUE, F_UNIQUE_RELEASE)
      held = nil
    end
    out[#out + 1] = {1, h[2], h[3], h[4] or '', h[5] or '0', held or ''}
    -- Every delivery starts `pending` (a new one is written so), so `active` here is this
    -- delivery marked by an earlier run of this call.
    if h[8] ~= 'active' and events_on() then
      transition(EV.STARTED, id ~= '' and id or tkey_id(tkey),
        entry_envelope(KEYS[1], mid), E.ATTEMPT, count_of(h[2]) + 1, E.WORKER,
        holder(KEYS[1], group, mid) or '')
    end
  end
end
local plain = {}
for i = 3 + 2 * n, #ARGV do plain[#plain + 1] = ARGV[i] end
if #plain == 0 then return out end
-- The owner of these deliveries (one consumer fetched them all): the first one still pending
-- names it. XCLAIM leaves out ids no longer pending (settled, reclaimed or deleted).
-- With events on, each delivery's count too: one already at STARTED was marked by an earlier
-- run of this call, and gets no second `started`.
local owner
local marked = {}
for _, mid in ipairs(plain) do
  local p = redis.pcall('XPENDING', KEYS[1], group, mid, mid, 1)
  if type(p) == 'table' and not p.err and p[1] then
    owner = owner or p[1][2]
    marked[mid] = (tonumber(p[1][4]) or 0) >= STARTED
    if not events_on() then break end
  end
end
local live = {}
if owner then
  for i = 1, #plain, 1000 do
    local args = {KEYS[1], group, owner, 0}
    for j = i, math.min(i + 999, #plain) do args[#args + 1] = plain[j] end
    args[#args + 1] = 'RETRYCOUNT'
    args[#args + 1] = STARTED
    -- Not JUSTID: the entries' fields tell each task's max retry (`x`), which a worker needs
    -- when the envelope does not decode. RETRYCOUNT sets the count either way.
    local got = redis.pcall('XCLAIM', unpack(args))
    if type(got) == 'table' and not got.err then
      for _, e in ipairs(got) do
        if type(e) == 'table' and e[1] then
          live[e[1]] = field_of(e[2], F_MAX_RETRY) or PLAIN_MAX_RETRY
          if not marked[e[1]] then
            transition(EV.STARTED, e[1], field_of(e[2], F_ENVELOPE), E.ATTEMPT, 1, E.WORKER, owner)
          end
        end
      end
    end
  end
end
for _, mid in ipairs(plain) do
  if live[mid] then
    out[#out + 1] = {1, '0', live[mid], '', '0', ''}
  else
    settle_entries(KEYS[1], group, {mid})
    out[#out + 1] = {0}
  end
end
return out
