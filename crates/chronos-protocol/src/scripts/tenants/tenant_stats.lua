-- List a queue's tenants with their counts, the busiest first, without counting every tenant:
-- the load set (lib.lua `tenant_load`) keeps them in order. Rebuilds that set once when its
-- counts are not known to be complete (a queue from before it), from the tenants with work or
-- settings of their own.
-- KEYS     the queue's tenants block (lib.lua: "Tenants")
-- ARGV[1]  most tenants to list
-- ARGV[2]  '1': also count and list tenants with settings of their own but no work, after the
--          busy ones (reads every settings field: for an operator's listing, not for metrics)
-- Returns: {default settings ('' when none), tenants in all (those with work, plus with
-- ARGV[2] those with settings only), tasks waiting in all, tasks held in all, rows...}, a row
-- {tenant, waiting, held, ms of its next task's entry (-1: none waiting), 1 when in the
-- rotation else 0, its own settings ('' when none)} for the tenants with the most waiting (then
-- the most held, then by key), at most ARGV[1] of them.
local T, limit, own = 1, tonumber(ARGV[1]) or 20, ARGV[2] == '1'
if not redis.call('ZSCORE', KEYS[T + 7], '\0') then
  redis.call('DEL', KEYS[T + 7])
  local seen = {}
  for _, key in ipairs({KEYS[T + 6], KEYS[T + 5]}) do
    local fields = redis.pcall('HKEYS', key)
    if type(fields) == 'table' and not fields.err then
      for _, tn in ipairs(fields) do
        if tn ~= '' and not seen[tn] and not is_front(tn) then
          seen[tn] = true
          local waiting, held = tenant_waiting(T, tn), tenant_held(T, tn)
          if waiting + held > 0 then
            redis.call('ZADD', KEYS[T + 7], -(waiting * LOAD_HELD + held), tn)
          end
        end
      end
    end
  end
  redis.call('ZADD', KEYS[T + 7], 0, '\0')
end
local busy = redis.call('ZCARD', KEYS[T + 7]) - 1
local names = {}
if limit > 0 then
  names = redis.call('ZRANGE', KEYS[T + 7], '-inf', '(0', 'BYSCORE', 'LIMIT', 0, limit)
end
local total = busy
if own then
  local listed = {}
  for _, tn in ipairs(names) do listed[tn] = true end
  local fields = redis.pcall('HKEYS', KEYS[T + 5])
  if type(fields) == 'table' and not fields.err then
    local idle = {}
    for _, tn in ipairs(fields) do
      if tn ~= '' and not listed[tn] and not redis.call('ZSCORE', KEYS[T + 7], tn) then
        idle[#idle + 1] = tn
      end
    end
    total = total + #idle
    table.sort(idle)
    for i = 1, math.min(#idle, limit - #names) do names[#names + 1] = idle[i] end
  end
end
local default = redis.pcall('HGET', KEYS[T + 5], '')
if type(default) ~= 'string' then default = '' end
-- LIFO tasks without a tenant (lib.lua: `front_of`) are no tenant's.
local fronts = redis.call('ZLEXCOUNT', KEYS[T + 2], '[\1', '(\2')
local out = {default, total, redis.call('ZCARD', KEYS[T + 2]) - fronts,
  redis.call('ZCARD', KEYS[T + 4])}
for _, tn in ipairs(names) do
  local a, b = tenant_range(tn)
  local first = redis.call('ZRANGEBYLEX', KEYS[T + 2], a, b, 'LIMIT', 0, 1)[1]
  local ms = -1
  if first then ms = tonumber(string.match(first, '%z(%d+)%-%d+$')) or -1 end
  local ready = 0
  if redis.call('ZSCORE', KEYS[T + 3], tn) then ready = 1 end
  local own_conf = redis.pcall('HGET', KEYS[T + 5], tn)
  if type(own_conf) ~= 'string' then own_conf = '' end
  out[#out + 1] = {tn, tenant_waiting(T, tn), tenant_held(T, tn), ms, ready, own_conf}
end
return out
