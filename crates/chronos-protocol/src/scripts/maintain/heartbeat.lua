-- Keep the leases of running tasks fresh so the recoverer does not reclaim them.
-- KEYS[1]  the queue's stream
-- ARGV[1]  consumer group, ARGV[2] consumer (the caller), then stream entry ids
-- Returns: the entry ids still owned by the caller, now with idle time 0. An id missing from the
-- reply was reclaimed by the recoverer: its task must be cancelled. Only entries the caller owns
-- are touched (a plain XCLAIM would steal entries back from their new owner); one XPENDING over
-- the caller's own pending list finds them.
local group, me = ARGV[1], ARGV[2]
local asked = {}
for i = 3, #ARGV do asked[ARGV[i]] = true end
local mine = redis.call('XPENDING', KEYS[1], group, '-', '+', #ARGV - 2 + 1000000, me)
local args = {KEYS[1], group, me, 0}
for _, e in ipairs(mine) do
  if asked[e[1]] then args[#args + 1] = e[1] end
end
if #args == 4 then return {} end
args[#args + 1] = 'JUSTID'
return redis.call('XCLAIM', unpack(args))
