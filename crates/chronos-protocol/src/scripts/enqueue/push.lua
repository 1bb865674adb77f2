-- Enqueue a batch of plain tasks into one queue (see lib.lua: ready now, no explicit id, no
-- unique key, no retention): one stream entry each and nothing else, so a plain task costs
-- Redis one XADD.
-- KEYS[1]  the queue's stream, KEYS[2] this call's receipt, then the queue's event stream
--          (lib.lua: `EVENTS`)
-- ARGV[1]  receipt TTL ms (the idempotency window; 0 = keep no receipt), ARGV[2] '1' when each
--          task comes with its policy, then per task: its envelope, and with a policy its max
--          retry ('' = 25) and '1' to discard it when it dies ('' = archive)
-- Returns: the first task's id (its entry id `<ms>-<seq>`); the k-th task's id is
-- `<ms>-<seq + k>` (the entries get consecutive ids, so a reply and a receipt stay one id
-- long whatever the batch), or, for a stream whose sequence numbers are beyond what Lua counts
-- exactly, the list of the ids. -3 when the stream is of the wrong type: nothing written.
-- A re-sent call (its first reply lost on a reconnect) finds its receipt and answers the same
-- ids without writing again, even after the tasks ran and were deleted.
local receipt = redis.pcall('GET', KEYS[2])
if type(receipt) == 'string' then
  if string.find(receipt, ',', 1, true) then
    local ids = {}
    for id in string.gmatch(receipt, '[^,]+') do ids[#ids + 1] = id end
    return ids
  end
  return receipt
end
local policy = ARGV[2] == '1'
local step = policy and 3 or 1
local function entry(a, mid)
  local args = {KEYS[1], mid, F_ENVELOPE, ARGV[a]}
  if policy then
    if ARGV[a + 1] ~= '' then args[#args + 1] = F_MAX_RETRY; args[#args + 1] = ARGV[a + 1] end
    if ARGV[a + 2] == '1' then args[#args + 1] = F_DISCARD; args[#args + 1] = '1' end
  end
  return args
end
local first = redis.pcall('XADD', unpack(entry(3, '*')))
if type(first) ~= 'string' then return -3 end
local ms, seq = string.match(first, '^(%d+)%-(%d+)$')
seq = tonumber(seq)
local ttl = tonumber(ARGV[1]) or 0
local count = (#ARGV - 2) / step
if seq + count >= 2 ^ 53 then
  -- A sequence this large (only explicit ids written by hand make one) cannot be counted up
  -- exactly in Lua: each entry takes the id Redis gives it, and the reply lists them all.
  local ids = {first}
  for a = 3 + step, #ARGV, step do ids[#ids + 1] = redis.call('XADD', unpack(entry(a, '*'))) end
  if events_on() then
    for i, id in ipairs(ids) do transition(EV.ENQUEUED, id, ARGV[3 + (i - 1) * step]) end
  end
  if ttl > 0 then redis.call('SET', KEYS[2], table.concat(ids, ','), 'PX', ttl) end
  return ids
end
local stream, k = KEYS[1], 0
for a = 3 + step, #ARGV, step do
  k = k + 1
  if policy then
    redis.call('XADD', unpack(entry(a, string.format('%s-%d', ms, seq + k))))
  else
    redis.call('XADD', stream, string.format('%s-%d', ms, seq + k), F_ENVELOPE, ARGV[a])
  end
end
if events_on() then
  k = 0
  for a = 3, #ARGV, step do
    transition(EV.ENQUEUED, string.format('%s-%d', ms, seq + k), ARGV[a])
    k = k + 1
  end
end
if ttl > 0 then redis.call('SET', KEYS[2], first, 'PX', ttl) end
return first
