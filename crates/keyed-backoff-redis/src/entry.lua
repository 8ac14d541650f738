-- keyed-backoff: one key's entry, read and changed atomically.
--
-- The same rules as the in-process manager's (the core crate's src/rules.rs),
-- for client-go's doubling rule. An entry is a string, "b,t,a", then
-- optionally "@f", then optionally ";record;record...":
--   b  backoff, nanoseconds: decimal digits, below 2^52 (exact in a Lua double)
--   t  time of the last `next`, in time units (microseconds of Redis TIME,
--      or nanoseconds of the caller's clock): an integer
--   a  attempts since the entry was (re)initialised: 0 to 4095
--   f  a floor (a server's Retry-After): the key may not run before this
--      time, in time units. Kept apart from b, t, a: the ladder grows as
--      without it. A key held with no ladder is "@f[;records]".
--   record  the answer to one of the most recent operations that carried an
--      id, newest first, at most RECENT: "id,1,backoff,attempts" or
--      "id,0,remaining" (none until an operation carries an id)
-- One GET reads it and one SET (with its time to live) writes it.
--
-- Entries written by earlier versions are hashes with the fields b, t, a,
-- r (the records, ";"-separated) and o (the id of the last advance). They
-- are read, held to the same checks, and rewritten as strings.
--
-- Before anything else the key is checked: anything but a missing key or an
-- entry as above is not ours, and every operation (reset included) answers
-- {-1, what is wrong} and leaves it exactly as it was.
--
-- KEYS[1]  the entry's key
-- ARGV[1]  op: next | try_next | get | attempts | since | since_update | remaining | reset | gc_key
--          | hold | level | resume | standing
-- ARGV[2]  now in nanoseconds by the caller's clock, or "" to read Redis
--          TIME (then the time unit is a microsecond, else a nanosecond)
-- ARGV[3]  the event's age in nanoseconds: now - event (negative: in the future)
-- ARGV[4]  initial backoff, ns        ARGV[5]  max backoff, ns
-- ARGV[6]  the jitter draw times the jitter, in [0, jitter) ("0": none)
-- ARGV[7]  expire_after, ns           ARGV[8]  time to live of a written entry, ms
-- ARGV[9]  operation id ("" for none)
-- ARGV[10] hold: the floor's wait, ns; resume: the level's backoff, ns
-- ARGV[11] resume: the level's attempts
--
-- Replies: next/try_next {1, backoff_ns, attempts} or, refused, {0, remaining_ns};
-- get/attempts/remaining an integer (0: none); since/since_update/reset/gc_key
-- 0 or 1; hold 1; resume 1 if it wrote the entry, else 0; level
-- {1, backoff_ns, attempts} for a live entry, else 0; standing (level and
-- remaining in one call) {2, 1 if live else 0, backoff_ns, attempts,
-- remaining} (0 for none); anything not ours {-1, detail}.
--
-- The floor is honoured by every check before a run (try_next, remaining,
-- since, since_update: the longer of the two waits); next, get, attempts
-- and level see the ladder alone; reset removes both.
--
-- Every call pays for each number it converts and each function it makes,
-- so the common path converts only what it uses, writes the entry with one
-- string.format("%d..."), and makes functions only on the paths that need
-- them (an error's wording, the records of ids).

local tonumber, match, format, sub = tonumber, string.match, string.format, string.sub
local MASK = 4503599627370495 -- 2^52 - 1, the largest backoff
local MAX_ATTEMPTS = 4095
local RECENT = 4 -- operation ids remembered per key

local key, op, op_id = KEYS[1], ARGV[1], ARGV[9]
local unit, now
if ARGV[2] == '' then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000000 + tonumber(time[2])
  unit = 1000
else
  now = tonumber(ARGV[2])
  unit = 1
end
local age_ns, event = 0, now
if ARGV[3] ~= '0' then
  age_ns = tonumber(ARGV[3])
  event = now - age_ns / unit
end
local expire_after_ns = tonumber(ARGV[7])

-- The entry. fb, ft, fa: the digits of b, t, a (nil: no entry); ff: the
-- floor's digits (nil: none); fr: the records (nil: none); legacy_id: an
-- earlier version's last id.
local b, t, a = 0, 0, 0
local fb, ft, fa, ff, fr, legacy_id
local raw = redis.pcall('GET', key)
local fields -- a hash's fields b, t, a (when the entry is one)
local rest = ''
local shaped = false -- a string entry: a ladder, a floor, or both
if type(raw) == 'string' then
  fb, ft, fa, rest = match(raw, '^(%d+),(%-?%d+),(%d+)(.*)$')
  if not fb then rest = raw end
  if rest and sub(rest, 1, 1) == '@' then
    ff, rest = match(rest, '^@(%-?%d+)(.*)$')
  end
  shaped = (fb ~= nil or ff ~= nil) and rest ~= nil and (ff == nil or #ff <= 19)
elseif raw then
  -- Not a string: a hash of an earlier version, or not ours.
  local kind = redis.call('TYPE', key)['ok']
  if kind ~= 'hash' then
    return {-1, 'a ' .. kind .. ', not a keyed-backoff entry'}
  end
  fields = redis.call('HMGET', key, 'b', 't', 'a', 'r', 'o')
  if fields[1] and fields[2] and fields[3] then
    fb, ft, fa = match(fields[1] .. ',' .. fields[2] .. ',' .. fields[3], '^(%d+),(%-?%d+),(%d+)$')
  end
  fr, legacy_id = fields[4] or nil, fields[5] or nil
end
if fb then b, t, a = tonumber(fb), tonumber(ft), tonumber(fa) end
if fields then shaped = fb ~= nil end
if raw and (not shaped or (fb and (#fb > 16 or b > MASK or #ft > 19 or #fa > 4 or a > MAX_ATTEMPTS
    or (t - now) * unit > expire_after_ns)) or (rest ~= '' and sub(rest, 1, 1) ~= ';')) then
  -- Not ours: say which field, and how, with its value quoted and cut short.
  local function shown(v)
    if not v then return 'missing' end
    if #v > 24 then v = sub(v, 1, 24) .. '...' end
    return format('%q', v)
  end
  local pb, pt, pa, prest
  local function bad_shape()
    return {-1, 'the value ' .. shown(raw)
      .. ' is not "backoff,last update,attempts[@floor][;records]" or "@floor[;records]"'}
  end
  if fields then
    pb, pt, pa, prest = fields[1], fields[2], fields[3], ''
  elseif sub(raw, 1, 1) == '@' then
    prest = raw -- a floor alone
  else
    pb, pt, pa, prest = match(raw, '^([^,;@]*),([^,;@]*),([^,;@]*)(.*)$')
    if not pb then return bad_shape() end
  end
  local pf
  if sub(prest, 1, 1) == '@' then pf, prest = match(prest, '^@([^;]*)(.*)$') end
  if prest ~= '' and sub(prest, 1, 1) ~= ';' then return bad_shape() end
  if fields or pb then
    if not pb or not match(pb, '^%d+$') or #pb > 16 or tonumber(pb) > MASK then
      return {-1, 'the backoff (ns) is ' .. shown(pb) .. ', not an integer in [0, 2^52)'}
    end
    if not pt or not match(pt, '^%-?%d+$') or #pt > 19 then
      return {-1, 'the last update is ' .. shown(pt) .. ', not an integer of at most 19 digits'}
    end
    if not pa or not match(pa, '^%d+$') or #pa > 4 or tonumber(pa) > MAX_ATTEMPTS then
      return {-1, 'the attempt count is ' .. shown(pa) .. ', not an integer in [0, 4095]'}
    end
  end
  if pf and (not match(pf, '^%-?%d+$') or #pf > 19) then
    return {-1, 'the floor is ' .. shown(pf) .. ', not an integer of at most 19 digits'}
  end
  return {-1, 'the last update is ' .. shown(pt) .. ', more than the expiry window in the future'}
end
if rest ~= '' then fr = sub(rest, 2) end
local present = fb ~= nil
local floor = ff and tonumber(ff)

local recent = {}
if fr then
  -- Each record ends at a ";" (one is added after the last), so an empty
  -- record is seen as one.
  for record in string.gmatch(fr .. ';', '([^;]*);') do
    local id, flag, value, attempts = match(record, '^(%d+),([01]),(%d+),?(%d*)$')
    -- An id is a u64 (at most 20 digits); a backoff or a wait is below
    -- 2^52; attempts are at most 4095, and only an advance has them.
    if id == nil or #recent >= RECENT or #id > 20 or #value > 16 or tonumber(value) > MASK
        or (flag == '1') ~= (attempts ~= '') or #attempts > 4
        or (attempts ~= '' and tonumber(attempts) > MAX_ATTEMPTS) then
      if #fr > 24 then fr = sub(fr, 1, 24) .. '...' end
      return {-1, 'the records of recent operations are ' .. format('%q', fr)
        .. ', not up to 4 "id,flag,value[,attempts]" within range'}
    end
    recent[#recent + 1] = {id = id, flag = flag, value = value, attempts = attempts}
  end
end

-- Made only where a floor is, or may be written: held(at), the wait (ns,
-- > 0) the floor leaves at `at`, or nil; floor_part(), what a write keeps
-- of it: all of it, passed or not, as the in-process manager keeps a floor
-- until its GC (an event before the floor's end is still held by it);
-- ttl(), a write's time to live (ms): the entry's, or the floor's if
-- longer; kept, the records as they were.
local held, floor_part, ttl, kept
if floor ~= nil or op == 'hold' or op == 'resume' or op == 'gc_key' then
  held = function(at)
    if floor == nil then return nil end
    local wait = (floor - at) * unit
    if wait > 0 then return wait end
    return nil
  end
  floor_part = function()
    if floor ~= nil then return '@' .. ff end
    return ''
  end
  ttl = function()
    local px = tonumber(ARGV[8])
    if floor ~= nil and floor > now then
      px = math.max(px, math.ceil((floor - now) * unit / 1000000))
    end
    return px
  end
  kept = ''
  if fr then kept = ';' .. fr end
end

if op == 'reset' then
  -- Both go; the answer is whether there was a ladder, as in process.
  local deleted = redis.call('DEL', key)
  if present then return deleted end
  return 0
end
if op == 'gc_key' then
  if present and (now - t) * unit > expire_after_ns then
    if held(now) == nil then return redis.call('DEL', key) end
    -- The ladder is stale, the floor is not: the floor stays.
    redis.call('SET', key, floor_part() .. kept, 'KEEPTTL')
    return 1
  end
  return 0
end
if op == 'get' then return b end
if op == 'attempts' then return a end
if op == 'hold' then
  local upto = now + math.ceil(tonumber(ARGV[10]) / unit)
  -- A floor that ends now holds nothing; one that ends sooner changes nothing.
  if upto <= now or (floor ~= nil and floor >= upto) then return 1 end
  floor, ff = upto, format('%d', upto)
  local ladder = ''
  if present then ladder = fb .. ',' .. ft .. ',' .. fa end
  redis.call('SET', key, ladder .. floor_part() .. kept, 'PX', ttl())
  return 1
end
if op == 'level' or op == 'resume' then
  if present and (now - t) * unit <= expire_after_ns then
    if op == 'level' then return {1, b, a} end
    return 0
  end
  if op == 'level' then return 0 end
  -- Resumed: its backoff just over now, so its next failure climbs from it.
  local rb = math.min(tonumber(ARGV[10]), MASK)
  local ra = math.min(math.max(tonumber(ARGV[11]), 1), MAX_ATTEMPTS)
  local entry = format('%d,%d,%d', rb, now - math.ceil(rb / unit), ra)
  redis.call('SET', key, entry .. floor_part() .. kept, 'PX', ttl())
  return 1
end

-- As of the event: whether the entry is live (within the expiry window of
-- its last update), and the wait it has left (ns, > 0) or nil.
local live = present and (event - t) * unit <= expire_after_ns
local left = nil
if live then
  left = b - (event - t) * unit
  if left <= 0 then left = nil end
end
-- Every check before a run honours the floor: the longer of the two waits.
if floor ~= nil and op ~= 'next' and op ~= 'since' then
  local h = held(event)
  if h ~= nil and (left == nil or h > left) then left = h end
end

if op == 'remaining' or op == 'standing' then
  local wait = 0
  if left ~= nil then wait = math.ceil(left) end
  if op == 'remaining' then return wait end
  if live then return {2, 1, b, a, wait} end
  return {2, 0, 0, 0, wait}
end
if op == 'since_update' then
  if left ~= nil then return 1 end
  return 0
end
if op == 'since' then
  if (live and age_ns < b) or (floor ~= nil and held(now) ~= nil) then return 1 end
  return 0
end
if op ~= 'try_next' and op ~= 'next' then
  return redis.error_reply('keyed-backoff: unknown op ' .. op)
end

-- next and try_next. A retried operation id gets the answer it got first.
if op_id ~= '' then
  for _, r in ipairs(recent) do
    if r.id == op_id then
      if r.flag == '1' then return {1, tonumber(r.value), tonumber(r.attempts)} end
      return {0, tonumber(r.value)}
    end
  end
  if legacy_id == op_id then return {1, b, a} end
end

-- The records after `record` (made by this call, or nil), newest first, the
-- oldest dropped: "" or ";record;record...". Made only when there are any.
local records = nil
if op_id ~= '' or #recent > 0 then
  records = function(record)
    local kept = {}
    if record ~= nil then kept[1] = record end
    for i = 1, #recent do
      if #kept >= RECENT then break end
      local r = recent[i]
      local s = r.id .. ',' .. r.flag .. ',' .. r.value
      if r.flag == '1' then s = s .. ',' .. r.attempts end
      kept[#kept + 1] = s
    end
    if #kept == 0 then return '' end
    return ';' .. table.concat(kept, ';')
  end
end

if op == 'try_next' and left ~= nil then
  left = math.ceil(left)
  if op_id ~= '' then
    -- Remembered without touching the backoff or the time to live.
    local ladder = ''
    if present then ladder = fb .. ',' .. ft .. ',' .. fa end
    -- The floor as it was (it may have passed at now, not at the event).
    if ff ~= nil then ladder = ladder .. '@' .. ff end
    redis.call('SET', key, ladder .. records(format('%s,0,%d', op_id, left)), 'KEEPTTL')
  end
  return {0, left}
end

-- client-go's jitter: the draw times the jitter times the previous backoff,
-- truncated toward zero.
local scaled = ARGV[6]
if scaled ~= '0' then scaled = tonumber(scaled) else scaled = nil end
if live then
  local grown = 2 * b
  if scaled then grown = grown + math.floor(scaled * b) end
  b = math.min(grown, tonumber(ARGV[5]))
  a = math.min(a + 1, MAX_ATTEMPTS)
else
  local initial = tonumber(ARGV[4])
  b = initial
  if scaled then b = b + math.floor(scaled * initial) end
  a = 1
end
b = math.min(b, MASK)
-- Integers are written with %d: tostring would print a large one in
-- exponent form.
local entry = format('%d,%d,%d', b, now, a)
if floor ~= nil then entry = entry .. floor_part() end
if op_id ~= '' then
  entry = entry .. records(format('%s,1,%d,%d', op_id, b, a))
elseif #recent > 0 then
  entry = entry .. records(nil)
end
if floor ~= nil then
  redis.call('SET', key, entry, 'PX', ttl())
else
  redis.call('SET', key, entry, 'PX', ARGV[8])
end
return {1, b, a}
