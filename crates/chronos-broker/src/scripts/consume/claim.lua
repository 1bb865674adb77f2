-- Deliver new entries of a queue to a consumer without waiting: the fetch path while a queue is
-- busy (the blocking wait of an idle queue is an XREADGROUP BLOCK on the reader's own
-- connection, since a script cannot block).
-- KEYS[1]  the queue's stream, KEYS[2] the consumer's fetch receipt
-- ARGV[1]  consumer group, ARGV[2] consumer, ARGV[3] most entries, ARGV[4] receipt TTL ms,
-- ARGV[5]  this call's nonce (random per call, the same in a re-send)
-- Returns: rows: {entry id, task id, envelope, retried, last error, last failed at ms} for an
-- entry to run (the last three from the entry, '0'/'' for a first delivery), {entry id,
-- envelope} for a plain task's entry (lib.lua: its id is the entry's), or {entry id} for
-- an entry that carries no task (foreign or emptied; acked and deleted here so it never blocks
-- the queue). An entry that names a task (`i`) but lost its envelope is delivered with a nil
-- envelope, so that the worker dead-letters the task with the reason instead of dropping it.
-- The task hash is not touched: a delivery becomes an attempt only when start.lua marks it
-- active, right before its handler runs, so entries fetched but never started (a lost reply, a
-- crash with a prefetched batch) are re-delivered later without spending an attempt.
-- A re-sent call (its first reply was lost) finds its nonce in the consumer's receipt
-- (`<nonce>:<entry id>,<entry id>...`, written by the call that delivered them) and returns the
-- same entries again instead of reading new ones, so nothing is stranded in the consumer's
-- pending list. One receipt per consumer is enough because a consumer fetches one call at a
-- time; a call that overlapped another only risks waiting for the recoverer, never an attempt.
local group, me, nonce = ARGV[1], ARGV[2], ARGV[5]
local out = {}

local function row(mid, env, fields)
  local id = field_of(fields, F_TASK_ID)
  -- A plain task's entry (no `i`): its id is the entry's, and it never failed before.
  if not id then return {mid, env} end
  return {mid, id, env, field_of(fields, F_RETRIED) or '0', field_of(fields, F_ERROR) or '',
    field_of(fields, F_FAILED_AT) or '0'}
end
-- Whether an entry names a task (a non-empty `i`).
local function named(fields)
  local id = field_of(fields, F_TASK_ID)
  return id ~= nil and id ~= ''
end
local receipt = redis.pcall('GET', KEYS[2])
if type(receipt) == 'string' and string.sub(receipt, 1, #nonce + 1) == nonce .. ':' then
  for mid in string.gmatch(string.sub(receipt, #nonce + 2), '[^,]+') do
    local r = redis.call('XRANGE', KEYS[1], mid, mid)
    local fields = r[1] and r[1][2]
    local env = field_of(fields, F_ENVELOPE)
    if env or named(fields) then out[#out + 1] = row(mid, env or false, fields) end
  end
  return out
end
local res = redis.call('XREADGROUP', 'GROUP', group, me, 'COUNT', ARGV[3], 'STREAMS', KEYS[1], '>')
local mids = {}
if res then
  for _, entry in ipairs(res[1][2]) do
    local mid, fields = entry[1], entry[2]
    local env = field_of(fields, F_ENVELOPE)
    if env or named(fields) then
      out[#out + 1] = row(mid, env or false, fields)
      mids[#mids + 1] = mid
    else
      settle_entries(KEYS[1], group, {mid})
      out[#out + 1] = {mid}
    end
  end
end
if #mids > 0 then
  redis.call('SET', KEYS[2], nonce .. ':' .. table.concat(mids, ','), 'PX', ARGV[4])
end
return out
