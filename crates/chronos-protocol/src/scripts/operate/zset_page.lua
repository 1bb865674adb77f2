-- One page of a state kept in a sorted set (scheduled, retry, archived, completed, cancelled),
-- for listings and bulk actions; read only. The cursor is a position, (score, member), not a
-- rank: it still holds when its member has left the set (a bulk action moved it, a forwarder
-- or the janitor took it), and the members that share its score keep their place, since Redis
-- orders the members of one score by their bytes. A page read from a rank, or from past the
-- cursor's score, skipped them: thousands of dead letters settled in one millisecond share a
-- score, and a bulk run over them left a third behind.
-- KEYS[1]  the sorted set
-- ARGV[1]  the cursor's score, ARGV[2] its member, ARGV[3] most members to return (n),
-- ARGV[4]  '1' for the highest score first (ties: the greatest member first), else the lowest
-- Returns: {member, score, member, score, ...}: the first n members after the cursor, in order.
if not type_ok(KEYS[1], 'zset') then
  return redis.error_reply('E_CORRUPT queue keys of the wrong type')
end
local z, cscore, cmember = KEYS[1], ARGV[1], ARGV[2]
local n, rev = tonumber(ARGV[3]) or 0, ARGV[4] == '1'
if n < 1 then return {} end
-- True when member `a` comes before `b` in the listing's order among members of one score:
-- bytes compared as Redis compares them (Lua's `<` follows the server's collation locale).
local function ahead(a, b)
  local la, lb = #a, #b
  for i = 1, math.min(la, lb) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      if rev then return x > y end
      return x < y
    end
  end
  if rev then return la > lb end
  return la < lb
end
local from
local at = redis.call('ZSCORE', z, cmember)
if at and tonumber(at) == tonumber(cscore) then
  -- Still where the cursor saw it: its rank is the place.
  if rev then from = redis.call('ZREVRANK', z, cmember) else from = redis.call('ZRANK', z, cmember) end
  from = from + 1
else
  -- Gone (or moved to another score): the members of scores before the cursor's, then those
  -- of its score that come before its member (read in order until the first that does not).
  if rev then
    from = redis.call('ZCOUNT', z, '(' .. cscore, '+inf')
  else
    from = redis.call('ZCOUNT', z, '-inf', '(' .. cscore)
  end
  local off = 0
  while true do
    local part
    if rev then
      part = redis.call('ZREVRANGEBYSCORE', z, cscore, cscore, 'LIMIT', off, 1000)
    else
      part = redis.call('ZRANGEBYSCORE', z, cscore, cscore, 'LIMIT', off, 1000)
    end
    local ahead_of_cursor = 0
    for _, m in ipairs(part) do
      if not ahead(m, cmember) then break end
      ahead_of_cursor = ahead_of_cursor + 1
    end
    from = from + ahead_of_cursor
    if ahead_of_cursor < 1000 then break end
    off = off + 1000
  end
end
if rev then
  return redis.call('ZREVRANGE', z, from, from + n - 1, 'WITHSCORES')
end
return redis.call('ZRANGE', z, from, from + n - 1, 'WITHSCORES')
