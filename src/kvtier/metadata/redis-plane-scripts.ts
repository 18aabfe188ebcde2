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

const COMMON = `
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

/**
 * KEYS: cap, usage, classes. ARGV: bucket prefix, last-use index prefix, ifAbsent (0/1), then member, value, score, capped (0/1) per record.
 * A record lives in the last-use index of its class (`<use prefix><class>`); a rewrite that changes the class moves its row and keeps the later last use.
 */
export const UPSERT_LUA = `${COMMON}
local cap, usage, classes = KEYS[1], KEYS[2], KEYS[3]
local prefix, usePrefix, ifAbsent = ARGV[1], ARGV[2], ARGV[3]
local anyCapped = redis.call('ZCARD', cap) > 0
local known = {}
for i = 4, #ARGV, 4 do
  local member, value, score, capped = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local b, f = bucket(prefix, member)
  local old = redis.call('HGET', b, f)
  if not (old and ifAbsent == '1') then
    local size, _, cl, te, _, tail = parse(value)
    if old then
      local oldSize, created, oldCl, oldTe, _, oldTail = parse(old)
      if oldSize then
        account(oldSize, oldCl, oldTe, -1, oldTail)
        local a, _, rest = string.match(value, '^([^,]*),([^,]*),(.*)$')
        value = a .. ',' .. created .. ',' .. rest
        if oldCl ~= cl then
          local was = redis.call('ZSCORE', usePrefix .. oldCl, member)
          redis.call('ZREM', usePrefix .. oldCl, member)
          if was and tonumber(was) > tonumber(score) then score = was end
        end
      end
    end
    redis.call('HSET', b, f, toStored(prefix, value))
    account(size, cl, te, 1, tail)
    if not known[cl] then
      redis.call('SADD', classes, cl)
      known[cl] = true
    end
    redis.call('ZADD', usePrefix .. cl, 'GT', score, member)
    if capped == '1' then
      redis.call('ZADD', cap, 'GT', score, member)
      anyCapped = true
    elseif anyCapped then
      redis.call('ZREM', cap, member)
    end
  end
end
writeUsage(usage, classes)
return 1
`;

/**
 * KEYS: cap, usage, classes. ARGV: bucket prefix, last-use index prefix, journal set ('' = none), then member, bound per record.
 * bound '' removes unconditionally; otherwise the record goes only while its last-use score is < bound
 * (the remover judged it at a last use < bound: a renewal or rewrite since moved it to ≥ bound, and it stays).
 * Returns member, value, score for each removed record. The sorted-set work is one call per class per batch.
 * The journal's batches set gets one member per call: the removed members concatenated in reply order (CLEAR_PENDING_LUA).
 */
export const REMOVE_LUA = `${COMMON}
local cap, usage, classes = KEYS[1], KEYS[2], KEYS[3]
local prefix, usePrefix, journal = ARGV[1], ARGV[2], ARGV[3]
local out = {}
local byClass = {}
local cappedGone = {}
for i = 4, #ARGV, 2 do
  local member, bound = ARGV[i], ARGV[i + 1]
  local b, f = bucket(prefix, member)
  local old = redis.call('HGET', b, f)
  if old then
    local size, _, cl, te, ttl, tail = parse(old)
    local rows = byClass[cl or '']
    if not rows then rows = {}; byClass[cl or ''] = rows end
    rows[#rows + 1] = {member, bound, b, f, old, size, te, ttl, tail}
  end
end
for cl, rows in pairs(byClass) do
  local members = {}
  for j, row in ipairs(rows) do members[j] = row[1] end
  local scores = redis.call('ZMSCORE', usePrefix .. cl, unpack(members))
  local gone = {}
  for j, row in ipairs(rows) do
    local score = scores[j]
    if row[2] == '' or not score or tonumber(score) < tonumber(row[2]) then
      if row[6] then account(row[6], cl, row[7], -1, row[9]) end
      redis.call('HDEL', row[3], row[4])
      gone[#gone + 1] = row[1]
      if row[8] and row[8] ~= '0' then cappedGone[#cappedGone + 1] = row[1] end
      out[#out + 1] = row[1]
      out[#out + 1] = withWriter(prefix, row[5])
      out[#out + 1] = score or '0'
    end
  end
  if #gone > 0 then redis.call('ZREM', usePrefix .. cl, unpack(gone)) end
end
if journal ~= '' and #out > 0 then
  local removed = {}
  for i = 1, #out, 3 do removed[#removed + 1] = out[i] end
  redis.call('SADD', journal, table.concat(removed))
end
if #cappedGone > 0 then redis.call('ZREM', cap, unpack(cappedGone)) end
writeUsage(usage, classes)
return out
`;

/**
 * KEYS: cap, usage, classes. ARGV: bucket prefix, last-use index prefix, class, max score, limit, journal set ('' = none).
 * Removes the first `limit` rows of the class index with score ≤ max score (and their records).
 * Returns the number of rows taken, the removed members concatenated (16 bytes each), then the usage
 * deltas written (tag, bytes, blocks per tag; negative): GC tallies those instead of parsing records.
 * Per record this costs the bucket HGET + HDEL and the parse for the usage sums; the index rows go in one
 * ZREMRANGEBYRANK (the page is the index's first rows), the journal's batches set gets the batch as one member.
 */
export const REMOVE_OLDEST_LUA = `${COMMON}
local cap, usage, classes = KEYS[1], KEYS[2], KEYS[3]
local prefix, usePrefix, cl, maxs, limit, journal = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[6]
local z = usePrefix .. cl
local page = redis.call('ZRANGEBYSCORE', z, '-inf', maxs, 'LIMIT', 0, limit)
local n = #page
if n == 0 then return {0, ''} end
local removed, cappedGone = {}, {}
-- The hot loop: one pattern match per record instead of parse(), and the class's and the total's sums
-- kept in locals (every row of this index is of class cl; a record that says otherwise goes through account()).
local classBytes, classBlocks = 0, 0
for i = 1, n do
  local member = page[i]
  local b, f = bucket(prefix, member)
  local old = redis.call('HGET', b, f)
  if old then
    local sz, ttl, k, c, te = string.match(old, '^(%w+),%w*,(%w*),%w*,?(%w*)%z([^%z]*)%z([^%z]*)%z')
    local size = sz and tonumber(sz, 36)
    if size then
      if k == '1' then
        tails[1] = tails[1] - size
        tails[2] = tails[2] - 1
      end
      if c == cl then
        classBytes = classBytes + size
        classBlocks = classBlocks + 1
        local d = byTenant[te]
        if not d then d = {0, 0}; byTenant[te] = d end
        d[1] = d[1] - size
        d[2] = d[2] - 1
      else
        account(size, c, te, -1)
      end
    end
    redis.call('HDEL', b, f)
    if ttl and ttl ~= '0' then cappedGone[#cappedGone + 1] = member end
    removed[#removed + 1] = member
  end
end
if classBlocks > 0 then
  local d = byClass[cl]
  if not d then d = {0, 0}; byClass[cl] = d end
  d[1] = d[1] - classBytes
  d[2] = d[2] - classBlocks
  total[1] = total[1] - classBytes
  total[2] = total[2] - classBlocks
end
redis.call('ZREMRANGEBYRANK', z, 0, n - 1)
local keys = table.concat(removed)
if journal ~= '' and #removed > 0 then redis.call('SADD', journal, keys) end
if #cappedGone > 0 then inSlices('ZREM', cap, cappedGone) end
local reply = writeUsage(usage, classes)
table.insert(reply, 1, keys)
table.insert(reply, 1, n)
return reply
`;

/**
 * KEYS: journal batches set, journal keys set. ARGV: the keys to clear, concatenated (16 bytes each).
 * The batches set holds one member per removal call (its keys concatenated); GC clears exactly that
 * batch after its blobs went, which is one SREM. Any other grouping (a killed run's leftovers, listed
 * and cleared in chunks) first moves every batch into the keys set as single keys — once: later clears
 * find them there — and then removes its keys one by one, so no clear rescans the journal.
 */
export const CLEAR_PENDING_LUA = `
local batches, singles, blob = KEYS[1], KEYS[2], ARGV[1]
if redis.call('SREM', batches, blob) == 1 then return 1 end
local function split(m)
  local keys = {}
  for i = 1, #m, 16 do keys[#keys + 1] = string.sub(m, i, i + 15) end
  return keys
end
local function inSlices(command, key, items)
  for i = 1, #items, 1000 do redis.call(command, key, unpack(items, i, math.min(#items, i + 999))) end
end
if redis.call('EXISTS', batches) == 1 then
  for _, m in ipairs(redis.call('SMEMBERS', batches)) do inSlices('SADD', singles, split(m)) end
  redis.call('DEL', batches)
end
inSlices('SREM', singles, split(blob))
return 0
`;

/**
 * KEYS: bucket prefix, last-use index prefix (names, not keys read as such: declared so a Redis Cluster
 * client routes the call to the plane's slot). ARGV: members… Returns value (or false) and score (or false) per member.
 */
export const GET_LUA = `${COMMON}
local out = {}
local prefix, usePrefix = KEYS[1], KEYS[2]
for i = 1, #ARGV do
  local member = ARGV[i]
  local b, f = bucket(prefix, member)
  local value = redis.call('HGET', b, f)
  local score = false
  if value then
    local _, _, cl = parse(value)
    if cl then score = redis.call('ZSCORE', usePrefix .. cl, member) or false end
  end
  out[#out + 1] = value and withWriter(prefix, value) or false
  out[#out + 1] = score
end
return out
`;

/**
 * KEYS: cap, classes. ARGV: last-use index prefix, then score, member pairs.
 * A renewal does not know the block's class: ZADD XX GT on every class index
 * moves the row where the member is and is a no-op elsewhere (classes are few).
 */
export const RENEW_LUA = `
local cap, classes, usePrefix = KEYS[1], KEYS[2], ARGV[1]
local pairs_ = {unpack(ARGV, 2)}
if #pairs_ == 0 then return 0 end
for _, cl in ipairs(redis.call('SMEMBERS', classes)) do
  redis.call('ZADD', usePrefix .. cl, 'XX', 'GT', unpack(pairs_))
end
if redis.call('ZCARD', cap) > 0 then redis.call('ZADD', cap, 'XX', 'GT', unpack(pairs_)) end
return 1
`;

/**
 * KEYS: a zset. ARGV: cursor score ('' = from the start), cursor member, max score, limit, bucket prefix.
 * Returns more (0/1), then member, score, record value (or false) triples after
 * (cursor score, cursor member) in zset order. A cursor member still at its
 * score continues by rank; one deleted or moved meanwhile continues after its
 * (score, member) position.
 */
export const SCAN_LUA = `${COMMON}
local z, cs, cm, maxs, limit, prefix = KEYS[1], ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
local out = {0}
local function take(page, skipTies)
  for i = 1, #page, 2 do
    local s = tonumber(page[i + 1])
    if s > tonumber(maxs) then return true end
    if not skipTies or s > tonumber(cs) or page[i] > cm then
      local b, f = bucket(prefix, page[i])
      out[#out + 1] = page[i]
      out[#out + 1] = page[i + 1]
      local value = redis.call('HGET', b, f)
      out[#out + 1] = value and withWriter(prefix, value) or false
    end
  end
  return false
end
if cs == '' then
  local page = redis.call('ZRANGEBYSCORE', z, '-inf', maxs, 'WITHSCORES', 'LIMIT', 0, limit)
  take(page, false)
  if #page == 2 * limit then out[1] = 1 end
  return out
end
local s = redis.call('ZSCORE', z, cm)
if s and tonumber(s) == tonumber(cs) then
  local r = redis.call('ZRANK', z, cm)
  local page = redis.call('ZRANGE', z, r + 1, r + limit, 'WITHSCORES')
  local past = take(page, false)
  if not past and #page == 2 * limit then out[1] = 1 end
  return out
end
local offset = 0
while true do
  local page = redis.call('ZRANGEBYSCORE', z, cs, maxs, 'WITHSCORES', 'LIMIT', offset, limit)
  take(page, true)
  if #page < 2 * limit then return out end
  if #out > 1 then out[1] = 1; return out end
  offset = offset + limit
end
`;

/** KEYS: orphan hash. ARGV: at, members… Returns the first sighting per member. */
export const NOTE_ORPHANS_LUA = `
local out = {}
for i = 2, #ARGV do
  local seen = redis.call('HGET', KEYS[1], ARGV[i])
  if not seen or tonumber(seen) > tonumber(ARGV[1]) then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[1])
    seen = ARGV[1]
  end
  out[#out + 1] = seen
end
return out
`;

/** KEYS: generation key. ARGV: generation. Sets trusted only if that generation is still current. */
export const MARK_TRUSTED_LUA = `
if redis.call('GET', KEYS[1]) == ARGV[1] .. ':0' then
  redis.call('SET', KEYS[1], ARGV[1] .. ':1')
  return 1
end
if redis.call('GET', KEYS[1]) == ARGV[1] .. ':1' then return 1 end
return 0
`;
