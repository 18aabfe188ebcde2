/**
 * The scripts that write the plane: upsert, remove (one batch, or the oldest
 * per cap) and clearing the pending-delete journal. Each moves a record, its
 * last-use row and the usage counters together (redis-plane-lua-common.ts).
 */
import { COMMON } from './redis-plane-lua-common.ts';

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
