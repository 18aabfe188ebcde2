import { BlockError } from './errors.ts';
import { assertValidLayout, KV_DTYPES, KV_LAYOUT_KINDS, payloadBytesFor, type KvDtype, type KvLayout } from './kv-layout.ts';
import { BLOCK_FORMAT_VERSION, KEY_BYTES } from './prefix-hasher.ts';
import { codecApplies, codecId, codecName, compressPayload, decompressPayloadInto, storedPayloadBytes, type BlockCodecName } from './codecs/kv-codecs.ts';
import { blockChecksum, type BlockChecksum } from './block-checksum.ts';
import { loadXxhash } from './xxhash-runtime.ts';
import type { BufferLease } from './read-buffer-pool.ts';
import { align, checkFramePayload, encodeFingerprint, frameRecord, keyAt, MAX_FINGERPRINT_BYTES, openFrame, PAYLOAD_ALIGNMENT, writeChecksums, type FileFrameKind } from './kv-file-frame.ts';

/**
 * Block file, format version 1. All integers little-endian.
 *
 * ```
 * off  size  field
 *   0     4  magic "KVTB"
 *   4     2  format version (1)
 *   6     2  fixed header bytes (104)
 *   8     4  token count
 *  12     4  tokens offset    = align4(104 + fingerprint bytes)
 *  16     4  payload offset   = align64(tokens offset + 4 × token count)
 *  20     4  fingerprint bytes
 *  24    16  key
 *  40    16  parent key
 *  56    16  layout: layers, kvHeads, headDim, tokensPerBlock (u32 each)
 *  72     1  dtype (0 f32, 1 f16, 2 bf16, 3 q8_0)
 *  73     1  layout kind (0 kv: K then V per layer, 1 mla: one latent row per token and layer)
 *  74     1  payload codec (0 none, 1 int8, 2 fp8, 3 int4: codecs/kv-codecs.ts), then 5 zero bytes
 *  80     8  payload length (as stored: compressed under a codec)
 *  88     8  xxh64(payload as stored, seed 0)
 *  96     8  xxh64(bytes [0, payload offset) with this field zeroed)
 * 104     …  model fingerprint (utf8), zero pad, tokens (u32), zero pad
 *  payload offset: KV payload, exactly as the engine exported it (codec 0), or its compressed form
 * ```
 *
 * Byte 74 was one of the zero bytes before codecs existed, so every older
 * file reads as codec none, unchanged: no version bump (the namespace, which
 * includes the version, stays the same and old blocks stay hits). A block is
 * decoded by the codec its header names, whatever the policy says now. (A
 * build from before codecs reads a compressed file as malformed: a miss.)
 *
 * The payload starts on a 64-byte boundary so the engine can view it (as
 * f32/f16 rows, or for DMA) without a copy. The meta checksum covers the
 * header, fingerprint, tokens and padding; the payload checksum the payload.
 * The file ends exactly at payload offset + payload length: a longer or
 * shorter file is rejected.
 *
 * Checksum rule. A plaintext block is checked against both checksums, always.
 * A block that came out of an encryption-at-rest envelope whose AES-256-GCM
 * tag verified (seal/, `DecodeOptions.authenticatedBy`) skips the payload
 * XXH64 and keeps the meta one. The tag covers every ciphertext byte, and the
 * envelope header plus the block key as associated data, under a key storage
 * never sees: a bit changed on disk, in transit or by anyone without the key
 * fails it (forgery odds ~2^-128, against 2^-64 for a random XXH64 match)
 * before decode runs, so plaintext that reaches decode is byte for byte what
 * the writer sealed, and the writer computed the payload checksum over those
 * very bytes just before sealing them. Hashing the payload again would be
 * the same integrity check twice, a second pass over the whole block. What it would
 * still catch is a writer that sealed an already-broken block (memory
 * corrupted between encode and seal); the meta checksum, which is small, stays
 * checked so the header is parsed under one rule for both kinds of block.
 */
export const BLOCK_MAGIC = 0x4254564b; // "KVTB" read as u32 LE
export const FIXED_HEADER_BYTES = 104;
const MAX_TOKENS_PER_BLOCK = 1 << 20;
const BLOCK_FRAME: FileFrameKind = {
  noun: 'block',
  magic: BLOCK_MAGIC,
  magicText: 'KVTB',
  version: BLOCK_FORMAT_VERSION,
  versionNote: ' (namespaces include the version, so this is a stale or foreign file)',
  headerBytes: FIXED_HEADER_BYTES,
};

export interface BlockToEncode {
  key: Uint8Array;
  parentKey: Uint8Array;
  modelFingerprint: string;
  /** The block's tokens; a view into the prompt is fine (copied once). */
  tokens: Uint32Array;
  layout: KvLayout;
  /** The KV payload as the engine exported it; its length must match the layout. */
  payload: Uint8Array;
}

/** A verified block. `tokens` and `payload` are views into `bytes` (no copy). */
export interface DecodedBlock {
  key: string;
  parentKey: string;
  keyBytes: Uint8Array;
  parentKeyBytes: Uint8Array;
  modelFingerprint: string;
  formatVersion: number;
  tokens: Uint32Array;
  layout: KvLayout;
  payload: Uint8Array;
  /** The whole encoded file. */
  bytes: Uint8Array;
  /** How the payload is stored in `bytes`; for a codec other than none, `payload` is its decompressed copy. */
  codec: BlockCodecName;
  /** Payload bytes as stored (compressed size under a codec). */
  storedPayloadBytes: number;
  /** Bytes this object holds: the file, plus the decompressed payload when it is a separate buffer. */
  residentBytes: number;
  /** Set by the load path when the block lives in recycled buffers (read-buffer-pool.ts): who still holds them. */
  lease?: BufferLease;
}

export interface DecodeOptions {
  /** Where a compressed payload is decompressed to (a recycled buffer of exactly `size` bytes); default a new one. */
  allocatePayload?: (size: number) => Uint8Array;
  /**
   * `bytes` are the plaintext of an envelope whose AES-256-GCM tag verified
   * (seal/openStoredForDecode): the payload checksum is not recomputed, the meta
   * checksum still is (the checksum rule in this file's header says why).
   */
  authenticatedBy?: 'aes-256-gcm';
}

/** A block's own unzeroed buffer (encode writes every byte): an ArrayBuffer of exactly `size`, at offset 0. */
export function ownBuffer(size: number): Uint8Array {
  return new Uint8Array(Buffer.allocUnsafeSlow(size).buffer, 0, size);
}

export class BlockCodec {
  private constructor(private readonly xxh: BlockChecksum) {}

  static async create(): Promise<BlockCodec> {
    return new BlockCodec(blockChecksum((await loadXxhash()).api));
  }

  /** Which XXH64 verifies blocks: `native` (in place) or `wasm` (copies each block into wasm memory). */
  get checksumKind(): BlockChecksum['kind'] {
    return this.xxh.kind;
  }

  /**
   * Header + tokens + payload in one buffer; the payload is copied exactly
   * once, or compressed under `codec` (none when the codec does not apply to
   * the layout's dtype or a value is not finite: the header says which).
   */
  encode(block: BlockToEncode, codec: BlockCodecName = 'none', allocate: (size: number) => Uint8Array = ownBuffer): Uint8Array {
    const { key, parentKey, tokens, layout, payload } = block;
    assertValidLayout(layout);
    if (!(key instanceof Uint8Array) || key.length !== KEY_BYTES || !(parentKey instanceof Uint8Array) || parentKey.length !== KEY_BYTES) {
      throw new BlockError('KVT_ERR_BLOCK_MALFORMED', `key and parentKey must be ${KEY_BYTES}-byte Uint8Arrays`);
    }
    if (!(tokens instanceof Uint32Array) || tokens.length === 0 || tokens.length > layout.tokensPerBlock) {
      throw new BlockError(
        'KVT_ERR_BLOCK_MALFORMED',
        `a block holds 1..${layout.tokensPerBlock} tokens as a Uint32Array, got ${tokens?.length ?? typeof tokens}`,
      );
    }
    if (!(payload instanceof Uint8Array)) throw new BlockError('KVT_ERR_BLOCK_PAYLOAD_SIZE', 'payload must be a Uint8Array');
    const expected = payloadBytesFor(layout, tokens.length);
    if (payload.byteLength !== expected) {
      throw new BlockError(
        'KVT_ERR_BLOCK_PAYLOAD_SIZE',
        `payload is ${payload.byteLength} bytes but ${tokens.length} tokens of layout ${describeLayout(layout)} need ${expected}; export per layer K then V, each [kvHead][token][headDim]`,
      );
    }
    const stored = codec === 'none' ? null : compressPayload(codec, layout, tokens.length, payload);
    const body = stored ?? payload;
    const fingerprint = encodeFingerprint(block.modelFingerprint, (what) => {
      throw new BlockError('KVT_ERR_BLOCK_MALFORMED', what);
    });
    const tokensOffset = align(FIXED_HEADER_BYTES + fingerprint.length, 4);
    const payloadOffset = align(tokensOffset + tokens.length * 4, PAYLOAD_ALIGNMENT);
    // Own ArrayBuffer (a view at offset 0 that nothing else shares: readers
    // view `bytes.buffer` and lease by buffer identity; `allocate` must give
    // one too, e.g. a recycled one: encode-buffer-pool.ts), not zero-filled:
    // every byte is written below, the padding and the reserved bytes
    // explicitly zeroed (the meta checksum covers them). Zeroing the whole
    // block first cost a second pass over it on the write path.
    const size = payloadOffset + body.byteLength;
    const bytes = allocate(size);
    if (bytes.byteLength !== size || bytes.byteOffset !== 0 || bytes.buffer.byteLength !== size) {
      throw new BlockError('KVT_ERR_BLOCK_MALFORMED', `encode's allocator gave ${bytes.byteLength} bytes at offset ${bytes.byteOffset} of ${bytes.buffer.byteLength}; a block needs ${size} in a buffer of its own`);
    }
    const view = new DataView(bytes.buffer);
    view.setUint32(0, BLOCK_MAGIC, true);
    view.setUint16(4, BLOCK_FORMAT_VERSION, true);
    view.setUint16(6, FIXED_HEADER_BYTES, true);
    view.setUint32(8, tokens.length, true);
    view.setUint32(12, tokensOffset, true);
    view.setUint32(16, payloadOffset, true);
    view.setUint32(20, fingerprint.length, true);
    bytes.set(key, 24);
    bytes.set(parentKey, 40);
    view.setUint32(56, layout.layers, true);
    view.setUint32(60, layout.kvHeads, true);
    view.setUint32(64, layout.headDim, true);
    view.setUint32(68, layout.tokensPerBlock, true);
    view.setUint8(72, KV_DTYPES.indexOf(layout.dtype));
    view.setUint8(73, KV_LAYOUT_KINDS.indexOf(layout.kind ?? 'kv'));
    view.setUint8(74, stored === null ? 0 : codecId(codec));
    bytes.fill(0, 75, 80);
    view.setBigUint64(80, BigInt(body.byteLength), true);
    bytes.fill(0, 88, FIXED_HEADER_BYTES);
    bytes.set(fingerprint, FIXED_HEADER_BYTES);
    bytes.fill(0, FIXED_HEADER_BYTES + fingerprint.length, tokensOffset);
    bytes.set(new Uint8Array(tokens.buffer, tokens.byteOffset, tokens.length * 4), tokensOffset);
    bytes.fill(0, tokensOffset + tokens.length * 4, payloadOffset);
    bytes.set(body, payloadOffset);
    writeChecksums(this.xxh, bytes, view, payloadOffset);
    return bytes;
  }

  /**
   * Parses and checks a block file. Anything malformed, truncated,
   * bit-flipped or of another format version throws a BlockError; on success
   * every field has been checked against both checksums.
   */
  decode(bytes: Uint8Array, options: DecodeOptions = {}): DecodedBlock {
    const malformed = (what: string): never => {
      throw new BlockError('KVT_ERR_BLOCK_MALFORMED', `malformed block header: ${what}`);
    };
    const { view, version } = openFrame(bytes, BLOCK_FRAME, malformed);
    const tokenCount = view.getUint32(8, true);
    const tokensOffset = view.getUint32(12, true);
    const payloadOffset = view.getUint32(16, true);
    const fingerprintBytes = view.getUint32(20, true);
    if (tokenCount === 0 || tokenCount > MAX_TOKENS_PER_BLOCK) malformed(`token count ${tokenCount}`);
    if (fingerprintBytes === 0 || fingerprintBytes > MAX_FINGERPRINT_BYTES) malformed(`fingerprint length ${fingerprintBytes}`);
    if (tokensOffset !== align(FIXED_HEADER_BYTES + fingerprintBytes, 4)) malformed('tokens offset');
    if (payloadOffset !== align(tokensOffset + tokenCount * 4, PAYLOAD_ALIGNMENT)) malformed('payload offset');
    const total = checkFramePayload(bytes, view, payloadOffset, { noun: 'block', xxh: this.xxh, malformed, authenticatedBy: options.authenticatedBy });
    const payloadLength = total - payloadOffset;
    const storedPayload = bytes.subarray(payloadOffset, total);
    const dtypeCode = view.getUint8(72);
    if (dtypeCode >= KV_DTYPES.length) malformed(`dtype code ${dtypeCode}`);
    const kindCode = view.getUint8(73);
    if (kindCode >= KV_LAYOUT_KINDS.length) malformed(`layout kind code ${kindCode}`);
    const layout: KvLayout = {
      layers: view.getUint32(56, true),
      kvHeads: view.getUint32(60, true),
      headDim: view.getUint32(64, true),
      tokensPerBlock: view.getUint32(68, true),
      dtype: KV_DTYPES[dtypeCode] as KvDtype,
      ...(kindCode === 1 ? { kind: 'mla' as const } : {}),
    };
    try {
      assertValidLayout(layout);
    } catch (error) {
      malformed((error as Error).message);
    }
    if (tokenCount > layout.tokensPerBlock) malformed(`token count ${tokenCount} exceeds tokensPerBlock ${layout.tokensPerBlock}`);
    const codec = codecName(view.getUint8(74));
    if (codec === undefined) malformed(`payload codec code ${view.getUint8(74)}`);
    const rawLength = payloadBytesFor(layout, tokenCount);
    let payload = storedPayload;
    if (codec === 'none') {
      if (payloadLength !== rawLength) malformed(`payload length ${payloadLength} does not match the layout`);
    } else {
      if (!codecApplies(codec!, layout)) malformed(`codec ${codec} on a ${layout.dtype} payload`);
      let expectedStored: number;
      try {
        expectedStored = storedPayloadBytes(codec!, layout, tokenCount, rawLength);
      } catch (error) {
        // The native codec bounds the shape itself (layers, heads, dims); a header outside them is malformed.
        malformed(`layout outside the codec's shapes: ${(error as Error).message}`);
      }
      if (payloadLength !== expectedStored!) malformed(`payload length ${payloadLength} does not match the layout under codec ${codec}`);
      payload = options.allocatePayload?.(rawLength) ?? new Uint8Array(rawLength);
      if (payload.byteLength !== rawLength) throw new RangeError(`allocatePayload(${rawLength}) returned ${payload.byteLength} bytes`);
      try {
        decompressPayloadInto(payload, codec!, layout, tokenCount, storedPayload);
      } catch (error) {
        // The native kernel checks both lengths against its own shape rules (an MLA page has one head); a header it refuses is malformed.
        malformed(`payload does not decompress under codec ${codec}: ${(error as Error).message}`);
      }
    }
    const parent = keyAt(bytes, 40);
    return {
      ...frameRecord(bytes, { key: 24, fingerprint: FIXED_HEADER_BYTES, fingerprintBytes, tokens: tokensOffset, tokenCount, version }),
      parentKey: parent.hex,
      parentKeyBytes: parent.bytes,
      layout,
      payload,
      codec: codec!,
      storedPayloadBytes: payloadLength,
      residentBytes: bytes.byteLength + (codec === 'none' ? 0 : rawLength),
    };
  }

  /** The same block stored under `codec` (the file itself when it already is). */
  recode(bytes: Uint8Array, codec: BlockCodecName): Uint8Array {
    const block = this.decode(bytes);
    if (block.codec === codec) return bytes;
    return this.encode({ key: block.keyBytes, parentKey: block.parentKeyBytes, modelFingerprint: block.modelFingerprint, tokens: block.tokens, layout: block.layout, payload: block.payload }, codec);
  }
}

function describeLayout(layout: KvLayout): string {
  return `{${layout.kind === 'mla' ? 'mla, ' : ''}layers ${layout.layers}, kvHeads ${layout.kvHeads}, headDim ${layout.headDim}, ${layout.dtype}}`;
}
