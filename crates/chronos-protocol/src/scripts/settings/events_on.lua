-- Turn a queue's event stream on: make it, empty, unless it exists (then its events and its
-- consumer groups stay as they are). The transition scripts write events while it exists.
-- KEYS[1]  the queue's event stream
-- Returns: 1 when this call made it, 0 when it was on already.
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
-- An entry added and trimmed at once: the stream exists with no entries.
redis.call('XADD', KEYS[1], 'MAXLEN', 0, '*', E.TYPE, EVENTS_NAME)
return 1
