-- The outage a fleet shares: its state and its parked keys, under one
-- hash tag (so that both live on one Redis Cluster node). The rules are
-- not here: each replica loads the state, decides in Rust (the core's
-- outage rules) and stores what changed with a compare-and-set. A replica
-- decides for every key its callers asked about meanwhile in one load and
-- one store, so that a thousand keys asking at once cost a few
-- compare-and-sets, not a thousand.
--
-- KEYS[1]  the state: "<version> <text>"
-- KEYS[2]  the parked keys: a hash, field = a key's hash, value = its text
-- ARGV[1]  "load" or "store"
--
-- load:  ARGV[2..] the fields of the keys asked about (none for none)
--        answers {version (-1: the state is not ours), state text or nil,
--        {each key's text or nil}, TIME seconds, TIME microseconds}
-- store: ARGV[2] the version loaded (0: there was no state)
--        ARGV[3] the state's text
--        ARGV[4] "1" when every parked key is stale (a new generation)
--        ARGV[5] how long both live unwritten, in milliseconds
--        ARGV[6..] pairs: a key's field and its text ("-": removed)
--        answers 1 when written, 0 when the version moved meanwhile

local raw = redis.call('GET', KEYS[1])
local version, text = 0, false
if raw then
  local v, t = string.match(raw, '^(%d+) (.*)$')
  if v then
    version, text = tonumber(v), t
  else
    -- Not ours: loaded as version -1 (the caller reports it), never written.
    version, text = -1, raw
  end
end

if ARGV[1] == 'load' then
  local entries = {}
  if #ARGV > 1 then
    entries = redis.call('HMGET', KEYS[2], unpack(ARGV, 2))
  end
  local now = redis.call('TIME')
  return {version, text, entries, tonumber(now[1]), tonumber(now[2])}
end

if version < 0 or version ~= tonumber(ARGV[2]) then
  return 0
end
local ttl = tonumber(ARGV[5])
if ARGV[4] == '1' then
  redis.call('DEL', KEYS[2])
end
redis.call('SET', KEYS[1], string.format('%d %s', version + 1, ARGV[3]), 'PX', ttl)
for i = 6, #ARGV, 2 do
  if ARGV[i + 1] == '-' then
    redis.call('HDEL', KEYS[2], ARGV[i])
  else
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  end
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return 1
