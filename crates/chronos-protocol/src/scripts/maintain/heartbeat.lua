-- Keep the leases of running tasks fresh so the recoverer does not reclaim them, and store the
-- progress their handlers reported (a report proves its task alive as a beat does).
-- KEYS[1]  the queue's stream (or a level's), then one progress key per update, in order, then
--          the queue's event stream (lib.lua: `EVENTS`)
-- ARGV[1]  consumer group, ARGV[2] consumer (the caller), ARGV[3] n, ARGV[4..3+n] stream entry
--          ids, ARGV[4+n] progress TTL ms, then per update: its entry id and its JSON value
-- Returns: the entry ids still owned by the caller, now with idle time 0. An id missing from the
-- reply was reclaimed by the recoverer: its task must be cancelled, and its update is dropped.
-- Only entries the caller owns are touched (a plain XCLAIM would steal entries back from their
-- new owner); one XPENDING over the caller's own pending list finds them. A progress value is
-- stored as `<ms>:<json>` (store clock); a re-sent call stores the same value again, and
-- writes no second progress event: the event is written only for a value that differs from the
-- one stored.
local group, me = ARGV[1], ARGV[2]
local n = tonumber(ARGV[3]) or 0
local asked = {}
for i = 4, 3 + n do asked[ARGV[i]] = true end
local mine = redis.call('XPENDING', KEYS[1], group, '-', '+', n + 1000000, me)
local args = {KEYS[1], group, me, 0}
local held = {}
for _, e in ipairs(mine) do
  if asked[e[1]] then
    args[#args + 1] = e[1]
    held[e[1]] = true
  end
end
if #args == 4 then return {} end
local ttl = tonumber(ARGV[4 + n]) or 0
local at = 5 + n
local now = nil
for k = 2, #KEYS do
  local mid, value = ARGV[at], ARGV[at + 1]
  at = at + 2
  if held[mid] and ttl > 0 then
    now = now or now_ms()
    local old = events_on() and redis.pcall('GET', KEYS[k])
    redis.call('SET', KEYS[k], now .. ':' .. value, 'PX', ttl)
    if events_on() and not (type(old) == 'string' and string.match(old, '^%d+:(.*)$') == value) then
      transition(EV.PROGRESS, string.match(KEYS[k], ':pg:(.*)$') or '',
        entry_envelope(KEYS[1], mid), E.VALUE, value)
    end
  end
end
args[#args + 1] = 'JUSTID'
return redis.call('XCLAIM', unpack(args))
