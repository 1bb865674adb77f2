-- Enqueue a batch of tasks into one queue, atomically per batch.
-- KEYS[1]  the queue's stream, KEYS[2] its scheduled set, KEYS[3] this call's receipt, KEYS[4]
--          its counters of deduplicated enqueues (hash, by mode), then the task hash of each
--          task in order, then the unique lock of each unique task in order,
--          then, when a task has a level or a tenant, the queue's lanes (lib.lua: `lane`),
--          then, when a task has a tenant, its settings hash and its tenants block (lib.lua:
--          "Tenants"); then the queue's event stream (lib.lua: `EVENTS`)
-- ARGV[1]  receipt TTL ms (the idempotency window; 0 = keep no receipt)
-- then ENQUEUE_STRIDE (12) values per task: id, envelope bytes, run-at ms (0 = none), delay
--          ms, unique TTL ms (0 = not unique: then it has no lock key), max retry, dead-letter
--          discard ('1'/'0'), fingerprint ('' = none), priority level ('' = the default),
--          tenant ('' = none), '1' for last in, first out (lib.lua: `front_of`), and the
--          deduplication ('' = a plain unique lock, or none): the mode (`r` reject, `t`
--          throttle, `d` debounce, `p` replace) and the release point (`s` on start: `ur` = 1 in
--          the record; `f` on finish; `x` at expiry: no `u` in the record, so nothing but the
--          TTL or an operator frees it); a debounced task also records `df`, its first enqueue
-- Writes: a ready task as a stream entry `i=<id> e=<envelope>` plus a hash of small fields only
-- (no `e`, so Redis keeps it a compact listpack); a delayed task as a hash with `e` plus its
-- member in the scheduled set. A task of a level other than the default has `p` in its hash
-- and its entry on its level's stream (lib.lua: `lane`). Due means run-at (or now + delay) is
-- after Redis's clock. A ready task of a tenant has its entry in the tenant stream, parked, and
-- waits for its tenant's turn (lib.lua: `tenant_park`); `tn` and `to` in its record.
-- The fingerprint is what the producer chose (kind, payload, options; not the clock), given for
-- explicit task ids and kept in `fp`: an id still in use is the same task when it matches (a
-- producer retrying after a timeout builds a new call). The receipt (named by a token random per
-- call, the same in a client's re-send of the call) holds this call's codes for the window: a
-- re-send answers what the first run did and writes nothing, even after a fast worker already
-- ran and deleted the task.
-- Returns: {now, one row per task}. A row is an integer for a task this call wrote or refused
-- (kept small: a batch's reply is most of its cost outside Redis), or {2, run-at ms, state} for
-- a task already there (the same task again, or one a first run of this call wrote):
--    1  enqueued, ready now
--    3  enqueued, waiting in the scheduled set until its run-at (now + delay, or the given time)
--   -1  the unique lock is held by another task: nothing written
--   -2  this id holds a different task: nothing written
--   -3  the queue's stream or scheduled set is corrupt (wrong type): nothing written
--   -4  the task's tenant has as many tasks waiting as its backlog cap (a delayed task too):
--       nothing written
-- and for a deduplicated task whose key another task holds (nothing written):
--   {4, holder id}  a duplicate (reject, throttle)
--   {5, holder id}  the holder may take this payload (replace, debounce): the caller asks
--                   edit.lua, which knows whether the holder still waits
local now = now_ms()
local out = {now}
local n = (#ARGV - 1) / ENQUEUE_STRIDE

-- The state an existing task is in, with its run-at when it waits in the scheduled set.
local function state_of(tkey, id)
  local s = redis.pcall('HGET', tkey, F_STATE)
  if type(s) ~= 'string' then return 'completed', now end
  if s == 'scheduled' then return s, tonumber(redis.call('ZSCORE', KEYS[2], id)) or now end
  return s, now
end

local receipt = redis.pcall('GET', KEYS[3])
if type(receipt) == 'string' then
  -- A re-send: the first run's codes, one character per task ('1', '2', 'u', 'k', 'c', 'b',
  -- 'D', 'E'), then the holder of each 'D' and 'E' in order, each after a NUL.
  local holders = {}
  for h in string.gmatch(receipt, '%z([^%z]*)') do holders[#holders + 1] = h end
  for t = 0, n - 1 do
    local c = string.sub(receipt, t + 1, t + 1)
    local id = ARGV[2 + t * ENQUEUE_STRIDE]
    if c == 'D' or c == 'E' then
      local row = {4, table.remove(holders, 1) or ''}
      if c == 'E' then row[1] = 5 end
      out[#out + 1] = row
    elseif c == 'u' then
      out[#out + 1] = -1
    elseif c == 'k' then
      out[#out + 1] = -3
    elseif c == 'c' then
      out[#out + 1] = -2
    elseif c == 'b' then
      out[#out + 1] = -4
    else
      local state, at = state_of(KEYS[5 + t], id)
      out[#out + 1] = {2, at, state}
    end
  end
  return out
end

-- The stored envelope of an existing task: the hash's `e` while it is out of the stream, else
-- the `e` of its stream entry. O(1).
local function stored(h)
  if h[1] then return h[1] end
  if not h[2] then return nil end
  if h[6] and T then return entry_envelope(KEYS[T], h[2]) end
  return entry_envelope(lane_key(KEYS[1], LANES, h[5]), h[2])
end

-- Checks first: every number parses. (The queue's keys are not type-checked on this hot path:
-- a write to a corrupt one is caught with pcall below and undone for its task.)
for t = 0, n - 1 do
  local a = 1 + t * ENQUEUE_STRIDE
  for _, j in ipairs({3, 4, 5, 6}) do
    if not tonumber(ARGV[a + j]) then return redis.error_reply('E_ARGS bad number') end
  end
end

-- The lanes block follows the locks when the caller declared it.
local locks = 0
for t = 0, n - 1 do
  if tonumber(ARGV[6 + t * ENQUEUE_STRIDE]) > 0 then locks = locks + 1 end
end
local LANES, T, SETTINGS = nil, nil, nil
if #KEYS >= 4 + n + locks + LANES_LEN then LANES = 5 + n + locks end
if #KEYS >= 4 + n + locks + LANES_LEN + 1 + TENANTS_LEN then
  SETTINGS = LANES + LANES_LEN
  T = SETTINGS + 1
end

local codes, holders = {}, {}
local next_lock = 5 + n
for t = 0, n - 1 do
  local a = 1 + t * ENQUEUE_STRIDE
  local id, env = ARGV[a + 1], ARGV[a + 2]
  local at, delay, uttl = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5])
  local maxr, discard, fp, level = ARGV[a + 6], ARGV[a + 7], ARGV[a + 8], ARGV[a + 9]
  local tn, lifo = ARGV[a + 10], ARGV[a + 11] == '1'
  local spec = ARGV[a + 12]
  local mode, rel = string.sub(spec, 1, 1), string.sub(spec, 2, 2)
  if tn == '' or not T then tn = nil end
  local capped = tn
  if lifo and T and not tn then tn = front_of(level) end
  local tkey, ukey = KEYS[5 + t], nil
  if uttl > 0 then
    ukey = KEYS[next_lock]
    next_lock = next_lock + 1
  end
  local run_at = now + delay
  if at > 0 then run_at = at end
  -- A new id (the common case) costs one EXISTS; only an id in use is read.
  local h = {false, false, false, false, false}
  if redis.call('EXISTS', tkey) == 1 then
    h = read_hash(tkey, F_ENVELOPE, F_DELIVERY, F_FINGERPRINT, F_STATE, F_PRIORITY, F_TENANT)
  end
  local state
  local full = false
  -- Delayed and debounced tasks too: the cap bounds what a tenant has accepted and waiting
  -- now, and a task accepted for later is never refused when it falls due (the forwarder
  -- makes it ready whatever the backlog then).
  if capped and h and not (h[1] or h[2] or h[3]) then
    local cap = tenant_conf(T, tn)[3]
    full = cap > 0 and tenant_waiting(T, tn) >= cap
  end
  if h == nil then
    out[#out + 1] = -2
    codes[#codes + 1] = 'c'
  elseif h[1] or h[2] or h[3] then
    local same
    if fp ~= '' then same = h[3] == fp else same = stored(h) == env end
    if same then
      local at
      state, at = state_of(tkey, id)
      out[#out + 1] = {2, at, state}
      codes[#codes + 1] = '2'
    else
      out[#out + 1] = -2
      codes[#codes + 1] = 'c'
    end
  elseif full then
    out[#out + 1] = -4
    codes[#codes + 1] = 'b'
  elseif uttl > 0 and not redis.call('SET', ukey, id, 'NX', 'PX', uttl) then
    if spec == '' then
      out[#out + 1] = -1
      codes[#codes + 1] = 'u'
      if events_on() then transition(EV.DEDUPLICATED, id, env, E.HOLDER, redis.call('GET', ukey) or '') end
    else
      -- The holder's record is not declared here (its id is only known now): the caller
      -- reads it, or asks edit.lua to give it this payload.
      local holder = redis.call('GET', ukey)
      if mode == 'p' or mode == 'd' then
        out[#out + 1] = {5, holder}
        codes[#codes + 1] = 'E'
      else
        out[#out + 1] = {4, holder}
        codes[#codes + 1] = 'D'
        redis.pcall('HINCRBY', KEYS[4], mode == 't' and 'throttle' or 'reject', 1)
        transition(EV.DEDUPLICATED, id, env, E.HOLDER, holder)
      end
      holders[#holders + 1] = holder
    end
  else
    -- One HSET per task with every field (new_record): the hash is written once.
    local placed, s, where, value
    local order = nil
    if run_at > now then
      s, where, value = 'scheduled', F_ENVELOPE, env
      wake(KEYS[2], run_at)
      placed = redis.pcall('ZADD', KEYS[2], run_at, id)
      -- A LIFO task's place says so, for when the forwarder makes it ready.
      if lifo and tn then order = front_order(now) end
    elseif tn then
      local first = lifo and front_order(now) or nil
      placed, order = tenant_ready(T, KEYS[1], KEYS[LANES + LEVELS], KEYS[SETTINGS], tn, level,
        nil, first, id, env)
      s, where, value = 'pending', F_DELIVERY, placed
    else
      placed = redis.pcall('XADD', unpack(entry_args(lane(KEYS[1], LANES, level), id, env)))
      s, where, value = 'pending', F_DELIVERY, placed
    end
    if type(placed) == 'table' and placed.err then
      -- The queue's stream or scheduled set is of the wrong type: nothing of this task stays.
      if uttl > 0 then release_unique(ukey, id) end
      out[#out + 1] = -3
      codes[#codes + 1] = 'k'
    else
      local own = nil
      if level_index(level) and level ~= NORMAL_LEVEL and (LANES or tn) then own = level end
      local extra, rkey = nil, ukey
      if spec ~= '' then
        extra = {}
        if mode == 'd' then extra = {F_DEBOUNCE_FIRST, now} end
        rkey, extra = lock_record(ukey, rel, extra)
      end
      new_record(tkey, maxr, rkey, discard, fp, s, where, value, own, tn, order, extra)
      if run_at > now then
        out[#out + 1] = 3
        transition(EV.ENQUEUED, id, env, E.AT, run_at)
      else
        out[#out + 1] = 1
        transition(EV.ENQUEUED, id, env)
      end
      codes[#codes + 1] = '1'
    end
  end
end
local ttl = tonumber(ARGV[1]) or 0
if ttl > 0 then
  local r = table.concat(codes)
  if #holders > 0 then r = r .. '\0' .. table.concat(holders, '\0') end
  redis.call('SET', KEYS[3], r, 'PX', ttl)
end
return out
