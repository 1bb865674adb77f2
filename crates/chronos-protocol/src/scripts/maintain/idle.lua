-- List deliveries idle for at least a given time, with their task ids (read only).
-- KEYS[1]  the queue's stream
-- ARGV[1]  consumer group, ARGV[2] min idle ms, ARGV[3] most entries, ARGV[4] first entry id to
--          look at ('-' for the start; '(' before an id means after it), ARGV[5] '1' for the
--          tenant stream, whose parking consumer's entries are waiting tasks, never idle
--          deliveries (lib.lua: "Tenants"): there each other consumer's list is read
-- Returns: {entry id, task id (the entry id for a plain task; '' when the entry carries none)} per idle delivery, oldest
-- first. XPENDING with IDLE walks the whole pending list if it must, so idle deliveries behind
-- thousands of live ones are found in one call.
local p
if ARGV[5] == '1' then
  p = {}
  local consumers = redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])
  for _, c in ipairs(consumers) do
    local name = field_of(c, 'name')
    if name and name ~= TENANT_PARK and (tonumber(field_of(c, 'pending')) or 0) > 0 then
      local mine = redis.call('XPENDING', KEYS[1], ARGV[1], 'IDLE', ARGV[2], ARGV[4], '+',
        ARGV[3], name)
      for _, e in ipairs(mine) do p[#p + 1] = e end
    end
  end
  table.sort(p, function(a, b)
    local am, as = string.match(a[1], '^(%d+)%-(%d+)$')
    local bm, bs = string.match(b[1], '^(%d+)%-(%d+)$')
    if am ~= bm then return tonumber(am) < tonumber(bm) end
    return tonumber(as) < tonumber(bs)
  end)
  while #p > (tonumber(ARGV[3]) or 100) do table.remove(p) end
else
  p = redis.call('XPENDING', KEYS[1], ARGV[1], 'IDLE', ARGV[2], ARGV[4], '+', ARGV[3])
end
local out = {}
for _, e in ipairs(p) do
  local r = redis.call('XRANGE', KEYS[1], e[1], e[1])
  local fields = r[1] and r[1][2]
  -- A plain task's entry has no `i`: its id is the entry's own.
  local id = field_of(fields, F_TASK_ID) or (field_of(fields, F_ENVELOPE) and e[1]) or ''
  out[#out + 1] = {e[1], id}
end
return out
