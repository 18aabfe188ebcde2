import { BlockError } from './errors.ts';
import { KV_DTYPES, type KvDtype } from './kv-layout.ts';
import { KEY_BYTES } from './prefix-hasher.ts';
import { codecApplies, codecId, codecName, compressPayload, decompressPayloadInto, storedPayloadBytes, type BlockCodecName } from './codecs/kv-codecs.ts';
import { blockChecksum, type BlockChecksum } from './block-checksum.ts';
import { loadXxhash } from './xxhash-runtime.ts';
import { checkSection, entryBytes, isKv, rawBytes, sectionLayout, TAIL_SECTION_KINDS, U16, writeSectionEntry, type TailSectionRecord } from './tail-sections.ts';
import { align, checkFramePayload, encodeFingerprint, frameRecord, keyAt, MAX_FINGERPRINT_BYTES, openFrame, PAYLOAD_ALIGNMENT, writeChecksums, type FileFrameKind } from './kv-file-frame.ts';

/**
 * Tail file of a unit (issue #26), format version 1. A unit is the complete
 * engine state at position p of a prefix: the block-concatenable layers stay
 * in ordinary block files (block-codec.ts, the first `blocks` blocks of the
 * chain ending at `block key`), and everything else is in one tail, in
 * sections. All integers little-endian.
 *
 * ```
 * off  size  field
 *   0     4  magic "KVTT"
 *   4     2  format version (1)
 *   6     2  fixed header bytes (112)
 *   8     4  position p (tokens the unit covers)
 *  12     4  blocks: full blocks of the chain the unit needs (floor(p / tokensPerBlock))
 *  16     4  token count r = p − blocks·tokensPerBlock (the tokens after the last full block)
 *  20     4  tokens offset   = align4(112 + fingerprint bytes)
 *  24     4  sections offset = tokens offset + 4·r
 *  28     4  section count
 *  32     4  payload offset  = align64(sections offset + Σ section entry bytes)
 *  36     4  fingerprint bytes
 *  40    16  key: the unit's key (the prefix's chained key at p)
 *  56    16  block key: chained key of block `blocks` − 1 (all zero when blocks = 0)
 *  72     1  dtype of the kv sections (0 f32, 1 f16, 2 bf16, 3 q8_0, as block files)
 *  73     1  payload codec (0 none, 1 int8, 2 fp8, 3 int4): applied to each kv section it fits
 *  74     2  tokensPerBlock
 *  76     4  zero
 *  80     8  payload length (as stored)
 *  88     8  xxh64(payload as stored, seed 0)
 *  96     8  xxh64(bytes [0, payload offset) with this field zeroed)
 * 104     8  zero
 * 112     …  fingerprint (utf8), zero pad, tokens (u32 × r), section table, zero pad,
 *            payload: the sections' bytes back to back, each as stored
 *
 * section entry: 16 bytes, then its layer indices (u16 each), zero pad to 4
 *   0  1  kind: 0 partial-kv  the block layers' K|V of the r tokens after the last full block
 *               1 window-kv   sliding-window layers' K|V of the last w tokens (w = min(p, W − 1))
 *               2 recurrent   state at p of L layers (rows × width f32 each); deepseek4 writes, in
 *                             order: SWA windows, per compress ratio its unfinished groups'
 *                             compressor (+ indexer) rows and the partial block's entries,
 *                             then the MTP window and hidden state (inference-core/engine/deepseek4-unit.ts)
 *               3 conv        a short-convolution layer's state (rows × width f32), one per layer
 *   1  1  stored as: 0 raw, else the header's codec
 *   2  2  layer count L
 *   4  2  kvHeads (kv kinds) | rows (state kinds)
 *   6  2  headDim (kv kinds) | width (state kinds)
 *   8  4  first token (kv kinds: position of the section's first token; state kinds: p)
 *  12  4  tokens (kv kinds) | 1 (state kinds)
 *  16 2L  engine layer indices, ascending
 * raw bytes: kv kinds [L][K|V][kvHeads][tokens][headDim] in the header's dtype (a block
 *            payload's layout with `tokens` tokens, so the block codecs apply unchanged);
 *            state kinds [L][rows][width] f32, never compressed (a recurrent state feeds
 *            every later token, a rounding there does not stay local).
 * ```
 *
 * The checksum rule, the 64-byte payload alignment and the "exact length"
 * rule are block-codec.ts's; a tail is sealed as a block is (seal/, the
 * tail's key as associated data). Anything malformed, truncated or
 * bit-flipped throws a BlockError, which the tier counts as a miss.
 */
export const TAIL_MAGIC = 0x5454564b; // "KVTT" read as u32 LE
export const TAIL_FORMAT_VERSION = 1;
export const TAIL_FIXED_HEADER_BYTES = 112;
const MAX_SECTIONS = 64;
const TAIL_FRAME: FileFrameKind = { noun: 'tail', magic: TAIL_MAGIC, magicText: 'KVTT', version: TAIL_FORMAT_VERSION, versionNote: '', headerBytes: TAIL_FIXED_HEADER_BYTES };

export interface TailToEncode {
  key: Uint8Array;
  /** Chained key of the last full block (zeros when the unit needs none). */
  blockKey: Uint8Array;
  modelFingerprint: string;
  position: number;
  tokensPerBlock: number;
  /** The r tokens after the last full block. */
  tokens: Uint32Array;
  dtype: KvDtype;
  sections: TailSectionRecord[];
}

export interface DecodedTail extends Omit<TailToEncode, 'key' | 'blockKey'> {
  key: string;
  blockKey: string;
  keyBytes: Uint8Array;
  blockKeyBytes: Uint8Array;
  blocks: number;
  codec: BlockCodecName;
  formatVersion: number;
  /** The whole encoded file. */
  bytes: Uint8Array;
  storedPayloadBytes: number;
  /** Bytes this object holds: the file, plus each decompressed section (a separate buffer); what the hot tier counts. */
  residentBytes: number;
}

export class TailCodec {
  private constructor(private readonly xxh: BlockChecksum) {}

  static async create(): Promise<TailCodec> {
    return new TailCodec(blockChecksum((await loadXxhash()).api));
  }

  /** One buffer; kv sections compressed under `codec` where it applies (else raw, as the entry says). */
  encode(tail: TailToEncode, codec: BlockCodecName = 'none'): Uint8Array {
    const bad = (what: string): never => {
      throw new BlockError('KVT_ERR_BLOCK_MALFORMED', `tail: ${what}`);
    };
    const { key, blockKey, tokens, sections, dtype, position, tokensPerBlock } = tail;
    if (!(key instanceof Uint8Array) || key.length !== KEY_BYTES || !(blockKey instanceof Uint8Array) || blockKey.length !== KEY_BYTES) bad(`key and blockKey must be ${KEY_BYTES}-byte Uint8Arrays`);
    if (!Number.isInteger(tokensPerBlock) || tokensPerBlock < 1 || tokensPerBlock > U16) bad('tokensPerBlock');
    if (!Number.isInteger(position) || position < 1) bad('position must be a positive integer');
    const blocks = Math.floor(position / tokensPerBlock);
    if (!(tokens instanceof Uint32Array) || tokens.length !== position - blocks * tokensPerBlock) bad(`a unit at ${position} carries the ${position - blocks * tokensPerBlock} tokens after its last full block`);
    if (!KV_DTYPES.includes(dtype)) bad(`dtype ${dtype}`);
    if (sections.length > MAX_SECTIONS) bad(`more than ${MAX_SECTIONS} sections`);
    const fingerprint = encodeFingerprint(tail.modelFingerprint, bad);
    const stored: Array<{ body: Uint8Array; compressed: boolean }> = sections.map((s) => {
      checkSection(s, position, dtype, bad);
      if (isKv(s.kind) && codec !== 'none') {
        const packed = compressPayload(codec, sectionLayout(s, dtype), s.tokens, s.bytes);
        if (packed) return { body: packed, compressed: true };
      }
      return { body: s.bytes, compressed: false };
    });
    const tokensOffset = align(TAIL_FIXED_HEADER_BYTES + fingerprint.length, 4);
    const sectionsOffset = tokensOffset + tokens.length * 4;
    const tableBytes = sections.reduce((a, s) => a + entryBytes(s.layers.length), 0);
    const payloadOffset = align(sectionsOffset + tableBytes, PAYLOAD_ALIGNMENT);
    const payloadLength = stored.reduce((a, s) => a + s.body.byteLength, 0);
    const bytes = new Uint8Array(payloadOffset + payloadLength);
    const view = new DataView(bytes.buffer);
    view.setUint32(0, TAIL_MAGIC, true);
    view.setUint16(4, TAIL_FORMAT_VERSION, true);
    view.setUint16(6, TAIL_FIXED_HEADER_BYTES, true);
    view.setUint32(8, position, true);
    view.setUint32(12, blocks, true);
    view.setUint32(16, tokens.length, true);
    view.setUint32(20, tokensOffset, true);
    view.setUint32(24, sectionsOffset, true);
    view.setUint32(28, sections.length, true);
    view.setUint32(32, payloadOffset, true);
    view.setUint32(36, fingerprint.length, true);
    bytes.set(key, 40);
    bytes.set(blockKey, 56);
    view.setUint8(72, KV_DTYPES.indexOf(dtype));
    view.setUint8(73, codecId(codec));
    view.setUint16(74, tokensPerBlock, true);
    view.setBigUint64(80, BigInt(payloadLength), true);
    bytes.set(fingerprint, TAIL_FIXED_HEADER_BYTES);
    bytes.set(new Uint8Array(tokens.buffer, tokens.byteOffset, tokens.length * 4), tokensOffset);
    let at = sectionsOffset;
    let pay = payloadOffset;
    sections.forEach((s, i) => {
      writeSectionEntry(view, at, s, stored[i].compressed);
      at += entryBytes(s.layers.length);
      bytes.set(stored[i].body, pay);
      pay += stored[i].body.byteLength;
    });
    writeChecksums(this.xxh, bytes, view, payloadOffset);
    return bytes;
  }

  /**
   * Parses and checks a tail file: both checksums (the payload one skipped for
   * plaintext out of a verified AES-GCM envelope, as block-codec.ts), every
   * offset and size. Anything else throws a BlockError.
   */
  decode(bytes: Uint8Array, options: { authenticatedBy?: 'aes-256-gcm' } = {}): DecodedTail {
    const malformed = (what: string): never => {
      throw new BlockError('KVT_ERR_BLOCK_MALFORMED', `malformed tail: ${what}`);
    };
    const { view, version } = openFrame(bytes, TAIL_FRAME, malformed);
    const position = view.getUint32(8, true);
    const blocks = view.getUint32(12, true);
    const r = view.getUint32(16, true);
    const tokensOffset = view.getUint32(20, true);
    const sectionsOffset = view.getUint32(24, true);
    const count = view.getUint32(28, true);
    const payloadOffset = view.getUint32(32, true);
    const fpBytes = view.getUint32(36, true);
    const tokensPerBlock = view.getUint16(74, true);
    if (tokensPerBlock === 0 || position === 0 || blocks !== Math.floor(position / tokensPerBlock) || r !== position - blocks * tokensPerBlock) malformed('position, blocks and token count disagree');
    if (fpBytes === 0 || fpBytes > MAX_FINGERPRINT_BYTES) malformed(`fingerprint length ${fpBytes}`);
    if (count > MAX_SECTIONS) malformed(`section count ${count}`);
    if (tokensOffset !== align(TAIL_FIXED_HEADER_BYTES + fpBytes, 4) || sectionsOffset !== tokensOffset + 4 * r) malformed('tokens / sections offset');
    if (payloadOffset > bytes.byteLength || payloadOffset < sectionsOffset) malformed('payload offset');
    const total = checkFramePayload(bytes, view, payloadOffset, { noun: 'tail', xxh: this.xxh, malformed, authenticatedBy: options.authenticatedBy });
    const dtypeCode = view.getUint8(72);
    if (dtypeCode >= KV_DTYPES.length) malformed(`dtype code ${dtypeCode}`);
    const dtype = KV_DTYPES[dtypeCode];
    const codec = codecName(view.getUint8(73));
    if (codec === undefined) malformed(`payload codec code ${view.getUint8(73)}`);
    const sections: TailSectionRecord[] = [];
    let at = sectionsOffset;
    let pay = payloadOffset;
    for (let i = 0; i < count; i++) {
      if (at + 16 > payloadOffset) malformed('section table overruns the payload offset');
      const kindCode = view.getUint8(at);
      if (kindCode >= TAIL_SECTION_KINDS.length) malformed(`section kind code ${kindCode}`);
      const kind = TAIL_SECTION_KINDS[kindCode];
      const compressed = view.getUint8(at + 1);
      const nLayers = view.getUint16(at + 2, true);
      if (nLayers === 0 || at + entryBytes(nLayers) > payloadOffset) malformed(`section ${i} layer list`);
      const layers = Array.from({ length: nLayers }, (_, j) => view.getUint16(at + 16 + 2 * j, true));
      const s = { layers, kvHeads: view.getUint16(at + 4, true), headDim: view.getUint16(at + 6, true), firstToken: view.getUint32(at + 8, true), tokens: view.getUint32(at + 12, true) };
      if (s.kvHeads === 0 || s.headDim === 0 || s.tokens === 0) malformed(`section ${i} shape`);
      if (layers.some((l, j) => j > 0 && l <= layers[j - 1])) malformed(`section ${i} layers not ascending`);
      if (isKv(kind) ? s.firstToken + s.tokens > position : s.tokens !== 1 || s.firstToken !== position) malformed(`section ${i} token range`);
      if (compressed > 1 || (compressed === 1 && (!isKv(kind) || codec === 'none' || !codecApplies(codec!, sectionLayout(s, dtype))))) malformed(`section ${i} storage`);
      const raw = rawBytes(kind, s, dtype);
      let storedLen = raw;
      if (compressed) {
        try {
          storedLen = storedPayloadBytes(codec!, sectionLayout(s, dtype), s.tokens, raw);
        } catch (error) {
          malformed(`section ${i} outside the codec's shapes: ${(error as Error).message}`);
        }
      }
      if (pay + storedLen > total) malformed(`section ${i} runs past the payload`);
      const body = bytes.subarray(pay, pay + storedLen);
      let data = body;
      if (compressed) {
        data = new Uint8Array(raw);
        try {
          decompressPayloadInto(data, codec!, sectionLayout(s, dtype), s.tokens, body);
        } catch (error) {
          malformed(`section ${i} does not decompress under ${codec}: ${(error as Error).message}`);
        }
      }
      sections.push({ kind, ...s, bytes: data });
      pay += storedLen;
      at += entryBytes(nLayers);
    }
    if (pay !== total) malformed('payload length does not match the sections');
    let residentBytes = bytes.byteLength;
    for (const s of sections) if (s.bytes.buffer !== bytes.buffer) residentBytes += s.bytes.byteLength;
    const block = keyAt(bytes, 56);
    return {
      ...frameRecord(bytes, { key: 40, fingerprint: TAIL_FIXED_HEADER_BYTES, fingerprintBytes: fpBytes, tokens: tokensOffset, tokenCount: r, version }),
      blockKey: block.hex,
      blockKeyBytes: block.bytes,
      position,
      blocks,
      tokensPerBlock,
      dtype,
      codec: codec!,
      sections,
      storedPayloadBytes: total - payloadOffset,
      residentBytes,
    };
  }
}
