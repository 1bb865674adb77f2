-- Helpers shared by the scripts: scripts.rs prepends this file to every script (Redis gives
-- scripts no way to share functions at run time), after the prologue it generates from
-- chronos-protocol's src/names.rs: the numbers both sides agree on and the field names (`F_STATE` = 's',
-- ...), which the helpers here use. Functions only (and the `EVENTS` key taken off KEYS);
-- nothing here writes unless it says so.
--
-- Rules every script follows (see the crate docs):
-- * every key a script touches is declared in KEYS (all of one queue's keys share its hash tag);
-- * reads and checks come first, and nothing may raise an error after the first write: a read
--   that could fail on a corrupt key goes through redis.pcall and marks that task alone;
-- * "now" is the Redis server's clock (TIME), never a caller's, wherever a script decides what
--   is due.

-- The queue's event stream (`QueueKeys::events`, `<prefix>events`): the callers of the scripts
-- that write events declare it as their last key, and it is taken off KEYS here, so each script
-- reads its own key layout as its header documents it. The stream's existence is the queue's
-- switch: the broker declares it only while it saw it exist (looking again each second), so a
-- queue without events pays a string compare here, and `transition` checks once per call (EXISTS)
-- before it writes.
local EVENTS = nil
do
  local last = KEYS[#KEYS]
  local prefix = KEYS[1] and string.match(KEYS[1], '^(.-:{[^}]*}:)')
  if last and prefix and #KEYS > 1 and last == prefix .. EVENTS_NAME then
    EVENTS = table.remove(KEYS)
  end
end
local EVENTS_LIVE = nil

-- Deletes the queue's event stream when the call declared it: a queue delete's last step. The
-- only way a script other than lib.lua touches the stream, besides `transition`.
local function drop_events()
  if EVENTS then redis.call('DEL', EVENTS) end
end

-- Whether this call writes events (asked once per call).
local function events_on()
  if EVENTS == nil then return false end
  if EVENTS_LIVE == nil then EVENTS_LIVE = redis.call('EXISTS', EVENTS) == 1 end
  return EVENTS_LIVE
end

-- A msgpack string at byte `pos` of `s`: its value and the position after it (nil when there
-- is none there).
local function mp_str(s, pos)
  local b = string.byte(s, pos)
  if not b then return nil end
  local len, start
  if b >= 0xa0 and b <= 0xbf then
    len, start = b - 0xa0, pos + 1
  elseif b == 0xd9 then
    len, start = string.byte(s, pos + 1), pos + 2
  elseif b == 0xda then
    local hi, lo = string.byte(s, pos + 1, pos + 2)
    if not lo then return nil end
    len, start = hi * 256 + lo, pos + 3
  end
  if not len then return nil end
  return string.sub(s, start, start + len - 1), start + len
end

-- The kind of a task envelope (`TaskEnvelope::encode`: a version byte, then a msgpack array
-- whose first two fields are the id and the kind); '' when it does not read so.
local function envelope_kind(env)
  if type(env) ~= 'string' then return '' end
  local b = string.byte(env, 2)
  local pos
  if b and b >= 0x90 and b <= 0x9f then pos = 3 elseif b == 0xdc then pos = 5 else return '' end
  local _, after = mp_str(env, pos)
  if not after then return '' end
  return (mp_str(env, after)) or ''
end

-- Puts one fire first in schedule `sid`'s history (field `sid` of hash `key`), keeping the
-- newest FIRES_KEPT: one line per fire, `<trigger or run time ms> <code> <run_now 0|1> <task
-- id>` (a task id holds no whitespace), newest first. `code` is the reply code of the script
-- that fired it (fire.lua's for a trigger, sched_run.lua's for a run-now: `run_now` tells
-- which). Text, so a fire costs a few string operations in C, not a decode and an encode of
-- the whole history (it runs once per trigger). A history that does not start with a digit
-- (damaged) starts afresh; a key of the wrong type takes no entry (never raises).
local function record_fire(key, sid, at, code, id, run_now)
  local old = redis.pcall('HGET', key, sid)
  if type(old) == 'table' and old.err then return end
  local line = string.format('%.0f %d %d %s', at, code, run_now and 1 or 0, id)
  if type(old) == 'string' and string.find(old, '^%d') then
    -- The end of the newest FIRES_KEPT - 1 lines.
    local cut, n = 0, 0
    repeat
      cut = string.find(old, '\n', cut + 1, true)
      n = n + 1
    until not cut or n == FIRES_KEPT - 1
    line = line .. '\n' .. (cut and string.sub(old, 1, cut - 1) or old)
  end
  redis.pcall('HSET', key, sid, line)
end

-- The task id of a task hash's key (`<prefix>t:<id>`).
local function tkey_id(tkey)
  return string.match(tkey, '^.-:{[^}]*}:t:(.*)$') or ''
end

-- Events (chronos_core::event). Every script that moves a task writes the move's event through
-- `transition` (or `attempt_ended`, which calls it), in the same call and after the move, so a
-- reader sees a task's events in the order of its transitions; a test (names.rs) fails when a
-- script that writes a task's state or record calls neither, or appends to the stream itself.
-- The kinds, and the scripts that write them:
--   enqueued          enqueue.lua, push.lua; fire.lua and sched_run.lua (a schedule's task);
--                     chain_next.lua (a chain's next step); group_report.lua (a group's callback)
--   deduplicated      enqueue.lua (nothing was added)
--   started           start.lua, only the call that marks the delivery (a re-sent call writes
--                     none); `attempt_ended`, for an attempt that ended without a mark
--   progress          heartbeat.lua, only for a value that changed (a re-sent call writes none)
--   retried, snoozed, throttled, completed, dead, cancelled
--                     retry.lua, snooze.lua, backoff.lua, complete.lua, dead.lua, cancel.lua
--                     (through `attempt_ended`)
--   reclaimed, dead   reclaim.lua (a lost worker's delivery goes back, or ends the task)
--   deferred          hold.lua, admit.lua (a delivery put off before it started)
--   requeued          requeue.lua (a delivery handed back unstarted)
--   forwarded         forward.lua (a waiting task fell due)
--   deleted, archived, run_now, edited, prioritized, cancel_requested
--                     admin_delete.lua, admin_archive.lua, admin_run.lua, edit.lua,
--                     prioritize.lua, admin_cancel.lua
-- Not events: the janitor's removal of tasks that ended (their final event was written), a
-- queue's deletion, and what happens to locks, permits and counters.

-- Appends the event of a transition (type `etype`, task `id`, the kind read from envelope
-- `env`, then the field-value pairs given) to the queue's event stream, capped near
-- EVENTS_KEPT, when the call writes events. Never raises (a stream of the wrong type takes no
-- event).
local function transition(etype, id, env, ...)
  if not events_on() then return end
  redis.pcall('XADD', EVENTS, 'MAXLEN', '~', EVENTS_KEPT, '*', E.TYPE, etype, E.TASK, id, E.KIND,
    envelope_kind(env), ...)
end

-- The end of an attempt (attempt number `attempt`, run by consumer `worker`) of task `id`: its
-- event `etype` with the field-value pairs given, after the attempt's `started` when it never
-- had one (`marked` false). A worker settles a handler that ended within its start mark's
-- delay (chronos-worker's starter.rs) without ever sending the mark, so the settling script
-- writes the attempt's start: every attempt's events open with `started`. The callers pass
-- `marked` from what the delivery says (a record's state `active`, a plain task's pending
-- entry's delivery count at STARTED) and read it only while events are on.
local function attempt_ended(marked, attempt, worker, etype, id, env, ...)
  if not events_on() then return end
  if not marked then
    transition(EV.STARTED, id, env, E.ATTEMPT, attempt, E.WORKER, worker or '')
  end
  transition(etype, id, env, ...)
end

-- Tells waiters (Client::wait) that a task reached an outcome: the channel is the task hash's
-- own name. Not a write; a message nobody listens to costs a lookup.
local function announce(tkey)
  redis.call('PUBLISH', tkey, '1')
end

-- Tells sleeping forwarders (Maintain::signals) that `zset`, a queue's scheduled or retry set,
-- is about to get a task due at `score` ms, earlier than anything it holds: call it right
-- before the ZADD. Publishes `d <ms from now> <queue>` on `<ns>:signal` (the namespace and
-- queue come from the key, `<ns>:{<queue>}:...`). Not a write, and never raises: a set of the
-- wrong type just wakes nobody.
local function wake(zset, score)
  local first = redis.pcall('ZRANGE', zset, 0, 0, 'WITHSCORES')
  if type(first) ~= 'table' or first.err then return end
  score = tonumber(score)
  if not score or (first[2] and tonumber(first[2]) <= score) then return end
  local ns, queue = string.match(zset, '^(.-):{([^}]*)}:')
  if not ns then return end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('PUBLISH', ns .. ':signal', string.format('d %d %s', math.max(0, score - now), queue))
end

-- Tells subscribed workers (Maintain::signals) that queue stream `main` got a new lane (a
-- level's stream, or the tenant streams): publishes `s <queue>` on `<ns>:signal`, as a change
-- of the queue's settings does. A parked server blocks only on the lanes it knows of, and the
-- entry a new lane leaves on the main stream reaches one reader only: the signal makes every
-- server read the queue again, and so learn of the lane. Not a write; never raises.
local function announce_lane(main)
  local ns, queue = string.match(main, '^(.-):{([^}]*)}:')
  if ns then redis.pcall('PUBLISH', ns .. ':signal', 's ' .. queue) end
end

-- Redis server time in unix ms.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The value of `name` in a flat field list {k1, v1, k2, v2, ...}; nil when absent, or when the
-- list itself is missing (an entry deleted while pending comes back with no fields).
local function field_of(fields, name)
  if not fields then return nil end
  for j = 1, #fields, 2 do
    if fields[j] == name then return fields[j + 1] end
  end
  return nil
end

-- The envelope (`e` field) of entry `mid` of `stream`, or nil.
local function entry_envelope(stream, mid)
  local r = redis.call('XRANGE', stream, mid, mid)
  return field_of(r[1] and r[1][2], F_ENVELOPE)
end

-- The envelope a task's record `tkey` keeps while the task is out of the stream, for an event
-- of the call (nil when it keeps none, and without a read while the call writes no events).
local function kept_envelope(tkey)
  if not events_on() then return nil end
  local e = redis.pcall('HGET', tkey, F_ENVELOPE)
  if type(e) == 'string' then return e end
  return nil
end

-- HMGET that answers nil (instead of raising) when `key` is not a hash: a corrupt key fails
-- only its own task.
local function read_hash(key, ...)
  local r = redis.pcall('HMGET', key, ...)
  if type(r) == 'table' and r.err then return nil end
  return r
end

-- A non-negative integer field, or nil when it is missing or corrupt.
local function count_of(v)
  local n = tonumber(v)
  if n and n >= 0 and n == math.floor(n) then return n end
  return nil
end

-- The XADD arguments of a delivery entry for task `id`: `i`, `e` and, once the task has failed
-- before, its attempt count and last error (`r`, `err`, `f`, the task's current values), so a
-- worker knows them without reading the task hash. Every entry of a task with a record is
-- written from here (plain tasks' entries only by push.lua).
local function entry_args(stream, id, env, r, err, f)
  local args = {stream, '*', F_TASK_ID, id}
  if env then args[#args + 1] = F_ENVELOPE; args[#args + 1] = env end
  if (count_of(r) or 0) > 0 then
    args[#args + 1] = F_RETRIED; args[#args + 1] = r
    args[#args + 1] = F_ERROR; args[#args + 1] = err or ''
    args[#args + 1] = F_FAILED_AT; args[#args + 1] = f or '0'
  end
  return args
end

-- Adds a delivery entry for task `id` (see entry_args). Returns the new entry id.
local function add_entry(stream, id, env, r, err, f)
  return redis.call('XADD', unpack(entry_args(stream, id, env, r, err, f)))
end

-- Priority levels. A task of a level other than NORMAL_LEVEL has `p` (its level) in its
-- record, and its deliveries go to its level's stream. A script that may touch those streams
-- takes the queue's lanes as a block of eleven KEYS from index `first` (QueueKeys::lanes): the
-- streams of levels 0 to 9, where NORMAL_LEVEL's is the main stream, then the queue's level
-- hash (level -> the id of the entry its first use left on the main stream, see `lane`; its
-- fields are the levels that have a stream, which fetches read). `first` nil: the caller
-- declared no block, and every level maps to the main stream.

-- Level `level` as a number 0..9, or nil (absent or not a level).
local function level_index(level)
  local n = tonumber(level)
  if n and n >= 0 and n < LEVELS and n == math.floor(n) then return n end
  return nil
end

-- The stream of level `level` (nil, '' or NORMAL_LEVEL: `main`, the main stream). Pure: see
-- `lane` for the one that makes it.
local function lane_key(main, first, level)
  local n = level_index(level)
  if not first or not n or n == tonumber(NORMAL_LEVEL) then return main end
  return KEYS[first + n]
end

-- The stream of level `level`, made on its first use with the consumer group, its level added
-- to the level hash. A level new to the hash leaves an entry without a task (`i` empty) on the
-- main stream: a reader blocked there takes it (and drops it, as any entry without a task),
-- fetches again and so learns of the level at once. The hash keeps that entry's id, so counts
-- leave it out while no reader has taken it (`markers_in`). Writes only on a level's first use;
-- never raises.
local function lane(main, first, level)
  local key = lane_key(main, first, level)
  if key == main or redis.call('EXISTS', key) == 1 then return key end
  redis.pcall('XGROUP', 'CREATE', key, GROUP, '0', 'MKSTREAM')
  local name = tostring(level_index(level))
  if redis.pcall('HEXISTS', KEYS[first + LEVELS], name) == 0 then
    local mid = redis.pcall('XADD', main, '*', F_TASK_ID, '')
    if type(mid) ~= 'string' then mid = '' end
    redis.pcall('HSET', KEYS[first + LEVELS], name, mid)
    announce_lane(main)
  end
  return key
end

-- The levels in use (the fields of level hash `key` that name a level), as strings; {} when
-- none (or corrupt); whether the queue has tenant tasks (field TENANT_LANE, see "Tenants");
-- and whether a handler may have blocked it or its keys (field LEVELS_BLOCKED, backoff.lua).
-- The hash's other field, LEVELS_AGED_AT, is claim.lua's.
local function levels_of(key)
  local l = redis.pcall('HKEYS', key)
  if type(l) ~= 'table' or l.err then return {}, false, false end
  local out, tenants, blocked = {}, false, false
  for _, f in ipairs(l) do
    if level_index(f) then out[#out + 1] = f end
    if f == TENANT_LANE then tenants = true end
    if f == LEVELS_BLOCKED then blocked = true end
  end
  return out, tenants, blocked
end

-- How many of the entries new levels left on main stream `main` (level hash `key`) are still
-- there: what a count of its tasks leaves out.
local function markers_in(main, key)
  local m = redis.pcall('HGETALL', key)
  if type(m) ~= 'table' or m.err then return 0 end
  local n = 0
  for j = 1, #m, 2 do
    local mid = m[j + 1]
    if (level_index(m[j]) or m[j] == TENANT_LANE) and mid ~= '' and
        #redis.call('XRANGE', main, mid, mid) > 0 then
      n = n + 1
    end
  end
  return n
end

-- The oldest entry of `stream` that the consumer group has not delivered yet, as {its ms, its
-- id}; nil when none waits (or there is no stream or group). The group's last delivered id,
-- then one XRANGE past it.
local function oldest_waiting(stream)
  local groups = redis.pcall('XINFO', 'GROUPS', stream)
  if type(groups) ~= 'table' or groups.err then return nil end
  local last
  for _, g in ipairs(groups) do
    if field_of(g, 'name') == GROUP then last = field_of(g, 'last-delivered-id') end
  end
  if not last then return nil end
  local r = redis.call('XRANGE', stream, '(' .. last, '+', 'COUNT', 1)
  if not r[1] then return nil end
  return {tonumber(string.match(r[1][1], '^(%d+)')) or 0, r[1][1]}
end

-- Writes the record (hash `tkey`) of a task written fresh, in one HSET: no failed attempt yet,
-- max retry `maxr`, the key of the unique lock it holds (`ukey`; false: none), `discard` '1'
-- to drop it when it dies, the producer's fingerprint `fp` ('' or nil: none), state `s`, and
-- where the task is: `where` = F_DELIVERY with its entry id (in the stream), or F_ENVELOPE with
-- its envelope (out of it, scheduled), its priority `level` (nil: the default), and its tenant
-- `tn` with its place `order` (nil: none; lib.lua "Tenants"), and `extra` field/value pairs
-- (nil: none; a deduplicated task's release point and debounce start). Every script
-- that creates a task record writes it here, so a field added to a new record is added once.
local function new_record(tkey, maxr, ukey, discard, fp, s, where, value, level, tn, order, extra)
  local h = {tkey, F_RETRIED, '0', F_MAX_RETRY, maxr}
  if extra then for _, v in ipairs(extra) do h[#h + 1] = v end end
  if level then h[#h + 1] = F_PRIORITY; h[#h + 1] = level end
  if tn then
    h[#h + 1] = F_TENANT; h[#h + 1] = tn
    if order then h[#h + 1] = F_TENANT_ORDER; h[#h + 1] = order end
  end
  if ukey then h[#h + 1] = F_UNIQUE; h[#h + 1] = ukey end
  if discard == '1' then h[#h + 1] = F_DISCARD; h[#h + 1] = '1' end
  if fp and fp ~= '' then h[#h + 1] = F_FINGERPRINT; h[#h + 1] = fp end
  h[#h + 1] = F_STATE; h[#h + 1] = s
  h[#h + 1] = where; h[#h + 1] = value
  redis.call('HSET', unpack(h))
end

-- Puts task `id` (hash `tkey`) back at the end of `stream` as a new delivery with its envelope
-- in the entry. Returns the new entry id.
local function back_to_stream(stream, tkey, id, env)
  local h = redis.call('HMGET', tkey, F_RETRIED, F_ERROR, F_FAILED_AT)
  local new = add_entry(stream, id, env, h[1], h[2], h[3])
  redis.call('HSET', tkey, F_STATE, 'pending', F_DELIVERY, new)
  return new
end

-- The record's side of a unique lock `ukey` let go at `rel` (`s` when the task starts, `x` only
-- when its TTL runs out, anything else when the task ends), for new_record: the lock key the
-- record names (nil for `x`: nothing but the TTL or an operator frees it) and `extra` with the
-- fields that say so added.
local function lock_record(ukey, rel, extra)
  if rel == 's' then extra[#extra + 1] = F_UNIQUE_RELEASE; extra[#extra + 1] = '1' end
  if rel == 'x' then return nil, extra end
  return ukey, extra
end

-- Releases unique lock `ukey` if task `id` holds it.
local function release_unique(ukey, id)
  if redis.pcall('GET', ukey) == id then redis.call('DEL', ukey) end
end

-- Adds to a counter without ever raising (a corrupt counter is left alone).
local function bump(key, n)
  redis.pcall('INCRBY', key, n)
end

-- True when `key` is of type `want` or does not exist.
local function type_ok(key, want)
  local t = redis.call('TYPE', key)
  t = t.ok or t
  return t == want or t == 'none'
end

-- Makes zset `key`, whose scores are expiry times (unix ms, Redis' clock), expire with its
-- latest member. Not with the caller's own TTL: holders configured with different TTLs share
-- the key, and a shorter one must not drop a longer one's live members with the key.
local function expire_with_last(key)
  local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local at = tonumber(top[2])
  if at then redis.call('PEXPIREAT', key, math.ceil(at)) end
end

-- Attempt history (`F_ATTEMPTS`): the record of a task keeps one JSON object per line for each
-- attempt that ended, oldest first, at most ATTEMPTS_KEPT lines: `a` the attempt, `w` the
-- worker (the consumer that held the delivery), `e` its end (unix ms, store clock), `o` the
-- outcome, `err` the error or reason (its first ATTEMPT_ERROR_BYTES bytes), `d` how long the
-- handler ran with `s` its start (end - d), when the worker said so, and `l` the attempt's own
-- log lines (capped by the worker). The oldest rows go first once the history is over
-- ATTEMPTS_BYTES, so a task's record stays bounded whatever its handlers log.
-- The consumer holding delivery `mid`, read before the entry is acked; nil when none does.
local function holder(stream, group, mid)
  local p = redis.pcall('XPENDING', stream, group, mid, mid, 1)
  if type(p) == 'table' and type(p[1]) == 'table' then return p[1][2] end
  return nil
end
-- The consumer holding delivery `mid` (nil when none does) and whether start.lua marked it as
-- a plain task's (its delivery count at STARTED), in one XPENDING.
local function plain_mark(stream, group, mid)
  local p = redis.pcall('XPENDING', stream, group, mid, mid, 1)
  if type(p) == 'table' and type(p[1]) == 'table' then
    return p[1][2], (tonumber(p[1][4]) or 0) >= STARTED
  end
  return nil, false
end

-- True when a worker holds delivery `mid` of `stream`: `group`'s pending list has it, under a
-- consumer other than TENANT_PARK (whose entries wait for their tenant's turn). For an
-- operator such a task is running, started or not: a handler that ends within the start
-- mark's delay is never marked (the worker's starter.rs), and a plain task's completion may
-- wait for its worker's next fetch to be acked (settle-and-fetch), so only the pending list
-- tells that a handler may have run. Archiving or deleting it as waiting would dead-letter
-- (or drop) a task that ran, and running it again would run it twice.
local function held_by_worker(stream, group, mid)
  local who = holder(stream, group, mid)
  return who ~= nil and who ~= TENANT_PARK
end
-- The record's attempt history with one row more: the value for the caller's HSET of
-- `F_ATTEMPTS` (never raises: the record was read as a hash already).
local function attempt_row(tkey, attempt, worker, outcome, err, ran, now, logs)
  local row = {a = attempt, o = outcome, e = now, w = worker}
  local d = tonumber(ran)
  if d and d >= 0 then
    row.d = math.floor(d)
    row.s = now - row.d
  end
  if err and err ~= '' then row.err = string.sub(err, 1, ATTEMPT_ERROR_BYTES) end
  if logs and logs ~= '' then row.l = logs end
  local lines = {}
  local old = redis.pcall('HGET', tkey, F_ATTEMPTS)
  if type(old) == 'string' then
    for l in string.gmatch(old, '[^\n]+') do lines[#lines + 1] = l end
  end
  lines[#lines + 1] = cjson.encode(row)
  local from = #lines - ATTEMPTS_KEPT + 1
  if from < 1 then from = 1 end
  local size = 0
  for i = from, #lines do size = size + #lines[i] + 1 end
  while size > ATTEMPTS_BYTES and from < #lines do
    size = size - #lines[from] - 1
    from = from + 1
  end
  return table.concat(lines, '\n', from)
end

-- Acks and removes stream entries (one or more ids). Never raises: a group lost with its data
-- (Redis restarted empty) must not fail a script after its first write, and an entry already
-- gone needs nothing.
local function settle_entries(stream, group, ids)
  if #ids == 0 then return end
  for i = 1, #ids, 1000 do
    local part = {}
    for j = i, math.min(i + 999, #ids) do part[#part + 1] = ids[j] end
    redis.pcall('XACK', stream, group, unpack(part))
    redis.pcall('XDEL', stream, unpack(part))
  end
end

-- Adds `n` to a queue's history: `mkey` is the hash of one UTC day's counts per minute (field:
-- the unix minute, by Redis' clock), `dkey` the counter of one day. Both get a TTL (two days,
-- and 91 days) so the history never grows. Never raises.
local function history(mkey, dkey, n, now)
  if n <= 0 then return end
  -- The TTL is set by the first count of each minute and of the day only (the counters then
  -- equal `n`): a hot queue pays two commands per batch, not four.
  if redis.pcall('HINCRBY', mkey, tostring(math.floor(now / 60000)), n) == n then
    redis.pcall('PEXPIRE', mkey, 49 * 3600000)
  end
  if redis.pcall('INCRBY', dkey, n) == n then
    redis.pcall('PEXPIRE', dkey, 91 * 86400000)
  end
end

-- Plain tasks. A task enqueued with no explicit id, no unique key, no retention, no rate key,
-- no delay, no replication wait and no workflow is stored as one stream entry holding its
-- envelope (`e`, and no `i`; `x` its max retry and `dl` '1' only where they differ from 25 and
-- archive), and its id is that entry's id: while it is pending or active it has no hash at all.
-- Every script that takes such a task out of its entry and keeps it (retry, dead letter,
-- reclaim, requeue, a completion with a retention, an operator's archive) first gives it the
-- hash enqueue.lua writes for other tasks (see `materialize`), so from there it goes on exactly
-- as they do, and its later entries carry `i`; an operator's delete, cancel or run-now reads
-- its entry (`plain_state`) and writes no hash. A plain task's delivery is the one whose entry
-- id equals its task id (explicit ids of that shape are refused at enqueue).

-- PLAIN_MAX_RETRY (the max retry of a plain task whose entry names none: the envelope's
-- default) and STARTED (the delivery count start.lua sets on a started plain task's pending
-- entry, so the pending list itself records "started" and a plain task needs no hash to be
-- charged an attempt when its worker is lost) come from the prologue (chronos-protocol's src/names.rs).

-- True when `id` has the shape of a stream entry id (`<ms>-<seq>`), which only plain tasks use.
local function plain_id(id)
  return #id < 42 and string.match(id, '^%d+%-%d+$') ~= nil
end

-- The state of plain task `id`, read only: 'pending' or 'active' (its delivery was started)
-- while its entry lives in `stream` and no hash `tkey` exists, with the entry's fields and
-- whether `group`'s pending list holds it (it was delivered); nil for any other task.
-- `no_hash`: the caller read the hash already and found none (saves its EXISTS).
local function plain_state(stream, group, tkey, id, no_hash)
  if not plain_id(id) then return nil end
  if not no_hash and redis.call('EXISTS', tkey) == 1 then return nil end
  local r = redis.pcall('XRANGE', stream, id, id)
  if type(r) ~= 'table' or r.err or not r[1] then return nil end
  local fields = r[1][2]
  if field_of(fields, F_TASK_ID) or not field_of(fields, F_ENVELOPE) then return nil end
  local p = redis.pcall('XPENDING', stream, group, id, id, 1)
  local delivered = type(p) == 'table' and not p.err and p[1] ~= nil
  if delivered and (tonumber(p[1][4]) or 0) >= STARTED then
    return 'active', fields, true
  end
  return 'pending', fields, delivered
end

-- Writes the hash of plain task `id` in state `s` from its entry's `fields` (both from
-- plain_state), as enqueue.lua writes one for other tasks: attempt count 0, its max retry and
-- discard, delivery `id`.
local function materialize(tkey, id, s, fields)
  new_record(tkey, field_of(fields, F_MAX_RETRY) or PLAIN_MAX_RETRY, false,
    field_of(fields, F_DISCARD), nil, s, F_DELIVERY, id)
end

-- Gives plain task `id` its hash when its entry `mid` is live and it has none; a no-op for any
-- other task, and for a plain task whose entry is gone (its delivery is stale).
local function materialize_if_plain(stream, group, tkey, id, mid)
  if id ~= mid then return end
  local s, fields = plain_state(stream, group, tkey, id)
  if s then materialize(tkey, id, s, fields) end
end

-- Tenants. A task enqueued with a tenant (`tn` in its record) has its delivery entry in the
-- queue's tenant stream from the start, parked in the pending list of consumer TENANT_PARK, and
-- a member `<tenant>\0<order>\0<entry id>` in the waiting set, whose members all score 0: one
-- tenant's members are one lexical range, in their order (`tenant_order`). A tenant with a
-- waiting task that is under its concurrency cap and not paused is in the rotation (a sorted
-- set scored by its turn); claim.lua takes the tenant of the earliest turn, moves its first
-- entry from TENANT_PARK to the fetching consumer (XCLAIM: the entry and the task record stay
-- as they are, so every later step treats it as any delivery) and advances its turn by
-- 1 / weight. A delivery holds a member `<tenant>\0<task id>` of the held set from then until
-- it is settled (completed, retried, dead-lettered, handed back): the cap counts those, and
-- the script that settles it (`tenant_release`) puts the tenant back in the rotation. A script
-- that may touch tenant tasks declares the tenants block from index T (QueueKeys::tenants):
-- KEYS[T] the tenant stream, T+1 its wake stream, T+2 the waiting set, T+3 the rotation, T+4
-- the held set, T+5 the settings hash, T+6 the turn hash, T+7 the load set (`tenant_load`).
-- Tenant keys hold no whitespace or control characters, so `\0` and `\1` bound their ranges.

-- Last in, first out (EnqueueOptions::lifo) uses the same sets: a LIFO task of a tenant has a
-- place before every other place (`front_order`, newest first), and a LIFO task without a
-- tenant belongs to its level's front, a pseudo-tenant `\1<level>` (`front_of`; no tenant key
-- holds a control character) that is never in the rotation, has no settings and no cap, and
-- that claim.lua serves right before the level's stream.

-- The pseudo-tenant of the LIFO tasks of level `level` (nil: the default level).
local function front_of(level)
  return '\1' .. tostring(level_index(level) or tonumber(NORMAL_LEVEL))
end

-- True for a pseudo-tenant (front_of).
local function is_front(tn)
  return string.byte(tn, 1) == 1
end

-- The place of a LIFO task made ready at `now`: before every place tenant_order gives ('-'
-- sorts before digits), the newest first.
local function front_order(now)
  return '-' .. string.format('%014d', 1e14 - now)
end

-- The lexical range of tenant `tn`'s members of the waiting or the held set.
local function tenant_range(tn)
  return '[' .. tn .. '\0', '(' .. tn .. '\1'
end

-- The settings of tenant `tn`: {weight (at least 1), concurrency cap (0: none), backlog cap
-- (0: none), paused}, its own stored fields over the queue's default (field '') over the
-- built-in ones. A stored value that does not parse counts as unset.
local function tenant_conf(T, tn)
  if is_front(tn) then return {1, 0, 0, false} end
  local c = redis.pcall('HMGET', KEYS[T + 5], tn, '')
  if type(c) ~= 'table' or c.err then c = {} end
  local function fields(v)
    if type(v) ~= 'string' then return {} end
    local out = {}
    for f in string.gmatch(v, '%S+') do out[#out + 1] = f end
    return out
  end
  local mine, all = fields(c[1]), fields(c[2])
  local function pick(i, default)
    local v = tonumber(mine[i]) or tonumber(all[i])
    if v and v >= 0 then return v end
    return default
  end
  return {math.max(pick(1, 1), 1), pick(2, 0), pick(3, 0), pick(4, 0) == 1}
end

-- How many tasks tenant `tn` has waiting, and held.
local function tenant_waiting(T, tn)
  local a, b = tenant_range(tn)
  return redis.call('ZLEXCOUNT', KEYS[T + 2], a, b)
end
local function tenant_held(T, tn)
  local a, b = tenant_range(tn)
  return redis.call('ZLEXCOUNT', KEYS[T + 4], a, b)
end

-- The load set (KEYS[T + 7]) scores every tenant with work -(waiting * LOAD_HELD + held), so
-- that a range from the lowest score lists the busiest first (most waiting, then most held,
-- then by name) without counting every tenant: tenant_stats.lua pages it on every metrics
-- sample. Its member `\0` (score 0) says the counts are complete; without it (a queue from
-- before the set, or one whose set was lost) the counts may be partial, and tenant_stats.lua
-- drops them and rebuilds the set once from the waiting and held sets. Updates do not look
-- for the mark (a call less per change on the tenant path). A tenant leaves the set at zero.
local LOAD_HELD = 16777216
local function tenant_load(T, tn, waiting, held)
  if is_front(tn) then return end
  local left = tonumber(redis.call('ZINCRBY', KEYS[T + 7], -(waiting * LOAD_HELD + held), tn))
  if (left or 0) >= 0 then redis.call('ZREM', KEYS[T + 7], tn) end
end

-- Leaves an entry without a task on the tenants' wake stream (KEYS[T + 1]): a reader blocked
-- there takes it (and drops it, as any entry without a task) and fetches again. A stream entry
-- goes to exactly one blocked reader, so every task made runnable writes one, as a plain task's
-- own entry would: one entry for a whole burst would wake one parked server only.
local function tenant_wake(T)
  redis.pcall('XADD', KEYS[T + 1], 'MAXLEN', '~', 100, '*', F_TASK_ID, '')
end

-- Puts tenant `tn` in the rotation when it is not there, has a task waiting, is not paused and
-- is under its cap, at its own turn or the current one, whichever is later (a tenant that was
-- idle saves no credit), and wakes a parked reader for it. True when it did.
local function tenant_activate(T, tn)
  if is_front(tn) or redis.call('ZSCORE', KEYS[T + 3], tn) then return false end
  local conf = tenant_conf(T, tn)
  if conf[4] or tenant_waiting(T, tn) == 0 then return false end
  if conf[2] > 0 and tenant_held(T, tn) >= conf[2] then return false end
  local p = redis.call('HMGET', KEYS[T + 6], tn, '')
  local now = tonumber(p[2]) or 0
  local turn = math.max(tonumber(p[1]) or now, now)
  redis.call('ZADD', KEYS[T + 3], string.format('%.6f', turn), tn)
  redis.call('HSET', KEYS[T + 6], tn, string.format('%.6f', turn))
  tenant_wake(T)
  return true
end

-- After tenant `tn`'s counts changed: back in the rotation when it can be, forgotten (its turn
-- too) when it has nothing waiting or held.
local function tenant_settle(T, tn)
  if tenant_waiting(T, tn) > 0 then
    tenant_activate(T, tn)
  elseif tenant_held(T, tn) == 0 then
    redis.call('ZREM', KEYS[T + 3], tn)
    redis.call('HDEL', KEYS[T + 6], tn)
  end
end

-- The place of a task of level `level` made ready at `now` inside its tenant: its time, plus,
-- for less urgent levels, a share of the aging bound `aging` (ms; a level-9 task goes ahead of
-- level-0 tasks made ready more than the bound after it); with no aging, levels strictly
-- first. Fifteen digits, so that lexical order is numeric order.
local function tenant_order(level, now, aging)
  local l = level_index(level) or tonumber(NORMAL_LEVEL)
  local key
  if aging and aging > 0 then
    key = now + l * math.floor(aging / (LEVELS - 1))
  else
    key = l * 1e13 + now
  end
  return string.format('%015d', key)
end

-- The place of a task coming back (a retry, a run-now) made ready at `now`: a LIFO task's
-- (its old place `to` begins with '-') at the front again, any other by tenant_order.
local function tenant_reorder(to, level, now, aging)
  if to and string.sub(to, 1, 1) == '-' then return front_order(now) end
  return tenant_order(level, now, aging)
end

-- Makes the tenant stream and its wake stream with their group on the first tenant task, and
-- records both in level hash `levels` (fields TENANT_LANE and TENANT_WAKE), so fetches read the
-- rotation and blocking reads wait on the wake stream. A first use leaves an entry without a
-- task on main stream `main`, as a new level does (lib.lua `lane`).
local function tenant_lanes(T, main, levels)
  if redis.call('EXISTS', KEYS[T], KEYS[T + 1]) == 2 then return end
  -- Nothing counted yet: the load set starts complete (tenant_load).
  if redis.call('ZCARD', KEYS[T + 2]) + redis.call('ZCARD', KEYS[T + 4]) == 0 then
    redis.call('ZADD', KEYS[T + 7], 0, '\0')
  end
  redis.pcall('XGROUP', 'CREATE', KEYS[T], GROUP, '0', 'MKSTREAM')
  redis.pcall('XGROUP', 'CREATE', KEYS[T + 1], GROUP, '0', 'MKSTREAM')
  if levels and redis.pcall('HEXISTS', levels, TENANT_LANE) == 0 then
    local mid = redis.pcall('XADD', main, '*', F_TASK_ID, '')
    if type(mid) ~= 'string' then mid = '' end
    redis.pcall('HSET', levels, TENANT_LANE, mid, TENANT_WAKE, '')
    announce_lane(main)
  end
end

-- Adds task `id` (envelope `env`; `r`, `err`, `f` as entry_args takes them) of tenant `tn` to
-- the waiting set at place `order` (tenant_order), ties kept in the order they came (the new
-- entry's id follows, and stream ids only grow): a new entry of the tenant stream, parked at once (every
-- entry of that stream is read by the parking consumer as it is added, so the group's next
-- new entry is always this one). A task coming back passes its old `place` instead, which it
-- keeps exactly (the entry id after it keeps members apart). Returns the entry id and the
-- task's full place, which the
-- caller writes to the record (F_TENANT_ORDER) with F_DELIVERY (the entry id) and F_TENANT.
local function tenant_place(order, mid)
  local ms, seq = string.match(mid, '^(%d+)%-(%d+)$')
  ms, seq = tonumber(ms) or 0, tonumber(seq) or 0
  -- A LIFO place (front_order) breaks its ties newest first too.
  if string.sub(order, 1, 1) == '-' then ms, seq = 9999999999999 - ms, 9999999999 - seq end
  return order .. string.format('%013d%010d', ms, seq)
end
local function tenant_park(T, tn, order, id, env, r, err, f, place)
  local mid = add_entry(KEYS[T], id, env, r, err, f)
  redis.call('XREADGROUP', 'GROUP', GROUP, TENANT_PARK, 'COUNT', 1, 'STREAMS', KEYS[T], '>')
  place = place or tenant_place(order, mid)
  if redis.call('ZADD', KEYS[T + 2], 0, tn .. '\0' .. place .. '\0' .. mid) == 1 then
    tenant_load(T, tn, 1, 0)
  end
  -- Runnable now (a LIFO task, or a tenant in the rotation): wake a parked reader for it, as
  -- its own entry on a plain stream would. A task behind a cap or a pause wakes nobody; the
  -- tenant's activation does when it can run.
  if not tenant_activate(T, tn) and (is_front(tn) or redis.call('ZSCORE', KEYS[T + 3], tn)) then
    tenant_wake(T)
  end
  return mid, place
end

-- Makes task `id` of tenant `tn` ready (a forwarded, re-run or new task), as tenant_park does,
-- after making the tenant streams if needed (`levels`: the level hash; `settings`: the queue's
-- settings hash, for the aging bound): at the place of level `level` now, or at the front for a
-- task whose old place `to` says LIFO, or `first` when given. Returns the entry id and place.
local function tenant_ready(T, main, levels, settings, tn, level, to, first, id, env, r, err, f)
  tenant_lanes(T, main, levels)
  if not first then
    local aging = tonumber(redis.pcall('HGET', settings, S_AGING)) or DEFAULT_AGING_MS
    first = tenant_reorder(to, level, now_ms(), aging)
  end
  return tenant_park(T, tn, first, id, env, r, err, f)
end

-- Ends the hold of task `id` (hash `tkey`) on its tenant's cap, if it holds one, and puts the
-- tenant back in the rotation when it can be. Call it before the hash is deleted. Idempotent.
local function tenant_release(T, tkey, id)
  local tn = redis.pcall('HGET', tkey, F_TENANT)
  if type(tn) ~= 'string' then return end
  if redis.call('ZREM', KEYS[T + 4], tn .. '\0' .. id) == 1 then
    tenant_load(T, tn, 0, -1)
    tenant_settle(T, tn)
  end
end

-- Takes tenant task `id` (hash `tkey`, its delivery entry `mid`, nil when it has none) out of
-- its tenant's sets, waiting or held, as an operator's delete or archive does (the caller
-- removes the entry), and puts the tenant back in the rotation or forgets it. A no-op for a
-- task without a tenant.
local function tenant_forget(T, tkey, id, mid)
  local h = redis.pcall('HMGET', tkey, F_TENANT, F_TENANT_ORDER)
  if type(h) ~= 'table' or h.err or not h[1] then return end
  local waiting, held = 0, redis.call('ZREM', KEYS[T + 4], h[1] .. '\0' .. id)
  if mid and h[2] then
    waiting = redis.call('ZREM', KEYS[T + 2], h[1] .. '\0' .. h[2] .. '\0' .. mid)
  end
  tenant_load(T, h[1], -waiting, -held)
  tenant_settle(T, h[1])
end

-- Hands delivery `mid` of tenant task `id` (hash `tkey`) back: the task goes back to its place
-- in its tenant (F_TENANT_ORDER) as a new entry, parked, so that the old delivery
-- is stale for a worker that still holds it (as back_to_stream does for other tasks), and its
-- hold on the cap ends. False (nothing done) when the task has no tenant.
local function tenant_back(T, tkey, id, mid)
  local h = redis.call('HMGET', tkey, F_TENANT, F_TENANT_ORDER, F_RETRIED, F_ERROR, F_FAILED_AT)
  if not h[1] then return false end
  local env = entry_envelope(KEYS[T], mid)
  settle_entries(KEYS[T], GROUP, {mid})
  tenant_load(T, h[1], 0, -redis.call('ZREM', KEYS[T + 4], h[1] .. '\0' .. id))
  local place = h[2]
  if not place or #place < 15 then place = nil end
  local new
  new, place = tenant_park(T, h[1], tenant_order(nil, now_ms(), 0), id, env, h[3], h[4], h[5],
    place)
  redis.call('HSET', tkey, F_STATE, 'pending', F_DELIVERY, new, F_TENANT_ORDER, place)
  tenant_settle(T, h[1])
  return true
end

-- Sets running delivery `mid` of task `id` (hash `tkey`) aside in zset `set` until `due`, as a
-- retry or a snooze does: the envelope moves from the entry into the record beside `fields`
-- (HSET field/value pairs), the entry is settled, a tenant task's hold on its cap ends (the
-- tenants block from KEYS[T]; T nil: none declared), and the attempt's delivery bookkeeping
-- (`m`, and the free re-deliveries `z`) goes, so the next delivery starts afresh. Returns the
-- envelope (nil when the entry had none), for the caller's event.
local function set_aside(stream, group, tkey, id, mid, fields, set, due, T)
  local args = {tkey}
  for _, v in ipairs(fields) do args[#args + 1] = v end
  local env = entry_envelope(stream, mid)
  if env then args[#args + 1] = F_ENVELOPE; args[#args + 1] = env end
  settle_entries(stream, group, {mid})
  if T then tenant_release(T, tkey, id) end
  redis.call('HSET', unpack(args))
  redis.call('HDEL', tkey, F_DELIVERY, F_FREE_REDELIVERIES)
  wake(set, due)
  redis.call('ZADD', set, due, id)
  return env
end

-- Handler-signalled backoff (backoff.lua sets blocks; claim.lua, admit.lua and hold.lua
-- honour them). The queue's block is a string holding its end (unix ms); blocked rate keys
-- are members of a sorted set scored by their end.
-- The end of the queue's block at `key`, or 0 when none is in force.
local function queue_block_end(key, now)
  local v = tonumber(redis.pcall('GET', key))
  if v and v > now then return v end
  return 0
end
-- The end of rate key `rk`'s block in the sorted set `zkey`, or 0 when none is in force.
local function key_block_end(zkey, rk, now)
  local v = tonumber(redis.pcall('ZSCORE', zkey, rk))
  if v and v > now then return v end
  return 0
end
-- When a task held back by a block that ends at `ends` is due: the end plus a jitter in
-- [0, w], w a fifth of the time left (20 ms..5 s, as chronos_core::backoff_jitter), picked
-- from the task id, so the tasks held by one block come back spread out, not at one instant,
-- and the same task always gets the same time for the same block.
local function backoff_due(id, ends, now)
  local w = math.floor((ends - now) / 5)
  if w < 20 then w = 20 elseif w > 5000 then w = 5000 end
  return ends + tonumber(string.sub(redis.sha1hex(id .. ':' .. ends), 1, 7), 16) % (w + 1)
end
