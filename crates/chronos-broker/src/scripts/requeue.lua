-- Put fetched but unstarted tasks back at the end of their queue without counting an attempt
-- (graceful shutdown).
-- KEYS[1]  the queue's stream
-- ARGV[1]  key prefix, ARGV[2] consumer group
-- then pairs: task id, stream entry id
-- Returns: how many tasks were re-queued; a pair whose lease no longer matches is skipped.
-- The new entry carries the envelope of the old one (`i=<id> e=<envelope>`). A hash that still
-- holds `e` (a task written before envelopes moved into the stream) gives its envelope to the
-- entry and drops it.
local prefix, group = ARGV[1], ARGV[2]
local n = 0

for i = 3, #ARGV, 2 do
  local id, mid = ARGV[i], ARGV[i + 1]
  local tkey = prefix .. 't:' .. id
  local h = redis.call('HMGET', tkey, 'm', 'e')
  if h[1] == mid then
    local env = h[2] or entry_envelope(KEYS[1], mid)
    redis.call('XACK', KEYS[1], group, mid)
    redis.call('XDEL', KEYS[1], mid)
    back_to_stream(KEYS[1], tkey, id, env, h[2])
    n = n + 1
  end
end
return n
