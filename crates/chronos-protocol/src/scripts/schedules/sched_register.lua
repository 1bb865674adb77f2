-- Record the first registration of schedule ids of one queue, at Redis' clock.
-- KEYS[1]  the queue's sched:reg hash (schedule id -> first registration ms)
-- ARGV     schedule ids
-- Returns: each id's first registration ms, in order (existing marks are never moved).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for i = 1, #ARGV do
  redis.call('HSETNX', KEYS[1], ARGV[i], now)
  out[i] = tonumber(redis.call('HGET', KEYS[1], ARGV[i])) or now
end
return out
