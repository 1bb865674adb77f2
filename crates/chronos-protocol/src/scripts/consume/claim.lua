-- Deliver new entries of a queue to a consumer without waiting: the fetch path while a queue is
-- busy (the blocking wait of an idle queue is an XREADGROUP BLOCK on the reader's own
-- connection, since a script cannot block).
-- KEYS[1]  the queue's stream, KEYS[2] the consumer's fetch receipt, KEYS[3] the queue's level
--          hash (lib.lua: `lane`); then, when the caller knows the queue has levels or tenants,
--          KEYS[4] its settings hash (the aging bound) and KEYS[5..15] its lanes, and when it
--          knows of tenants, its tenants block (lib.lua: "Tenants")
-- ARGV[1]  consumer group, ARGV[2] consumer, ARGV[3] most entries, ARGV[4] receipt TTL ms,
-- ARGV[5]  this call's nonce (random per call, the same in a re-send), ARGV[6] '1' when the
--          last two KEYS are the queue's block and its blocked keys (lib.lua `queue_block_end`)
-- ARGV[7]  (settle and fetch in one call) how many plain tasks this call also completes, then
--          their entry ids on the main stream (lib.lua: plain tasks; the caller sends only those
--          with no retention, and none while the queue writes events); the last three KEYS are
--          then the queue's processed counter, its per-minute hash and counter of today (as
--          complete.lua's KEYS[3..5]). A first row {'+', how many of them this call acked} comes
--          before the rest. Their count goes to the counters later, not per call: it waits in
--          the receipt (`<owed>|<nonce>:...`) and is added once COUNT_BATCH are owed or when a
--          call takes nothing (a drained queue, or the worker's last call, which asks for 0), so
--          a busy consumer pays the counters' four commands once per COUNT_BATCH tasks. A
--          receipt that holds counts owed is kept a day (receipt_ttl), and a removed
--          consumer's are paid then (drop_consumer.lua), so neither a long gap between reads
--          nor a killed worker loses them.
-- A blocked queue (TaskError::rate_limited(..).queue_wide()) reads nothing: the answer is the
-- one row {'!', block end ms, 1 or 0}; otherwise, when some of its rate keys are blocked, a
-- last row {'!', 0, 1} says so (the caller checks keyed deliveries, admit.lua). A re-sent
-- call answers from its receipt, block or not (those deliveries were taken before). The block
-- keys are read only when the level hash has its LEVELS_BLOCKED field (backoff.lua sets it),
-- so a queue no handler ever blocked pays no command for them; the field goes once neither
-- block key is left.
-- Returns: rows: {entry id, task id, envelope, retried, last error, last failed at ms} for an
-- entry to run (the last three from the entry, '0'/'' for a first delivery), {entry id,
-- envelope} for a plain task's entry (lib.lua: its id is the entry's), or {entry id} for
-- an entry that carries no task (foreign or emptied; acked and deleted here so it never blocks
-- the queue). An entry that names a task (`i`) but lost its envelope is delivered with a nil
-- envelope, so that the worker dead-letters the task with the reason instead of dropping it.
-- An entry of a priority level's stream has the level as a seventh column; when the queue has
-- levels, a last row {'', level, level, ...} lists them, for the caller's blocking reads; a
-- call without the lanes declared then reads nothing and answers that row alone.
-- The task hash is not touched: a delivery becomes an attempt only when start.lua marks it
-- active, right before its handler runs, so entries fetched but never started (a lost reply, a
-- crash with a prefetched batch) are re-delivered later without spending an attempt.
-- A re-sent call (its first reply was lost) finds its nonce in the consumer's receipt
-- (`<nonce>:<entry>,<entry>...`, written by the call that delivered them, where an entry of a
-- level's stream is `<level>/<entry id>`) and returns the same entries again instead of
-- reading new ones, so nothing is stranded in the consumer's pending list. One receipt per
-- consumer is enough because a consumer fetches one call at a time; a call that overlapped
-- another only risks waiting for the recoverer, never an attempt.
-- Order: with no level in use, the stream's order. With levels, the most urgent level first
-- (0 before 9; the main stream holds NORMAL_LEVEL), oldest first inside a level; but entries
-- that have waited longer than the queue's aging bound (settings S_AGING, else
-- DEFAULT_AGING_MS) go first, the lane with the oldest of them first; that check runs at most
-- once per quarter of the bound (a second at most), so the bound is kept within that much.
-- Tenant tasks are served at the default level's place (after the more urgent levels, before
-- the main stream), and by the aging scan as many as have waited past the bound, in the
-- rotation's order (lib.lua: "Tenants"): each start of a tenant task
-- is an entry moved from the parking consumer to this one; its rows have TENANT_LANE as their
-- level, and the levels row lists TENANT_LANE and TENANT_WAKE.
local group, me, nonce = ARGV[1], ARGV[2], ARGV[5]
local want = tonumber(ARGV[3]) or 1
local out = {}
-- Completions carried by this call (ARGV[7]) and the counter keys that come with them.
local settling = tonumber(ARGV[7])
local COUNTERS = nil
if settling then
  COUNTERS = {KEYS[#KEYS - 2], KEYS[#KEYS - 1], KEYS[#KEYS]}
  for _ = 1, 3 do table.remove(KEYS) end
end

local function row(mid, env, fields, level)
  local id = field_of(fields, F_TASK_ID)
  -- A plain task's entry (no `i`): its id is the entry's, and it never failed before.
  if not id then return {mid, env} end
  local r = {mid, id, env, field_of(fields, F_RETRIED) or '0', field_of(fields, F_ERROR) or '',
    field_of(fields, F_FAILED_AT) or '0'}
  if level then r[7] = level end
  return r
end
-- Whether an entry names a task (a non-empty `i`).
local function named(fields)
  local id = field_of(fields, F_TASK_ID)
  return id ~= nil and id ~= ''
end
local LANES, T = nil, nil
-- The block keys come last, so they never shift the optional keys before them.
local NK, BLOCK, KBLOCKS = #KEYS, nil, nil
if ARGV[6] == '1' then NK = #KEYS - 2; BLOCK = KEYS[NK + 1]; KBLOCKS = KEYS[NK + 2] end
if NK >= 4 + LANES_LEN then LANES = 5 end
if NK >= 4 + LANES_LEN + TENANTS_LEN then T = 5 + LANES_LEN end
-- The row that lists the queue's levels (and the tenant streams) for the caller's blocking
-- reads: {'', level, ...}; nil when it has none.
local function levels_row(levels, has_tenants)
  if #levels == 0 and not has_tenants then return nil end
  local r = {''}
  for _, l in ipairs(levels) do r[#r + 1] = l end
  if has_tenants then
    r[#r + 1] = TENANT_LANE
    r[#r + 1] = TENANT_WAKE
  end
  return r
end
local receipt = redis.pcall('GET', KEYS[2])
-- Completions acked by earlier calls and not yet added to the counters (ARGV[7]).
local owed = 0
if type(receipt) == 'string' then
  local n, rest = string.match(receipt, '^(%d+)|(.*)$')
  if n then owed, receipt = tonumber(n), rest end
end
if type(receipt) == 'string' and string.sub(receipt, 1, #nonce + 1) == nonce .. ':' then
  for item in string.gmatch(string.sub(receipt, #nonce + 2), '[^,]+') do
    local level, mid = string.match(item, '^(%d+)/(.+)$')
    if not level then mid = item end
    local stream = lane_key(KEYS[1], LANES, level)
    if level == TENANT_LANE and T then stream = KEYS[T] end
    local r = redis.call('XRANGE', stream, mid, mid)
    local fields = r[1] and r[1][2]
    local env = field_of(fields, F_ENVELOPE)
    if env or named(fields) then out[#out + 1] = row(mid, env or false, fields, level) end
  end
  -- The levels row too, as the first run answered it: a caller that forgot the queue's
  -- levels would stop reading (and recovering) their streams.
  out[#out + 1] = levels_row(levels_of(KEYS[3]))
  -- Its completions were acked by the first run: a re-send acks none.
  if settling then table.insert(out, 1, {'+', 0}) end
  return out
end

-- Acks and removes the entries of the completions this call carries (ARGV[7]); how many
-- were still pending (a stale or re-sent one counts nothing). Runs on every path that
-- answers, after the reads.
local function settle_carried()
  if not settling or settling <= 0 then return 0 end
  local mids = {}
  for i = 8, 7 + settling do mids[#mids + 1] = ARGV[i] end
  local acked = 0
  for i = 1, #mids, 1000 do
    local part = {unpack(mids, i, math.min(i + 999, #mids))}
    acked = acked + (tonumber(redis.pcall('XACK', KEYS[1], group, unpack(part))) or 0)
    redis.pcall('XDEL', KEYS[1], unpack(part))
  end
  return acked
end

-- How long a receipt is kept: ARGV[4], or, while it holds counts owed to the counters, a day
-- (OWED_TTL_MS): a consumer whose handlers all run past ARGV[4] between two reads would
-- otherwise lose them with it. A consumer that never reads again (its server died) has them
-- paid when it is removed (drop_consumer.lua).
local function receipt_ttl(owing)
  if owing > 0 then return math.max(tonumber(ARGV[4]) or 0, OWED_TTL_MS) end
  return ARGV[4]
end

-- Ends a call that carried completions: acks them, adds what is owed to the counters when
-- COUNT_BATCH are owed or nothing was taken, and keeps the rest owed in the receipt (written
-- here when it changed; `taken` its entries). Returns `rows` with the acked count first.
local function finish(rows, taken)
  local acked = settle_carried()
  owed = owed + acked
  local receipt_owed = owed
  if owed > 0 and (owed >= COUNT_BATCH or #taken == 0) then
    local now = now_ms()
    bump(COUNTERS[1], owed)
    history(COUNTERS[2], COUNTERS[3], owed, now)
    receipt_owed = 0
  end
  local head = receipt_owed > 0 and (receipt_owed .. '|') or ''
  if #taken > 0 then
    redis.call('SET', KEYS[2], head .. nonce .. ':' .. table.concat(taken, ','), 'PX',
      receipt_ttl(receipt_owed))
  elseif owed > 0 then
    -- Paid off: nothing owed stays behind in the receipt.
    redis.pcall('DEL', KEYS[2])
  end
  table.insert(rows, 1, {'+', acked})
  return rows
end

local taken = {}
-- Reads up to `n` new entries of `stream` (level `level`, nil for the main stream) into `out`.
-- A stream that lost its group (Redis lost data) gets it back and yields nothing this time,
-- except the main stream when nothing was read yet: that NOGROUP goes to the caller, which
-- registers the queue again (so the error is the script's first effect, never after a write).
local function read(stream, level, n)
  if n <= 0 then return end
  local res = redis.pcall('XREADGROUP', 'GROUP', group, me, 'COUNT', n, 'STREAMS', stream, '>')
  if type(res) == 'table' and res.err then
    if not level and #out == 0 then return res end
    if string.find(res.err, 'NOGROUP', 1, true) then
      redis.pcall('XGROUP', 'CREATE', stream, group, '0', 'MKSTREAM')
    end
    return
  end
  if not res then return end
  local foreign = 0
  for _, entry in ipairs(res[1][2]) do
    local mid, fields = entry[1], entry[2]
    local env = field_of(fields, F_ENVELOPE)
    -- On a level's stream every task has `i` (lib.lua: entry_args); anything else is foreign.
    if named(fields) or (env and not level) then
      out[#out + 1] = row(mid, env or false, fields, level)
      taken[#taken + 1] = level and (level .. '/' .. mid) or mid
      want = want - 1
    else
      settle_entries(stream, group, {mid})
      out[#out + 1] = {mid}
      foreign = foreign + 1
    end
  end
  return nil, foreign
end

-- Delivers parked member `first` of the waiting set (removed here) to this consumer; the task
-- id when it was still there.
local function unpark(first)
  if redis.call('ZREM', KEYS[T + 2], first) == 1 then
    tenant_load(T, string.match(first, '^([^%z]*)'), -1, 0)
  end
  local mid = string.match(first, '%z([^%z]*)$')
  -- An entry deleted since (an operator's delete) is no longer pending: nothing comes back.
  local got = redis.pcall('XCLAIM', KEYS[T], group, me, 0, mid)
  local entry = type(got) == 'table' and not got.err and got[1]
  local fields = type(entry) == 'table' and entry[2]
  if fields and named(fields) then
    out[#out + 1] = row(mid, field_of(fields, F_ENVELOPE) or false, fields, TENANT_LANE)
    taken[#taken + 1] = TENANT_LANE .. '/' .. mid
    want = want - 1
    return field_of(fields, F_TASK_ID)
  end
  if mid then settle_entries(KEYS[T], group, {mid}) end
end

-- Tenant tasks: the tenants in the rotation's order, one start each, until `want` are taken.
-- A tenant leaves the rotation when it has nothing waiting, is paused or reaches its cap.
local function serve_tenants()
  while want > 0 do
    local top = redis.call('ZRANGE', KEYS[T + 3], 0, 0, 'WITHSCORES')
    if not top[1] then break end
    local tn, turn = top[1], tonumber(top[2]) or 0
    local a, b = tenant_range(tn)
    local first = redis.call('ZRANGEBYLEX', KEYS[T + 2], a, b, 'LIMIT', 0, 1)[1]
    local conf = tenant_conf(T, tn)
    local held = tenant_held(T, tn)
    if first and not conf[4] and (conf[2] == 0 or held < conf[2]) then
      local id = unpark(first)
      if id then
        -- Score 0 like every member: lexical ranges need one score.
        if redis.call('ZADD', KEYS[T + 4], 0, tn .. '\0' .. id) == 1 then
          tenant_load(T, tn, 0, 1)
        end
        held = held + 1
      end
      local next_turn = string.format('%.6f', turn + 1 / conf[1])
      redis.call('HSET', KEYS[T + 6], '', string.format('%.6f', turn), tn, next_turn)
      if (conf[2] == 0 or held < conf[2]) and tenant_waiting(T, tn) > 0 then
        redis.call('ZADD', KEYS[T + 3], next_turn, tn)
      else
        redis.call('ZREM', KEYS[T + 3], tn)
        tenant_settle(T, tn)
      end
    else
      redis.call('ZREM', KEYS[T + 3], tn)
      tenant_settle(T, tn)
    end
  end
end

-- The oldest waiting LIFO task without a tenant of level `level`, as {the ms it was made
-- ready, its member of the waiting set}; nil when none waits. Its entry id (the member's last
-- part) was written when it was made ready.
local function oldest_front(level)
  local a, b = tenant_range(front_of(level))
  local last = redis.call('ZRANGE', KEYS[T + 2], b, a, 'BYLEX', 'REV', 'LIMIT', 0, 1)[1]
  local ms = last and tonumber(string.match(last, '%z(%d+)%-%d+$'))
  if ms then return {ms, last} end
end

-- LIFO tasks without a tenant of level `level` (lib.lua: `front_of`), newest first.
local function serve_front(level)
  local a, b = tenant_range(front_of(level))
  while want > 0 do
    local first = redis.call('ZRANGEBYLEX', KEYS[T + 2], a, b, 'LIMIT', 0, 1)[1]
    if not first then break end
    unpark(first)
  end
end

local levels, has_tenants, flagged = levels_of(KEYS[3])
local key_blocks = 0
if BLOCK and flagged then
  if redis.call('EXISTS', BLOCK, KBLOCKS) == 0 then
    redis.call('HDEL', KEYS[3], LEVELS_BLOCKED)
  else
    local ends = queue_block_end(BLOCK, now_ms())
    if redis.call('EXISTS', KBLOCKS) == 1 then key_blocks = 1 end
    if ends > 0 then
      if settling then return finish({{'!', ends, key_blocks}}, {}) end
      return {{'!', ends, key_blocks}}
    end
  end
end
local row_of_levels = levels_row(levels, has_tenants) or {''}
-- Levels or tenants in use but not declared: read nothing (the main stream first would break
-- the order); the caller declares them and calls again at once.
if (#levels > 0 and not LANES) or (has_tenants and not T) then
  if settling then return finish({row_of_levels}, {}) end
  return {row_of_levels}
end
if #levels == 0 and not has_tenants then
  local failed = read(KEYS[1], nil, want)
  if failed then return failed end
else
  -- Lanes in order of urgency: {level, stream, level or nil for the main stream}.
  local lanes = {{tonumber(NORMAL_LEVEL), KEYS[1], nil}}
  for _, l in ipairs(levels) do
    local key = lane_key(KEYS[1], LANES, l)
    if key ~= KEYS[1] then lanes[#lanes + 1] = {level_index(l), key, l} end
  end
  -- The rotation sits just before the main stream (a sort key between its neighbours).
  if has_tenants then
    lanes[#lanes + 1] = {tonumber(NORMAL_LEVEL) - 0.5, false, TENANT_LANE}
    -- LIFO tasks without a tenant, when any wait: each level's before its stream (the
    -- default level's before the rotation too).
    if redis.call('ZRANGEBYLEX', KEYS[T + 2], '[\1', '(\2', 'LIMIT', 0, 1)[1] then
      for l = 0, LEVELS - 1 do lanes[#lanes + 1] = {l - 0.75, false, false, l} end
    end
  end
  table.sort(lanes, function(a, b) return a[1] < b[1] end)
  local aging = tonumber(redis.pcall('HGET', KEYS[4], S_AGING)) or DEFAULT_AGING_MS
  -- The aging scan reads two things per level, so it runs at most once per quarter of the
  -- bound (at most a second): a task waits at most the bound and that much more. The time of
  -- the next scan is a field of the level hash.
  local now = now_ms()
  local scan = aging > 0 and now >= (tonumber(redis.pcall('HGET', KEYS[3], LEVELS_AGED_AT)) or 0)
  if scan then
    redis.pcall('HSET', KEYS[3], LEVELS_AGED_AT, now + math.min(math.floor(aging / 4), 1000))
  end
  if scan then
    local cutoff = now - aging
    local aged = {}
    for _, ln in ipairs(lanes) do
      local oldest = ln[2] and oldest_waiting(ln[2])
      -- Tenant tasks: the oldest parked entry (the parking consumer's pending list is in id
      -- order), served through the rotation.
      if ln[3] == TENANT_LANE then
        local p = redis.call('XPENDING', KEYS[T], group, '-', '+', 1, TENANT_PARK)[1]
        if p then oldest = {tonumber(string.match(p[1], '^(%d+)')) or now, p[1]} end
      elseif ln[4] then
        -- LIFO tasks of a level: the newest go first, so the oldest is the range's last.
        local last = oldest_front(ln[4])
        if last then oldest = {last[1], last[2]} end
      end
      if oldest and oldest[1] <= cutoff then
        aged[#aged + 1] = {oldest[1], ln, oldest[2]}
      end
    end
    table.sort(aged, function(a, b) return a[1] < b[1] end)
    for _, a in ipairs(aged) do
      if want <= 0 then break end
      if a[2][4] then
        -- LIFO tasks that waited past the bound, the oldest first.
        while want > 0 do
          local last = oldest_front(a[2][4])
          if not last or last[1] > cutoff then break end
          unpark(last[2])
        end
      elseif not a[2][2] then
        -- As many starts of the rotation as tenant tasks have waited past the bound (the
        -- rotation picks whose, fairly).
        local n = #redis.call('XPENDING', KEYS[T], group, '-', tostring(cutoff), want,
          TENANT_PARK)
        local rest = want - n
        want = n
        serve_tenants()
        want = want + rest
      else
        -- Exactly the waiting entries older than the bound: the next ones the group delivers.
        local n = #redis.call('XRANGE', a[2][2], a[3], tostring(cutoff), 'COUNT', want)
        read(a[2][2], a[2][3], n)
      end
    end
  end
  for _, ln in ipairs(lanes) do
    -- Entries without a task (a new level's entry on the main stream) took part of a read:
    -- read that stream again before a less urgent one (bounded: each such entry is removed).
    local foreign = 1
    if not ln[2] then
      if ln[3] == TENANT_LANE then serve_tenants() else serve_front(ln[4]) end
      foreign = 0
    end
    while want > 0 and foreign > 0 do
      local failed
      failed, foreign = read(ln[2], ln[3], want)
      if failed then return failed end
      foreign = foreign or 0
    end
  end
end
if #levels > 0 or has_tenants then out[#out + 1] = row_of_levels end
if key_blocks == 1 then out[#out + 1] = {'!', 0, 1} end
if settling then return finish(out, taken) end
if #taken > 0 then
  local head = owed > 0 and (owed .. '|') or ''
  redis.call('SET', KEYS[2], head .. nonce .. ':' .. table.concat(taken, ','), 'PX',
    receipt_ttl(owed))
end
return out
