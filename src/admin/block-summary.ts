/**
 * What a listed block holds on storage, for the dashboard's "Recent blocks"
 * table (`GET /admin/blocks?stored=1`): file size, encryption (algorithm and
 * key id, from the envelope header in the clear), and the block header's
 * codec and token count. A sealed block's header is read only after its tag
 * verified under the tenant's key (isolated salt, then the shared one), so
 * nothing unauthenticated is shown; with no keyring it is listed as sealed
 * with codec unknown.
 */
import type { BlobStore } from '../../storage-adapters/index.ts';
import { describeError } from '../errors.ts';
import { BlockCodec, BlockSealer, describeSealed, errorCodeOf, looksSealed, MAX_BLOCK_READ_BYTES, TAIL_MAGIC, TailCodec, type IndexEntry } from '../kvtier/index.ts';
import type { BlockDetail, StoredSummary } from './admin-types.ts';

/** Listings read the stored header of at most this many blocks per request (each is a storage read, and an open when sealed). */
export const MAX_STORED_SUMMARIES = 50;

export interface SealedOpener {
  sealer: BlockSealer;
  /** The namespace salts a tenant's blocks may be sealed under (isolated first, then shared). */
  salts(tenant: string): string[];
}

export async function summarizeStored(entry: Pick<IndexEntry, 'key' | 'tenant'>, deps: { store: BlobStore; codec: BlockCodec; tailCodec?: TailCodec; opener?: SealedOpener }): Promise<StoredSummary> {
  let bytes: Uint8Array | null;
  try {
    // Bounded like a load's read: a foreign file claiming gigabytes is reported, not read into memory.
    bytes = await deps.store.get(entry.key, { maxBytes: MAX_BLOCK_READ_BYTES });
  } catch (error) {
    return { present: false, problem: { code: errorCodeOf(error), message: describeError(error).message } };
  }
  if (bytes === null) return { present: false };
  const summary: StoredSummary = { present: true, fileBytes: bytes.byteLength, encryption: null };
  const sealed = describeSealed(bytes);
  if (sealed !== null && 'problem' in sealed) return { ...summary, problem: { code: 'KVT_ERR_SEAL_MALFORMED', message: sealed.problem } };
  summary.encryption = sealed;
  let plain: Uint8Array | null = bytes;
  if (sealed !== null) {
    plain = deps.opener ? openWithTenant(deps.opener, bytes, entry) : null;
    if (plain === null) return summary; // codec unknown: only the tenant's key opens the header
  }
  try {
    if (deps.tailCodec && isTailFile(plain)) {
      const tail = deps.tailCodec.decode(plain);
      return { ...summary, kind: 'tail', unitPosition: tail.position, codec: tail.codec, tokenCount: tail.position, payloadBytes: tail.sections.reduce((n, x) => n + x.bytes.byteLength, 0), storedPayloadBytes: tail.storedPayloadBytes };
    }
    const block = deps.codec.decode(plain);
    summary.kind = 'block';
    summary.codec = block.codec;
    summary.tokenCount = block.tokens.length;
    summary.payloadBytes = block.payload.byteLength;
    summary.storedPayloadBytes = block.storedPayloadBytes;
  } catch (error) {
    summary.problem = { code: errorCodeOf(error), message: describeError(error).message };
  }
  return summary;
}

function openWithTenant(opener: SealedOpener, bytes: Uint8Array, entry: Pick<IndexEntry, 'key' | 'tenant'>): Uint8Array | null {
  const keyBytes = new Uint8Array(Buffer.from(entry.key, 'hex'));
  for (const salt of opener.salts(entry.tenant)) {
    if (!looksSealed(bytes)) return null;
    try {
      return opener.sealer.open(bytes, keyBytes, salt);
    } catch {
      // another salt (a shared tenant's blocks), or not openable here: shown as sealed, codec unknown
    }
  }
  return null;
}

/** A prefix unit's tail file (tail-codec.ts) rather than a block: its magic. */
export function isTailFile(bytes: Uint8Array): boolean {
  return bytes.byteLength >= 4 && new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, true) === TAIL_MAGIC;
}

/** `inspect` of a tail file: the unit it completes (a tail stored under another key, or malformed, fails verification). */
export function inspectTail(detail: BlockDetail, bytes: Uint8Array, codec: TailCodec): BlockDetail {
  try {
    const tail = codec.decode(bytes);
    detail.storage.verified = tail.key === detail.key;
    if (!detail.storage.verified) detail.storage.problem = { code: 'KVT_ERR_BLOCK_KEY_MISMATCH', message: `the file stored under ${detail.key} holds the tail of unit ${tail.key}` };
    detail.storage.unit = {
      formatVersion: tail.formatVersion,
      modelFingerprint: tail.modelFingerprint,
      position: tail.position,
      blocks: tail.blocks,
      blockKey: tail.blockKey,
      tokensPerBlock: tail.tokensPerBlock,
      dtype: String(tail.dtype),
      codec: tail.codec,
      storedPayloadBytes: tail.storedPayloadBytes,
      tailTokens: Array.from(tail.tokens.subarray(0, 16)),
      sections: tail.sections.map((x) => ({ kind: x.kind, layers: [...x.layers], firstToken: x.firstToken, tokens: x.tokens, bytes: x.bytes.byteLength })),
    };
  } catch (error) {
    detail.storage.verified = false;
    detail.storage.problem = { code: errorCodeOf(error), message: describeError(error).message };
  }
  return detail;
}
