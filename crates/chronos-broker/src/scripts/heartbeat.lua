-- Keep the leases of running tasks fresh so the recoverer does not reclaim them.
-- KEYS[1]  the queue's stream
-- ARGV[1]  consumer group, ARGV[2] consumer (the caller), then stream entry ids
-- Returns: the entry ids still owned by the caller, now with idle time 0. An id missing from the
-- reply was reclaimed by the recoverer: its task must be cancelled. Only entries the caller owns
-- are touched (a plain XCLAIM would steal entries back from their new owner).
local group, me = ARGV[1], ARGV[2]
local owned = {}
for i = 3, #ARGV do
  local p = redis.call('XPENDING', KEYS[1], group, ARGV[i], ARGV[i], 1)
  if p[1] and p[1][2] == me then owned[#owned + 1] = ARGV[i] end
end
if #owned == 0 then return {} end
-- unpack() must be the last argument: in the middle of a list Lua keeps only its first value.
local args = {KEYS[1], group, me, 0}
for _, id in ipairs(owned) do args[#args + 1] = id end
args[#args + 1] = 'JUSTID'
return redis.call('XCLAIM', unpack(args))
