-- List deliveries idle for at least a given time, with their task ids (read only).
-- KEYS[1]  the queue's stream
-- ARGV[1]  consumer group, ARGV[2] min idle ms, ARGV[3] most entries, ARGV[4] first entry id to
--          look at ('-' for the start; '(' before an id means after it)
-- Returns: {entry id, task id (the entry id for a plain task; '' when the entry carries none)} per idle delivery, oldest
-- first. XPENDING with IDLE walks the whole pending list if it must, so idle deliveries behind
-- thousands of live ones are found in one call.
local p = redis.call('XPENDING', KEYS[1], ARGV[1], 'IDLE', ARGV[2], ARGV[4], '+', ARGV[3])
local out = {}
for _, e in ipairs(p) do
  local r = redis.call('XRANGE', KEYS[1], e[1], e[1])
  local fields = r[1] and r[1][2]
  -- A plain task's entry has no `i`: its id is the entry's own.
  local id = field_of(fields, F_TASK_ID) or (field_of(fields, F_ENVELOPE) and e[1]) or ''
  out[#out + 1] = {e[1], id}
end
return out
