import { loadAddon, type NativeAddon } from '../../native/index.ts';
import { KvTierError } from './errors.ts';
import { bytesToHex } from './hex.ts';
import { loadXxhash, type RawXxh64, type XxhashRuntime } from './xxhash-runtime.ts';

/** Version of the block file format; part of every namespace, so a format change never hits old blocks. */
export const BLOCK_FORMAT_VERSION = 1;
export const DEFAULT_BLOCK_TOKENS = 64;
export const KEY_BYTES = 16;
/** "KVTU" read as u32 LE: the first word of a unit key's input (unitKeyBytes). */
const UNIT_MAGIC = 0x5554564b;
const UNIT_PREFIX = 4;

/** Seeds of the two xxh64 halves of the 128-bit key ("kvtier-1", "kvtier-2" as ASCII). */
const SEED_HI = 0x6b76746965722d31n;
const SEED_LO = 0x6b76746965722d32n;

/**
 * A 128-bit hash: xxh64(seed "kvtier-1") ‖ xxh64(seed "kvtier-2") of the
 * same input, each half big-endian, so the 32-hex key reads as the two
 * 64-bit values. 64 bits alone collide at internet scale.
 */
export type Hash128 = (input: Uint8Array, out: Uint8Array, outOffset: number) => void;

export interface NamespaceSpec {
  /** Hash of everything that changes the KV (architecture, dims, rope, weights, KV dtype). */
  modelFingerprint: string;
  /** Per-tenant salt; isolates tenants. Share one salt only as an explicit opt-in. */
  tenantSalt: string;
  /** Block format version; defaults to BLOCK_FORMAT_VERSION. */
  formatVersion?: number;
}

/**
 * The chained keys of every full block of one prompt.
 *
 * ```
 * ns    = H(len‖modelFingerprint ‖ len‖tenantSalt ‖ u32 formatVersion)
 * root  = H(ns)                                   (parent of block 0)
 * key_0 = H(root  ‖ tokens[0 .. B)   as u32 LE)
 * key_i = H(key_{i-1} ‖ tokens[iB .. (i+1)B) as u32 LE)
 * ```
 *
 * So key_i names the whole prefix tokens[0 .. (i+1)B) under one namespace.
 * `keys` holds blockCount × 16 bytes; block i's key is bytes [16i, 16i+16).
 */
export class PrefixChain {
  constructor(
    readonly rootKey: Uint8Array,
    readonly keys: Uint8Array,
    readonly blockCount: number,
    readonly blockTokens: number,
  ) {}

  private hexCache: string | undefined;

  /** Block i's key as raw bytes (a view, no copy). */
  keyBytes(i: number): Uint8Array {
    return this.keys.subarray(i * KEY_BYTES, i * KEY_BYTES + KEY_BYTES);
  }

  /** Block i's parent key: the root for block 0. */
  parentKeyBytes(i: number): Uint8Array {
    return i === 0 ? this.rootKey : this.keyBytes(i - 1);
  }

  /** Block i's key as 32 lowercase hex characters. */
  keyHex(i: number): string {
    // One native hex conversion for the whole chain, then slices: far
    // cheaper than 2048 small conversions.
    this.hexCache ??= bytesToHex(this.keys);
    return this.hexCache.slice(i * 2 * KEY_BYTES, (i + 1) * 2 * KEY_BYTES);
  }

  parentKeyHex(i: number): string {
    return i === 0 ? bytesToHex(this.rootKey) : this.keyHex(i - 1);
  }
}

export interface PrefixHasherOptions {
  blockTokens?: number;
  /**
   * Replace the 128-bit hash (tests inject a weak one to force collisions).
   * Keys made with another hash are not compatible with the default ones.
   */
  hash128?: Hash128;
}

/**
 * Namespace and chained block keys. Create once (`await PrefixHasher.create()`)
 * and share; methods are synchronous.
 */
export class PrefixHasher {
  readonly blockTokens: number;
  private readonly hash128: Hash128;
  private readonly raw: RawXxh64 | null;
  /** The native addon's chain (xxh64-napi.cc), when built and no hash is injected: the same keys as chainInWasm, in place. */
  private readonly nativeChain: NativeAddon['xxh64Chain'] | null;
  /** Which path `chain` takes: the addon's, wasm (addon not built, or KVTIER_PREFIX_HASH=wasm), or per block (an injected hash). */
  readonly chainKind: 'native' | 'wasm' | 'generic';

  private constructor(blockTokens: number, runtime: XxhashRuntime, hash128: Hash128 | undefined) {
    this.blockTokens = blockTokens;
    this.raw = hash128 === undefined ? runtime.raw : null;
    this.nativeChain = hash128 === undefined ? nativeChainOrNull() : null;
    this.chainKind = this.nativeChain !== null ? 'native' : this.raw !== null ? 'wasm' : 'generic';
    const { api } = runtime;
    this.hash128 =
      hash128 ??
      ((input, out, outOffset) => {
        const view = new DataView(out.buffer, out.byteOffset + outOffset, KEY_BYTES);
        view.setBigUint64(0, api.h64Raw(input, SEED_HI), false);
        view.setBigUint64(8, api.h64Raw(input, SEED_LO), false);
      });
  }

  static async create(options: PrefixHasherOptions = {}): Promise<PrefixHasher> {
    assertLittleEndian();
    const blockTokens = options.blockTokens ?? DEFAULT_BLOCK_TOKENS;
    if (!Number.isInteger(blockTokens) || blockTokens < 1 || blockTokens > 1 << 20) {
      throw new KvTierError('KVT_ERR_HASH_BAD_INPUT', `blockTokens must be an integer in 1..1048576, got ${blockTokens}; DeepSeek's unit is 64`);
    }
    return new PrefixHasher(blockTokens, await loadXxhash(), options.hash128);
  }

  /** ns = H(u32 len ‖ utf8 modelFingerprint ‖ u32 len ‖ utf8 tenantSalt ‖ u32 formatVersion), 16 bytes. */
  namespaceKeyBytes(spec: NamespaceSpec): Uint8Array {
    const { modelFingerprint, tenantSalt } = spec;
    const formatVersion = spec.formatVersion ?? BLOCK_FORMAT_VERSION;
    if (typeof modelFingerprint !== 'string' || modelFingerprint.length === 0) {
      throw new KvTierError('KVT_ERR_HASH_BAD_INPUT', 'modelFingerprint must be a non-empty string (the engine reports it)');
    }
    if (typeof tenantSalt !== 'string') {
      throw new KvTierError('KVT_ERR_HASH_BAD_INPUT', 'tenantSalt must be a string ("" only for an explicitly shared namespace)');
    }
    if (!Number.isInteger(formatVersion) || formatVersion < 0 || formatVersion > 0xffffffff) {
      throw new KvTierError('KVT_ERR_HASH_BAD_INPUT', `formatVersion must be a u32, got ${formatVersion}`);
    }
    const encoder = new TextEncoder();
    const fingerprint = encoder.encode(modelFingerprint);
    const salt = encoder.encode(tenantSalt);
    const input = new Uint8Array(12 + fingerprint.length + salt.length);
    const view = new DataView(input.buffer);
    view.setUint32(0, fingerprint.length, true);
    input.set(fingerprint, 4);
    view.setUint32(4 + fingerprint.length, salt.length, true);
    input.set(salt, 8 + fingerprint.length);
    view.setUint32(8 + fingerprint.length + salt.length, formatVersion, true);
    const out = new Uint8Array(KEY_BYTES);
    this.hash128(input, out, 0);
    return out;
  }

  /** The namespace key as 32 hex characters. */
  namespaceKey(spec: NamespaceSpec): string {
    return bytesToHex(this.namespaceKeyBytes(spec));
  }

  /**
   * Keys of the full blocks of `tokens` (at most `maxBlocks`) under the
   * namespace `nsKey` (16 bytes or 32 hex). The partial tail block gets no key.
   */
  chain(nsKey: Uint8Array | string, tokens: Uint32Array, maxBlocks = Infinity): PrefixChain {
    const ns = typeof nsKey === 'string' ? hexToKeyBytes(nsKey) : nsKey;
    if (ns.length !== KEY_BYTES) throw new KvTierError('KVT_ERR_HASH_BAD_INPUT', `namespace key must be ${KEY_BYTES} bytes, got ${ns.length}`);
    if (!(tokens instanceof Uint32Array)) {
      throw new KvTierError('KVT_ERR_HASH_BAD_INPUT', 'tokens must be a Uint32Array (token ids as u32)');
    }
    const blockCount = Math.min(Math.floor(tokens.length / this.blockTokens), maxBlocks);
    const rootKey = new Uint8Array(KEY_BYTES);
    this.hash128(ns, rootKey, 0);
    const keys = new Uint8Array(blockCount * KEY_BYTES);
    if (blockCount > 0) {
      if (this.nativeChain !== null) this.nativeChain(rootKey, tokens, this.blockTokens, blockCount, SEED_HI, SEED_LO, keys);
      else if (this.raw !== null) this.chainInWasm(this.raw, rootKey, tokens, blockCount, keys);
      else this.chainGeneric(rootKey, tokens, blockCount, keys);
    }
    return new PrefixChain(rootKey, keys, blockCount, this.blockTokens);
  }

  /**
   * Key of the unit (issue #26) at position p of `tokens`: a unit may end at
   * any token, not only on a block boundary, so it is keyed by the chain of
   * its full blocks plus the tokens after them:
   *
   * ```
   * n      = floor(p / B)                       (full blocks the unit needs)
   * parent = key_{n-1}   (the root for n = 0)
   * unit_p = H("KVTU" ‖ parent ‖ u32 p ‖ tokens[nB .. p) as u32 LE)
   * ```
   *
   * So unit_p names exactly tokens[0 .. p) under the namespace, as key_i
   * names a block's prefix. The leading "KVTU" and p keep a unit's key apart
   * from every block key (a block's input starts with its parent key and has
   * no length): a unit at p = nB is not block n-1, whose blob holds other bytes.
   * `chain` must hold at least n blocks of `tokens` (hashed under the same namespace).
   */
  unitKeyBytes(chain: PrefixChain, tokens: Uint32Array, p: number, out: Uint8Array = new Uint8Array(KEY_BYTES), scratch?: Uint8Array): Uint8Array {
    const B = this.blockTokens;
    const n = Math.floor(p / B);
    if (!Number.isInteger(p) || p < 1 || p > tokens.length || n > chain.blockCount) {
      throw new KvTierError('KVT_ERR_HASH_BAD_INPUT', `a unit at ${p} needs 1 ≤ p ≤ ${tokens.length} tokens and ${n} chained blocks (the chain holds ${chain.blockCount})`);
    }
    const r = p - n * B;
    const bytes = UNIT_PREFIX + KEY_BYTES + 4 + 4 * r;
    const input = scratch !== undefined && scratch.byteLength >= bytes ? scratch.subarray(0, bytes) : new Uint8Array(bytes);
    const view = new DataView(input.buffer, input.byteOffset, bytes);
    view.setUint32(0, UNIT_MAGIC, true);
    input.set(chain.parentKeyBytes(n), UNIT_PREFIX);
    view.setUint32(UNIT_PREFIX + KEY_BYTES, p, true);
    input.set(new Uint8Array(tokens.buffer, tokens.byteOffset + n * B * 4, r * 4), UNIT_PREFIX + KEY_BYTES + 4);
    this.hash128(input, out, 0);
    return out;
  }

  /**
   * All tokens go into wasm memory with one bulk copy, at offset 16:
   *
   * ```
   * mem: [ parent(16) | block 0 tokens (4B) | block 1 tokens | … ]
   *       ^ptr_0                  ^ptr_1 = 4B: the last 16 bytes of block 0
   * ```
   *
   * Block i's input (parent ‖ tokens) must be contiguous, so its parent key
   * is written over the 16 bytes just before its tokens — the tail of block
   * i-1, which has already been hashed. No per-block copy of the tokens.
   */
  private chainInWasm(raw: RawXxh64, rootKey: Uint8Array, tokens: Uint32Array, blockCount: number, keys: Uint8Array): void {
    const blockBytes = this.blockTokens * 4;
    const needed = KEY_BYTES + blockCount * blockBytes;
    if (raw.memory.buffer.byteLength < needed) {
      raw.memory.grow(Math.ceil((needed - raw.memory.buffer.byteLength) / 65536));
    }
    const memory = new Uint8Array(raw.memory.buffer);
    const memoryView = new DataView(raw.memory.buffer);
    memory.set(new Uint8Array(tokens.buffer, tokens.byteOffset, blockCount * this.blockTokens * 4), KEY_BYTES);
    memory.set(rootKey, 0);
    const keyView = new DataView(keys.buffer, keys.byteOffset, keys.byteLength);
    const inputBytes = KEY_BYTES + blockBytes;
    let hi = 0n;
    let lo = 0n;
    for (let i = 0; i < blockCount; i++) {
      const ptr = i * blockBytes;
      if (i > 0) {
        memoryView.setBigInt64(ptr, hi, false);
        memoryView.setBigInt64(ptr + 8, lo, false);
      }
      hi = raw.xxh64(ptr, inputBytes, SEED_HI);
      lo = raw.xxh64(ptr, inputBytes, SEED_LO);
      keyView.setBigInt64(i * KEY_BYTES, hi, false);
      keyView.setBigInt64(i * KEY_BYTES + 8, lo, false);
    }
  }

  /** Reference path (and the one used with an injected hash): same keys, one scratch buffer. */
  private chainGeneric(rootKey: Uint8Array, tokens: Uint32Array, blockCount: number, keys: Uint8Array): void {
    const blockBytes = this.blockTokens * 4;
    const tokenBytes = new Uint8Array(tokens.buffer, tokens.byteOffset, blockCount * blockBytes);
    const scratch = new Uint8Array(KEY_BYTES + blockBytes);
    for (let i = 0; i < blockCount; i++) {
      scratch.set(i === 0 ? rootKey : keys.subarray((i - 1) * KEY_BYTES, i * KEY_BYTES), 0);
      scratch.set(tokenBytes.subarray(i * blockBytes, (i + 1) * blockBytes), KEY_BYTES);
      this.hash128(scratch, keys, i * KEY_BYTES);
    }
  }
}

/**
 * The addon's chain, unless KVTIER_PREFIX_HASH=wasm or the addon is not built (or predates it): then the
 * wasm chain gives the same keys, ~2× slower (#29's replay hashes every block of every request).
 */
function nativeChainOrNull(): NativeAddon['xxh64Chain'] | null {
  if (process.env.KVTIER_PREFIX_HASH === 'wasm') return null;
  try {
    const addon = loadAddon();
    return typeof addon.xxh64Chain === 'function' ? addon.xxh64Chain : null;
  } catch {
    // Not built: the wasm chain is the same function.
    return null;
  }
}

export function assertLittleEndian(): void {
  if (new Uint8Array(new Uint32Array([1]).buffer)[0] !== 1) {
    throw new KvTierError(
      'KVT_ERR_HASH_BIG_ENDIAN',
      'kvtier hashes and stores tokens as u32 little-endian through typed-array views; this big-endian platform is not supported',
    );
  }
}

const HEX_KEY = /^[0-9a-f]{32}$/;

export function isKeyHex(value: unknown): value is string {
  return typeof value === 'string' && HEX_KEY.test(value);
}

/** Nibble value of each lowercase hex digit's char code; -1 for every other code below 128. */
const NIBBLE = new Int8Array(128).fill(-1);
for (let c = 0; c < 16; c++) NIBBLE['0123456789abcdef'.charCodeAt(c)] = c;

/**
 * The key's 16 bytes in an array of their own. Decoded digit by digit, checked as it goes: the plane converts a key
 * per record it writes or renews, and the regex, the pooled Buffer and the copy out of it cost ~1.5 µs a write (#29).
 */
export function hexToKeyBytes(hex: string): Uint8Array {
  const out = new Uint8Array(KEY_BYTES);
  if (typeof hex === 'string' && hex.length === KEY_BYTES * 2) {
    let bad = 0;
    for (let i = 0; i < KEY_BYTES; i++) {
      const a = hex.charCodeAt(2 * i);
      const b = hex.charCodeAt(2 * i + 1);
      const high = a < 128 ? NIBBLE[a] : -1;
      const low = b < 128 ? NIBBLE[b] : -1;
      bad |= high | low;
      out[i] = (high << 4) | low;
    }
    if (bad >= 0) return out;
  }
  throw new KvTierError('KVT_ERR_HASH_BAD_INPUT', `a key is 32 lowercase hex characters, got ${JSON.stringify(hex)}`);
}
