/**
 * Lua run inside Redis so each multi-key change of the plane is atomic (a
 * record, its LRU row and the usage counters move together) and one round
 * trip per batch. Every key a script reads or writes carries the plane's
 * hash tag (redis-metadata-plane.ts), so each script touches one Redis
 * Cluster slot even where it derives keys (bucket, class index) itself. Members are the 16 raw key bytes; a record lives in the
 * hash bucket `<prefix>r:<hex of its first two bytes>` (65536 small hashes
 * stay listpack-encoded: ~45 B per record instead of ~100 B as its own key).
 *
 * Record value: `size,created s,ttl,depth[,kind]` (base 36; created in whole seconds; kind 1 = a unit
 * tail, absent on blocks) NUL class NUL tenant NUL writer. Usage counts tails under k:tail too.
 */

export const COMMON = `
-- prefix is '<p>r:<bits>:'; the bucket is the key's first <bits> bits (≤ 16),
-- and the field drops the whole bytes the bucket name already holds.
local bitsOf = {}
local function bucket(prefix, member)
  local bits = bitsOf[prefix]
  if not bits then
    bits = tonumber(string.match(prefix, ':(%d+):$'))
    bitsOf[prefix] = bits
  end
  local hi, lo = string.byte(member, 1, 2)
  return prefix .. string.format('%x', math.floor((hi * 256 + lo) / 2 ^ (16 - bits))), string.sub(member, math.floor(bits / 8) + 1)
end
-- Plain finds, not a pattern: this runs once per record in every upsert and remove.
local function parse(v)
  local c1 = string.find(v, ',', 1, true)
  local c2 = c1 and string.find(v, ',', c1 + 1, true)
  local z1 = c2 and string.find(v, '\\0', c2 + 1, true)
  local z2 = z1 and string.find(v, '\\0', z1 + 1, true)
  local z3 = z2 and string.find(v, '\\0', z2 + 1, true)
  if not z3 then return nil end
  local c3 = string.find(v, ',', c2 + 1, true)
  -- A fifth number (after depth, before the first NUL) is the kind: 1 = unit tail.
  local c4 = c3 and string.find(v, ',', c3 + 1, true)
  local tail = c4 ~= nil and c4 < z1 and string.sub(v, c4 + 1, z1 - 1) == '1'
  return tonumber(string.sub(v, 1, c1 - 1), 36), string.sub(v, c1 + 1, c2 - 1), string.sub(v, z1 + 1, z2 - 1), string.sub(v, z2 + 1, z3 - 1), c3 and string.sub(v, c2 + 1, c3 - 1) or '0', tail
end
-- Writer names are stored as short ids (a node id repeats over millions of records): '<p>{0}:w'
-- holds 'n<name>' -> id, 'i<id>' -> name and the id counter '#'. Clients see names only.
local writersKey
local idOf, nameOf = {}, {}
local function writers(prefix)
  if not writersKey then writersKey = string.match(prefix, '^(.*)r:%d+:$') .. 'w' end
  return writersKey
end
local function thirdNul(v)
  local z = string.find(v, '\0', 1, true)
  z = z and string.find(v, '\0', z + 1, true)
  return z and string.find(v, '\0', z + 1, true)
end
-- A value with its writer swapped through the writer table: name -> id on the way in ('n', an id is
-- made on first sight), id -> name on the way out ('i', '' if unknown). cache memoises per script call.
local function swapWriter(prefix, v, cache, tag, create)
  local z3 = thirdNul(v)
  if not z3 then return v end
  local from = string.sub(v, z3 + 1)
  local to = cache[from]
  if not to then
    local k = writers(prefix)
    to = redis.call('HGET', k, tag .. from)
    if not to then
      if create then
        to = string.format('%x', redis.call('HINCRBY', k, '#', 1))
        redis.call('HSET', k, 'n' .. from, to, 'i' .. to, from)
      else
        to = ''
      end
    end
    cache[from] = to
  end
  return string.sub(v, 1, z3) .. to
end
-- The client's value with its writer name replaced by the writer's id.
local function toStored(prefix, v) return swapWriter(prefix, v, idOf, 'n', true) end
-- A stored value as clients read it: the writer id replaced by its name.
local function withWriter(prefix, v) return swapWriter(prefix, v, nameOf, 'i', false) end
-- Usage deltas are summed per call, per class and per tenant (no string built per record), and written once per tag.
local byClass, byTenant, total, tails = {}, {}, {0, 0}, {0, 0}
local function add(t, name, size, sign)
  local d = t[name]
  if not d then d = {0, 0}; t[name] = d end
  d[1] = d[1] + sign * size
  d[2] = d[2] + sign
end
local function account(size, cl, te, sign, tail)
  add(byClass, cl, size, sign)
  add(byTenant, te, size, sign)
  total[1] = total[1] + sign * size
  total[2] = total[2] + sign
  if tail then
    tails[1] = tails[1] + sign * size
    tails[2] = tails[2] + sign
  end
end
-- A class whose last record went leaves the class set (renewals then skip its empty index).
-- Returns the deltas written, flat: tag, bytes, blocks per tag (a removal's reply: GC tallies them, no per-record parsing).
local function writeUsage(usage, classes)
  local deltas = {g = total, ['k:tail'] = tails}
  for name, d in pairs(byClass) do deltas['c:' .. name] = d end
  for name, d in pairs(byTenant) do deltas['t:' .. name] = d end
  local flat = {}
  for tag, d in pairs(deltas) do
    if d[1] ~= 0 then redis.call('HINCRBY', usage, 'b|' .. tag, d[1]) end
    if d[2] ~= 0 then
      local n = redis.call('HINCRBY', usage, 'n|' .. tag, d[2])
      if n <= 0 and string.sub(tag, 1, 2) == 'c:' then redis.call('SREM', classes, string.sub(tag, 3)) end
    end
    if d[1] ~= 0 or d[2] ~= 0 then
      flat[#flat + 1] = tag
      flat[#flat + 1] = d[1]
      flat[#flat + 1] = d[2]
    end
  end
  return flat
end
-- Calls a variadic command over many arguments in slices (Lua's unpack has a stack limit).
local function inSlices(command, key, items)
  for i = 1, #items, 1000 do redis.call(command, key, unpack(items, i, math.min(#items, i + 999))) end
end
`;
