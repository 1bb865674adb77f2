-- Move due delayed and retry tasks of one queue into its stream.
-- KEYS[1]  the queue's stream, KEYS[2] its scheduled set, KEYS[3] its retry set, then one task
--          hash per task, then the queue's lanes (lib.lua: `lane`: a task goes back to its
--          level's stream), then its settings hash (S_RETRY_LEVEL: a retried task more urgent
--          than its own level goes to that level, ahead of the backlog, and keeps it), then its
--          tenants block (lib.lua: "Tenants": a tenant task goes to the waiting set, parked);
--          last, the queue's event stream (lib.lua: `EVENTS`)
-- ARGV     pairs: 's' (scheduled) or 'r' (retry), task id (as listed by due.lua)
-- Returns: how many tasks were moved. A task is moved only if it is still in its set and due by
-- Redis's clock (so a re-sent call moves nothing twice); a member whose task hash is gone
-- (deleted) is dropped from the set. Each task moved writes its `forwarded` event.
-- The envelope moves from the hash's `e` into the new entry (`i=<id> e=<envelope>`), and the
-- hash is rebuilt without it: a hash that once held the envelope was converted to a hashtable
-- (the envelope is longer than hash-max-listpack-value) and never converts back by itself,
-- while rebuilt with its small fields only it is a compact listpack again.
local now = now_ms()
if not type_ok(KEYS[1], 'stream') or not type_ok(KEYS[2], 'zset') or not type_ok(KEYS[3], 'zset') then
  return redis.error_reply('E_CORRUPT queue keys of the wrong type')
end
local T = #KEYS - TENANTS_LEN + 1
local SETTINGS = T - 1
local LANES = SETTINGS - LANES_LEN
local retry_level = redis.pcall('HGET', KEYS[SETTINGS], S_RETRY_LEVEL)
if not level_index(retry_level) then retry_level = nil end
local todo = {}
for t = 0, #ARGV / 2 - 1 do
  local zkey = KEYS[2]
  if ARGV[1 + t * 2] == 'r' then zkey = KEYS[3] end
  local id, tkey = ARGV[2 + t * 2], KEYS[4 + t]
  local score = tonumber(redis.call('ZSCORE', zkey, id))
  if score and score <= now then
    local h = redis.pcall('HGETALL', tkey)
    if type(h) == 'table' and h.err then h = {} end
    todo[#todo + 1] = {zkey, id, tkey, h}
  end
end
local moved = 0
for _, t in ipairs(todo) do
  local zkey, id, tkey, all = unpack(t)
  local env = field_of(all, F_ENVELOPE)
  if env then
    local level = field_of(all, F_PRIORITY) or NORMAL_LEVEL
    if zkey == KEYS[3] and retry_level and tonumber(retry_level) < tonumber(level) then
      level = retry_level
    end
    local tn = field_of(all, F_TENANT)
    local stream, mid, order
    -- A LIFO task without a tenant belongs to its level's front, which may have changed.
    if tn and is_front(tn) then tn = front_of(level) end
    if tn then
      stream = KEYS[T]
      mid, order = tenant_ready(T, KEYS[1], KEYS[LANES + LEVELS], KEYS[SETTINGS], tn, level,
        field_of(all, F_TENANT_ORDER), nil, id, env, field_of(all, F_RETRIED),
        field_of(all, F_ERROR), field_of(all, F_FAILED_AT))
    else
      stream = lane(KEYS[1], LANES, level)
      mid = add_entry(stream, id, env, field_of(all, F_RETRIED), field_of(all, F_ERROR),
        field_of(all, F_FAILED_AT))
    end
    local args = {tkey, F_STATE, 'pending', F_DELIVERY, mid}
    for j = 1, #all, 2 do
      local k = all[j]
      if k ~= F_ENVELOPE and k ~= F_STATE and k ~= F_DELIVERY and k ~= F_PRIORITY and
          k ~= F_TENANT_ORDER and k ~= F_TENANT then
        args[#args + 1] = k
        args[#args + 1] = all[j + 1]
      end
    end
    if tn then args[#args + 1] = F_TENANT; args[#args + 1] = tn end
    if order then args[#args + 1] = F_TENANT_ORDER; args[#args + 1] = order end
    if stream ~= KEYS[1] and level ~= NORMAL_LEVEL then
      args[#args + 1] = F_PRIORITY; args[#args + 1] = level
    end
    redis.call('DEL', tkey)
    redis.call('HSET', unpack(args))
    transition(EV.FORWARDED, id, env)
    moved = moved + 1
  end
  redis.call('ZREM', zkey, id)
end
return moved
