"""The Lua scripts of the snapshot store (see :mod:`storage.redis.cache` for what they guarantee).

Each script touches the keys of one note only (one hash-tag slot), so it is legal in Redis Cluster;
except ``INDEX_MANY_LUA``, which only a single Redis is given. A write or deletion of a note's
snapshots also ``SPUBLISH``-es on the note's shard channel (``<prefix>:changed:{id}``, the same slot),
so whoever watches the note hears of it (:mod:`storage.redis.changes`).
"""

__all__ = [
    "BUMP_LUA", "DELETE_LUA", "DIRTY_ADD_LUA", "DIRTY_DONE_LUA", "DIRTY_TAKE_LUA", "INDEX_LUA",
    "INDEX_MANY_LUA", "STAMP_LUA", "WRITE_LUA",
]

# Facts (note ids, or wiki facts like note:5) travel space-separated and stay strings inside Lua (no
# float rounding of ids).
WRITE_LUA = """
local raw = redis.call('GET', KEYS[2]) or '0'
local accepted = tonumber(ARGV[2]) >= (tonumber(raw) or 0)
local function add(set, ids) for id in string.gmatch(ids, '%S+') do set[id] = true end end
local candidates = {}
local fields = redis.call('HGETALL', KEYS[3])
for i = 1, #fields, 2 do
  add(candidates, fields[i + 1])
  if not (accepted and fields[i] == KEYS[1]) and redis.call('EXISTS', fields[i]) == 0 then
    redis.call('HDEL', KEYS[3], fields[i])
  end
end
add(candidates, ARGV[5])
if accepted then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
  redis.call('HSET', KEYS[3], KEYS[1], ARGV[5])
  redis.call('PEXPIRE', KEYS[3], ARGV[4])
  if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('PEXPIRE', KEYS[2], ARGV[4]) end
  redis.call('SPUBLISH', ARGV[6], KEYS[1])
end
local shown = {}
for _, ids in ipairs(redis.call('HVALS', KEYS[3])) do add(shown, ids) end
local out = {accepted and 1 or 0, raw}
for id in pairs(candidates) do if not shown[id] then out[#out + 1] = id end end
return out
"""

DELETE_LUA = """
local raw = redis.call('GET', KEYS[1]) or '0'
local generation = tonumber(ARGV[1])
if generation >= 0 and generation < (tonumber(raw) or 0) then return {0, raw} end
local out, seen = {1, raw}, {}
local fields = redis.call('HGETALL', KEYS[2])
for i = 1, #fields, 2 do
  redis.call('DEL', fields[i])
  for id in string.gmatch(fields[i + 1], '%S+') do
    if not seen[id] then seen[id] = true; out[#out + 1] = id end
  end
end
for i = 3, #KEYS do redis.call('DEL', KEYS[i]) end
redis.call('DEL', KEYS[2])
redis.call('SPUBLISH', ARGV[2], 'deleted')
return out
"""

# One reverse-index entry set: add the foci and refresh the TTL (one command instead of two).
INDEX_LUA = """
redis.call('SADD', KEYS[1], unpack(ARGV, 2))
return redis.call('PEXPIRE', KEYS[1], ARGV[1])
"""

# Many reverse-index entry sets in one command, for a single Redis only (its keys span slots, which a
# cluster refuses): KEYS[i] gets the space-separated foci of ARGV[i + 1] and an expiry of ARGV[1] ms.
INDEX_MANY_LUA = """
for i = 1, #KEYS do
  local members = {}
  for id in string.gmatch(ARGV[i + 1], '%S+') do
    members[#members + 1] = id
    -- at most 1000 members per SADD: unpack's stack limit
    if #members == 1000 then redis.call('SADD', KEYS[i], unpack(members)); members = {} end
  end
  if #members > 0 then redis.call('SADD', KEYS[i], unpack(members)) end
  redis.call('PEXPIRE', KEYS[i], ARGV[1])
end
return #KEYS
"""

# A hybrid logical clock: max(previous + 1, Redis TIME in µs), kept for ARGV[1] ms (0: no expiry,
# the edit sequence), so a lost key starts again above every value it handed out.
BUMP_LUA = """
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local next_gen = math.max((tonumber(redis.call('GET', KEYS[1]) or '0') or 0) + 1, now_us)
local value = string.format('%.0f', next_gen)
if ARGV[1] == '0' then
  redis.call('SET', KEYS[1], value)
else
  redis.call('SET', KEYS[1], value, 'PX', ARGV[1])
end
return value
"""

STAMP_LUA = """
if tonumber(ARGV[1]) > (tonumber(redis.call('GET', KEYS[1]) or '0') or 0) then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return 1
"""


# The dirty set's shard scripts: KEYS[1] the urgent lane, KEYS[2] the wide lane (one hash tag), so an
# id is in at most one lane and moves between them atomically (storage/redis/queue.py).
# An add gives an id already there a score above the one it holds (at least one more): every add
# changes the score, so ``done`` (below) never mistakes an add for none, even one made with the same
# clock reading as the add a drain took.
DIRTY_ADD_LUA = """
local new = 0
local now = tonumber(ARGV[1])
for i = 3, #ARGV do
  local id = ARGV[i]
  local urgent = redis.call('ZSCORE', KEYS[1], id)
  local wide = redis.call('ZSCORE', KEYS[2], id)
  local score = now
  if not urgent and not wide then
    new = new + 1
  else
    local held = tonumber(urgent or wide)
    if held >= now then score = held + 1 end
  end
  score = string.format('%.17g', score)
  if ARGV[2] == '1' or urgent then
    redis.call('ZADD', KEYS[1], score, id)
    if wide then redis.call('ZREM', KEYS[2], id) end
  else
    redis.call('ZADD', KEYS[2], score, id)
  end
end
return new
"""

DIRTY_TAKE_LUA = """
local rows = {}
if ARGV[3] ~= '2' then
  rows = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, ARGV[2])
end
local left = tonumber(ARGV[2]) - #rows / 2
if left > 0 and ARGV[3] ~= '1' then
  local wide = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, left)
  for i = 1, #wide do rows[#rows + 1] = wide[i] end
end
return rows
"""

# Remove dirty members only if their score is still the one the drain read: a note dirtied again
# while it was being rebuilt has another score (every add changes it) and stays in the set.
DIRTY_DONE_LUA = """
local removed = 0
for i = 1, #ARGV, 2 do
  for k = 1, 2 do
    local score = redis.call('ZSCORE', KEYS[k], ARGV[i])
    if score and tonumber(score) == tonumber(ARGV[i + 1]) then
      removed = removed + redis.call('ZREM', KEYS[k], ARGV[i])
    end
  end
end
return removed
"""
