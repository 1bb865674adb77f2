-- List a queue's tenants with their counts (read only).
-- KEYS     the queue's tenants block (lib.lua: "Tenants")
-- ARGV[1]  most tenants to list
-- Returns: {default settings ('' when none), tenants in all, tasks waiting in all, tasks held
-- in all, rows...}, a row {tenant, waiting, held, ms of its next task's entry (-1: none
-- waiting), 1 when in the rotation else 0, its own settings ('' when none)} for the tenants
-- with the most waiting (then the most held, then by key), at most ARGV[1] of them. The
-- tenants are those with work (the turn hash) or settings of their own.
local T, limit = 1, tonumber(ARGV[1]) or 20
local names, seen = {}, {}
for _, key in ipairs({KEYS[T + 6], KEYS[T + 5]}) do
  local fields = redis.pcall('HKEYS', key)
  if type(fields) == 'table' and not fields.err then
    for _, f in ipairs(fields) do
      if f ~= '' and not seen[f] then seen[f] = true; names[#names + 1] = f end
    end
  end
end
local rows = {}
for _, tn in ipairs(names) do
  rows[#rows + 1] = {tn, tenant_waiting(T, tn), tenant_held(T, tn)}
end
table.sort(rows, function(a, b)
  if a[2] ~= b[2] then return a[2] > b[2] end
  if a[3] ~= b[3] then return a[3] > b[3] end
  return a[1] < b[1]
end)
local default = redis.pcall('HGET', KEYS[T + 5], '')
if type(default) ~= 'string' then default = '' end
-- LIFO tasks without a tenant (lib.lua: `front_of`) are no tenant's.
local fronts = redis.call('ZLEXCOUNT', KEYS[T + 2], '[\1', '(\2')
local out = {default, #names, redis.call('ZCARD', KEYS[T + 2]) - fronts,
  redis.call('ZCARD', KEYS[T + 4])}
for i = 1, math.min(limit, #rows) do
  local tn, waiting, held = rows[i][1], rows[i][2], rows[i][3]
  local a, b = tenant_range(tn)
  local first = redis.call('ZRANGEBYLEX', KEYS[T + 2], a, b, 'LIMIT', 0, 1)[1]
  local ms = -1
  if first then ms = tonumber(string.match(first, '%z(%d+)%-%d+$')) or -1 end
  local ready = 0
  if redis.call('ZSCORE', KEYS[T + 3], tn) then ready = 1 end
  local own = redis.pcall('HGET', KEYS[T + 5], tn)
  if type(own) ~= 'string' then own = '' end
  out[#out + 1] = {tn, waiting, held, ms, ready, own}
end
return out
