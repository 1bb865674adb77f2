-- Inspector action "run now": scheduled, retry, archived or cancelled tasks go to the end of the
-- stream as pending. A dead letter re-run gets its attempts back (`r` = 0); a cancelled task
-- keeps its attempts and loses its reason.
-- KEYS[1]  the queue's stream, KEYS[2..4] its scheduled, retry and archived sets, then one task
--          hash per task, then the queue's lanes (lib.lua: `lane`: a task goes to its level's
--          stream), then its settings hash and its tenants block (lib.lua: "Tenants": a tenant
--          task waits for its tenant's turn, parked), then its cancelled set; last, the queue's
--          event stream (lib.lua: `EVENTS`: each task moved writes `run_now`)
-- ARGV[1]  consumer group, then task ids, one per task hash
-- Returns: one code per task, in order:
--    1  moved to the stream
--    2  already pending or active (a re-sent call whose first run moved it): nothing changed
--    0  no such task
--   -1  its state does not run now (completed); the state name follows in the reply's second list
--   -2  corrupt record (not a hash, or no envelope): nothing changed
-- Reply: {codes, states}
-- The hash is rebuilt without `e` (which moves into the entry), `s`, `m` and `d`, as forward.lua
-- does, so it is a compact listpack again.
if not type_ok(KEYS[1], 'stream') or not type_ok(KEYS[2], 'zset') or not type_ok(KEYS[3], 'zset')
  or not type_ok(KEYS[4], 'zset') or not type_ok(KEYS[#KEYS], 'zset') then
  return redis.error_reply('E_CORRUPT queue keys of the wrong type')
end
local T = #KEYS - TENANTS_LEN
local SETTINGS = T - 1
local LANES = SETTINGS - LANES_LEN
local sets = {scheduled = KEYS[2], retry = KEYS[3], archived = KEYS[4], cancelled = KEYS[#KEYS]}
local codes, states, todo = {}, {}, {}
for a = 2, #ARGV do
  local i, id, tkey = a - 1, ARGV[a], KEYS[3 + a]
  local h = redis.pcall('HGETALL', tkey)
  local s = ''
  -- A plain task (lib.lua) has no hash: pending or active in its entry, already runnable
  -- (active while a worker holds it: a completion whose ack waits for the next fetch, too).
  local ps, delivered
  if type(h) == 'table' and not h.err and #h == 0 then
    local _
    ps, _, delivered = plain_state(KEYS[1], ARGV[1], tkey, id, true)
    if delivered then ps = 'active' end
  end
  if type(h) == 'table' and h.err then
    codes[i] = -2
  elseif ps then
    s = ps
    codes[i] = 2
  elseif #h == 0 then
    codes[i] = 0
  else
    s = field_of(h, F_STATE) or ''
    if s == 'pending' or s == 'active' then
      codes[i] = 2
    elseif sets[s] == nil then
      codes[i] = -1
    elseif not field_of(h, F_ENVELOPE) then
      codes[i] = -2
    else
      codes[i] = 1
      todo[#todo + 1] = {id, tkey, h, s}
    end
  end
  states[i] = s
end
for _, t in ipairs(todo) do
  local id, tkey, all, s = unpack(t)
  local r = field_of(all, F_RETRIED)
  if s == 'archived' then r = '0' end
  local tn = field_of(all, F_TENANT)
  local mid, order
  if tn then
    mid, order = tenant_ready(T, KEYS[1], KEYS[LANES + LEVELS], KEYS[SETTINGS], tn,
      field_of(all, F_PRIORITY), field_of(all, F_TENANT_ORDER), nil, id,
      field_of(all, F_ENVELOPE), r, field_of(all, F_ERROR), field_of(all, F_FAILED_AT))
  else
    local stream = lane(KEYS[1], LANES, field_of(all, F_PRIORITY))
    mid = add_entry(stream, id, field_of(all, F_ENVELOPE), r, field_of(all, F_ERROR),
      field_of(all, F_FAILED_AT))
  end
  local args = {tkey, F_STATE, 'pending', F_DELIVERY, mid}
  if order then args[#args + 1] = F_TENANT_ORDER; args[#args + 1] = order end
  for j = 1, #all, 2 do
    local k = all[j]
    if k ~= F_ENVELOPE and k ~= F_STATE and k ~= F_DELIVERY and k ~= F_SETTLED
        and k ~= F_TENANT_ORDER and k ~= F_CANCEL_REASON and k ~= F_CANCELLED_AT
        and not (k == F_RETRIED and s == 'archived') then
      args[#args + 1] = k
      args[#args + 1] = all[j + 1]
    end
  end
  if s == 'archived' then args[#args + 1] = F_RETRIED; args[#args + 1] = '0' end
  redis.call('DEL', tkey)
  redis.call('HSET', unpack(args))
  redis.call('ZREM', sets[s], id)
  transition(EV.RUN_NOW, id, field_of(all, F_ENVELOPE))
end
return {codes, states}
