/**
 * The scripts that read the plane or mark it: get, renew (touch last use),
 * scan, orphan sightings and the trusted mark.
 */
import { COMMON } from './redis-plane-lua-common.ts';

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
