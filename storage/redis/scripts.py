"""The Lua scripts of the snapshot store (see :mod:`storage.redis.cache` for what they guarantee).

Each script touches the keys of one note only (one hash-tag slot), so it is legal in Redis Cluster;
except ``INDEX_MANY_LUA``, which only a single Redis is given. A write or deletion of a note's
snapshots also ``SPUBLISH``-es on the note's shard channel (``<prefix>:changed:{id}``, the same slot),
so whoever watches the note hears of it (:mod:`storage.redis.changes`).
"""

__all__ = [
    "BUMP_LUA", "DELETE_LUA", "DIRTY_ADD_LUA", "DIRTY_DONE_LUA", "DIRTY_LEASE_LUA", "DIRTY_TAKE_LUA",
    "INDEX_LUA", "INDEX_MANY_LUA", "STAMP_LUA", "WRITE_LUA",
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


# The dirty set's shard scripts: KEYS[1..3] the urgent, near and wide lanes, KEYS[4] the shard's leases
# (one hash tag), so an id is in at most one lane and moves between them atomically
# (storage/redis/queue.py). A lease is a hash field id -> "<expires ms> <score taken>" (Redis's clock):
# the id is in a drain's hands until then, and the score says which take it belongs to, so the lease
# of a later take (of a later edit's score) is never let go by an earlier one.
# An add (ARGV[2]: the lane's index) gives an id already there a score above the one it holds (at
# least one more): every add changes the score, so ``done`` (below) never mistakes an add for none,
# even one made with the same clock reading as the add a drain took. An id stays in the more urgent of
# its lane and the add's; one moved to a more urgent lane loses its lease: a new edit's close foci are
# not kept waiting for a hub's wide batch that holds them.
DIRTY_ADD_LUA = """
local new = 0
local now, want = tonumber(ARGV[1]), tonumber(ARGV[2])
for i = 3, #ARGV do
  local id = ARGV[i]
  local at, held = nil, nil
  for k = 1, 3 do
    local found = redis.call('ZSCORE', KEYS[k], id)
    if found then at, held = k, tonumber(found) end
  end
  local score = now
  if not at then
    new = new + 1
  elseif held >= now then
    score = held + 1
  end
  local lane = math.min(at or want, want)
  redis.call('ZADD', KEYS[lane], string.format('%.17g', score), id)
  if at and lane < at then redis.call('ZREM', KEYS[at], id); redis.call('HDEL', KEYS[4], id) end
end
return new
"""

# Take up to ARGV[2] ids scored at most ARGV[1] from the lanes whose indexes ARGV[3] lists (digits, in
# the order to read them), skipping ids under a live lease, and lease them for ARGV[4] ms (0: no
# lease). One page per lane suffices: at most HLEN(leases) of the lane's oldest ids are skipped. A dead
# lease met on the way is deleted.
DIRTY_TAKE_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit, lease = tonumber(ARGV[2]), tonumber(ARGV[4])
local page = limit + redis.call('HLEN', KEYS[4])
local rows = {}
local function free(id)
  local held = redis.call('HGET', KEYS[4], id)
  if not held then return true end
  if tonumber(string.match(held, '^%S+')) > now then return false end
  redis.call('HDEL', KEYS[4], id)
  return true
end
local function fill(lane)
  if #rows >= 2 * limit then return end
  local found = redis.call('ZRANGEBYSCORE', lane, '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, page)
  for i = 1, #found, 2 do
    if #rows >= 2 * limit then return end
    if free(found[i]) then rows[#rows + 1] = found[i]; rows[#rows + 1] = found[i + 1] end
  end
end
for k in string.gmatch(ARGV[3], '%d') do fill(KEYS[tonumber(k)]) end
if lease > 0 then
  for i = 1, #rows, 2 do
    redis.call('HSET', KEYS[4], rows[i], string.format('%d', now + lease) .. ' ' .. rows[i + 1])
  end
end
return rows
"""

# Remove dirty members only if their score is still the one the drain read: a note dirtied again
# while it was being rebuilt has another score (every add changes it) and stays in the set. Either way
# the lease taken with that score is let go.
DIRTY_DONE_LUA = """
local removed = 0
for i = 1, #ARGV, 2 do
  local held = redis.call('HGET', KEYS[4], ARGV[i])
  if held and tonumber(string.match(held, '%S+$')) == tonumber(ARGV[i + 1]) then
    redis.call('HDEL', KEYS[4], ARGV[i])
  end
  for k = 1, 3 do
    local score = redis.call('ZSCORE', KEYS[k], ARGV[i])
    if score and tonumber(score) == tonumber(ARGV[i + 1]) then
      removed = removed + redis.call('ZREM', KEYS[k], ARGV[i])
    end
  end
end
return removed
"""

# Renew (ARGV[1] > 0: for ARGV[1] ms from now) or let go (ARGV[1] = 0) the leases taken with the given
# (id, score) pairs (ARGV[2..]); how many there were.
DIRTY_LEASE_LUA = """
local t = redis.call('TIME')
local expires = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
local count = 0
for i = 2, #ARGV, 2 do
  local held = redis.call('HGET', KEYS[4], ARGV[i])
  local score = held and string.match(held, '%S+$')
  if score and tonumber(score) == tonumber(ARGV[i + 1]) then
    count = count + 1
    if ARGV[1] == '0' then
      redis.call('HDEL', KEYS[4], ARGV[i])
    else
      redis.call('HSET', KEYS[4], ARGV[i], string.format('%d', expires) .. ' ' .. score)
    end
  end
end
return count
"""
