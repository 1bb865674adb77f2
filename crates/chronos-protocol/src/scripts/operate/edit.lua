-- Operator action "edit": changes the payload, the run time and/or the priority level of one
-- waiting task (pending, scheduled or retry) in one step. An active, completed or archived task
-- is refused and nothing changes.
-- * Payload: spliced into the stored envelope (every other envelope field is kept byte for
--   byte, the kind included). A pending task's envelope lives in its stream entry, which
--   cannot change: the task gets a new entry (same task id) and the old one is removed. An
--   operator's edit of a task a worker has fetched (started or not: its start mark may be
--   skipped, its completion carried to the next fetch) is refused as active, since a new entry
--   would run it again; a deduplicating enqueue withdraws the unstarted delivery instead (the
--   worker finds it gone at start), so the newer payload runs. Without a tenant the new entry is at the end of its level;
--   a tenant task keeps its place inside its tenant (a level change gives it the place
--   prioritize gives).
-- * Run time (unix ms, the caller's): a pending task with a run time after now (Redis' clock)
--   leaves the stream and waits in the scheduled set; a scheduled or retry task is re-scored in
--   its own set. A run time now or past means "due now": a pending task stays as it is, a
--   waiting one is scored now (the forwarder moves it at once) unless it is due already.
-- * Level: as prioritize.lua.
-- The unique lock (if any) is left as it is: it still guards the task until the task ends.
-- KEYS[1]  the queue's stream, KEYS[2] the task hash, KEYS[3] its scheduled set, KEYS[4] its
--          retry set, KEYS[5] its counters of deduplicated enqueues (hash, by mode), KEYS[6..16]
--          the queue's lanes (lib.lua: `lane`), KEYS[17] its settings hash, then its tenants
--          block (lib.lua: "Tenants"); last, the queue's event stream (lib.lua: `EVENTS`: an
--          edit writes `edited`, with the run time and the level when they changed)
-- ARGV[1]  consumer group, ARGV[2] task id, ARGV[3] '1' when the payload changes, ARGV[4] the
--          new payload (MessagePack bytes), ARGV[5] the kind the payload is for ('': any),
--          ARGV[6] the new run time in unix ms ('': unchanged), ARGV[7] the new level ('0'..'9';
--          '': unchanged), ARGV[8] the deduplication asking ('': an operator): `p` a replace,
--          `d:<delay ms>:<max wait ms>` a debounce, whose run time is now + delay but no later
--          than the record's `df` (the run's first enqueue) + max wait (ARGV[6] is then unused).
--          Either refuses a retry task (it started once: not a waiting task of its key any more)
-- Returns: {code, state, run time ms}: 1 edited, 2 nothing to change (the task already is as
-- asked: also a call re-sent after a lost reply), 0 no such task, -1 its state refuses it, -2
-- corrupt record (or an envelope this version cannot read), -3 the task is of another kind
-- (the kind follows instead of the state). Nothing is written unless the code is 1. The run
-- time (the task's score, or now for a pending task) comes with codes 1 and 2 only.
local group, id = ARGV[1], ARGV[2]
if not type_ok(KEYS[3], 'zset') or not type_ok(KEYS[4], 'zset') then
  return redis.error_reply('E_CORRUPT queue keys of the wrong type')
end
local has_payload, payload, want_kind = ARGV[3] == '1', ARGV[4], ARGV[5]
local run_at = nil
if ARGV[6] ~= '' then
  run_at = tonumber(ARGV[6])
  if not run_at then return redis.error_reply('E_ARGS bad run time') end
end
local rule = ARGV[8] or ''
local bounce_delay, bounce_max = string.match(rule, '^d:(%d+):(%d+)$')
local level = nil
if ARGV[7] ~= '' then
  level = ARGV[7]
  if not level_index(level) then return redis.error_reply('E_ARGS bad level') end
end
local T = #KEYS - TENANTS_LEN + 1
local SETTINGS = T - 1
local LANES = SETTINGS - LANES_LEN
local tkey = KEYS[2]
local sets = {scheduled = KEYS[3], retry = KEYS[4]}

-- MessagePack reading, enough to find the payload in an envelope (TaskEnvelope::encode: the
-- version byte, then an array whose first fields are id, kind and queue as str and the payload
-- as bin). Each answers the value's length and the index of its first byte, or nil.
local function be(b, i, n)
  local v = 0
  for j = i, i + n - 1 do
    local c = string.byte(b, j)
    if not c then return nil end
    v = v * 256 + c
  end
  return v
end
local function sized(b, i, fix_lo, fix_hi, w8, w16, w32)
  local c = string.byte(b, i)
  local len, at
  if not c then return nil end
  if fix_lo and c >= fix_lo and c <= fix_hi then
    len, at = c - fix_lo, i + 1
  elseif c == w8 then
    len, at = be(b, i + 1, 1), i + 2
  elseif c == w16 then
    len, at = be(b, i + 1, 2), i + 3
  elseif c == w32 then
    len, at = be(b, i + 1, 4), i + 5
  end
  if not len or at + len - 1 > #b then return nil end
  return len, at
end
local function str_at(b, i)
  local len, at = sized(b, i, 0xa0, 0xbf, 0xd9, 0xda, 0xdb)
  if not len then return nil end
  return string.sub(b, at, at + len - 1), at + len
end
local function bin_header(n)
  if n < 256 then return string.char(0xc4, n) end
  if n < 65536 then return string.char(0xc5, math.floor(n / 256), n % 256) end
  return string.char(0xc6, math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256,
    math.floor(n / 256) % 256, n % 256)
end
-- The kind of envelope `env` and the envelope with `new` as its payload; nil when `env` is not
-- an envelope of the version this script knows.
local function splice(env, new)
  if string.byte(env, 1) ~= ENVELOPE_VERSION then return nil end
  local c, i = string.byte(env, 2), nil
  if not c then return nil end
  if c >= 0x90 and c <= 0x9f then i = 3 elseif c == 0xdc then i = 5 elseif c == 0xdd then i = 7 end
  if not i then return nil end
  local kind, skipped
  skipped, i = str_at(env, i)
  if i then kind, i = str_at(env, i) end
  if i then skipped, i = str_at(env, i) end
  if not i then return nil end
  local len, at = sized(env, i, nil, nil, 0xc4, 0xc5, 0xc6)
  if not len then return nil end
  return kind, string.sub(env, 1, i - 1) .. bin_header(#new) .. new .. string.sub(env, at + len)
end

-- Reads first: the task, its envelope, and what would change.
local ps, pf, delivered = plain_state(KEYS[1], group, tkey, id)
-- For an operator, a delivered task is a worker's, started or not (its start mark may be
-- skipped, its completion carried): a new entry would run the same task again (issue 35,
-- 2.17). A deduplicating enqueue (rule) still withdraws an unstarted delivery: the newer payload
-- is the one meant to run.
if ps == 'active' or (ps and delivered and rule == '') then return {-1, 'active'} end
local h = read_hash(tkey, F_STATE, F_DELIVERY, F_PRIORITY, F_TENANT, F_TENANT_ORDER, F_ENVELOPE)
if ps then h = {ps, id, false, false, false, false} end
if h == nil then return {-2, ''} end
local s = h[1]
if not s then return {0, ''} end
if s ~= 'pending' and s ~= 'scheduled' and s ~= 'retry' then return {-1, s} end
if rule ~= '' and s == 'retry' then return {-1, s} end
local mid, tn, place = h[2], h[4], h[5]
local old_level = h[3] or NORMAL_LEVEL
local stream, fields, env = nil, pf, h[6]
if s == 'pending' then
  if not mid then return {-2, s} end
  if tn then stream = KEYS[T] else stream = lane_key(KEYS[1], LANES, h[3]) end
  if rule == '' and held_by_worker(stream, group, mid) then return {-1, 'active'} end
  if not fields then
    local r = redis.pcall('XRANGE', stream, mid, mid)
    if type(r) ~= 'table' or r.err then return {-2, s} end
    fields = r[1] and r[1][2]
  end
  env = field_of(fields, F_ENVELOPE)
end
if not env then return {-2, s} end
local new_env = env
if has_payload then
  local kind
  kind, new_env = splice(env, payload)
  if not new_env then return {-2, s} end
  if want_kind ~= '' and kind ~= want_kind then return {-3, kind} end
end
local new_level = level or old_level
local now = now_ms()
if bounce_delay then
  local first = tonumber(redis.pcall('HGET', tkey, F_DEBOUNCE_FIRST)) or now
  run_at = math.min(now + tonumber(bounce_delay), first + tonumber(bounce_max))
end
local score = nil
if s ~= 'pending' then
  score = tonumber(redis.call('ZSCORE', sets[s], id))
  if not score then return {-2, s} end
end
-- The score a run time asks for: nil when the task's time need not change.
local target = nil
if run_at then
  if run_at > now then
    if run_at ~= score then target = run_at end
  elseif score and score > now then
    target = now
  end
end
-- A deduplication that reached its holder counts as one of its mode (a re-sent call once more).
if rule ~= '' then
  redis.pcall('HINCRBY', KEYS[5], bounce_delay and 'debounce' or 'replace', 1)
end
if new_env == env and new_level == old_level and not target then return {2, s, score or now} end

-- The edit's event, once its writes are done.
local function edited()
  local f = {}
  if target then f[#f + 1] = E.AT; f[#f + 1] = target end
  if new_level ~= old_level then f[#f + 1] = E.LEVEL; f[#f + 1] = new_level end
  transition(EV.EDITED, id, new_env, unpack(f))
end

-- Writes. The level first (a LIFO task without a tenant belongs to its level's front).
local ntn = tn
if tn and is_front(tn) and new_level ~= old_level then
  ntn = front_of(new_level)
  redis.call('HSET', tkey, F_TENANT, ntn)
end
local function set_level()
  if new_level == NORMAL_LEVEL then
    redis.pcall('HDEL', tkey, F_PRIORITY)
  else
    redis.call('HSET', tkey, F_PRIORITY, new_level)
  end
end

if s ~= 'pending' then
  if new_env ~= env then redis.call('HSET', tkey, F_ENVELOPE, new_env) end
  set_level()
  if target then
    wake(sets[s], target)
    redis.call('ZADD', sets[s], target, id)
  end
  edited()
  return {1, s, target or score}
end

-- A pending task: its delivery leaves (waiting or fetched but not started, held).
if pf then materialize(tkey, id, 'pending', pf) end
if tn then
  local waiting, held = 0, redis.call('ZREM', KEYS[T + 4], tn .. '\0' .. id)
  if place then waiting = redis.call('ZREM', KEYS[T + 2], tn .. '\0' .. place .. '\0' .. mid) end
  tenant_load(T, tn, -waiting, -held)
end
settle_entries(stream, group, {mid})
if target then
  redis.call('HDEL', tkey, F_DELIVERY)
  redis.call('HSET', tkey, F_STATE, 'scheduled', F_ENVELOPE, new_env)
  set_level()
  wake(KEYS[3], target)
  redis.call('ZADD', KEYS[3], target, id)
  if tn then tenant_settle(T, tn) end
  edited()
  return {1, 'scheduled', target}
end
local r, err, f = field_of(fields, F_RETRIED), field_of(fields, F_ERROR), field_of(fields, F_FAILED_AT)
local new_mid
if tn then
  if place and new_level ~= old_level and string.sub(place, 1, 1) ~= '-' then
    local aging = tonumber(redis.pcall('HGET', KEYS[SETTINGS], S_AGING)) or DEFAULT_AGING_MS
    local ms = tonumber(string.match(mid, '^(%d+)')) or now
    place = tenant_place(tenant_order(new_level, ms, aging), mid)
  end
  if not place or #place < 15 then place = nil end
  new_mid, place = tenant_park(T, ntn, tenant_order(new_level, now, 0), id, new_env, r, err, f,
    place)
  redis.call('HSET', tkey, F_DELIVERY, new_mid, F_TENANT_ORDER, place)
  tenant_settle(T, ntn)
  if ntn ~= tn then tenant_settle(T, tn) end
else
  new_mid = add_entry(lane(KEYS[1], LANES, new_level), id, new_env, r, err, f)
  redis.call('HSET', tkey, F_DELIVERY, new_mid)
end
set_level()
edited()
return {1, s, now}
