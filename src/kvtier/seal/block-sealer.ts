import { createCipheriv, createDecipheriv } from 'node:crypto';

import { loadAddon } from '../../../native/index.ts';

import { NonceSource } from './nonce-source.ts';
import { defaultOpenThreads, OpenWorkers } from './open-workers.ts';
import { markSealedContent, readSealHeader, SEAL_HEADER_BYTES, SEAL_NONCE_BYTES, SEAL_NONCE_OFFSET, SEAL_OVERHEAD_BYTES, SEAL_TAG_BYTES, writeSealHeader } from './seal-envelope.ts';
import { SealError } from './seal-errors.ts';
import { SealKeyring, type SealKeyringSpec } from './seal-keyring.ts';
import { SealedRead, type ReadOpenFn } from './sealed-read.ts';

const BLOCK_KEY_BYTES = 16;
/** Ciphertext is produced this many bytes at a time straight into the envelope, so each piece is copied while still in cache. */
const SEAL_CHUNK_BYTES = 64 * 1024;
/** `openAsync` hands blocks at least this large to a thread; smaller ones cost less to open here than to post. */
const OFFLOAD_MIN_BYTES = 128 * 1024;
/** `openAsync` opens blocks at least this large natively on libuv's pool (a hop there costs ~10–30 µs). */
const NATIVE_MIN_BYTES = 64 * 1024;

export interface BlockSealerOptions {
  nonces?: NonceSource;
  /** Threads `openAsync` decrypts large blocks on when the native open is off or not built; default `defaultOpenThreads()` (0 on ≤ 2 cores), 0 = open on the caller's thread. */
  openThreads?: number;
  /**
   * `openAsync` decrypts large blocks in place with one OpenSSL call on libuv's pool (native addon's
   * aesGcmOpenInPlace: off the loading thread, no copy); default true when the addon has it.
   */
  nativeOpen?: boolean;
  /**
   * Where the native open runs: `pool` (default: libuv's threads, overlapping the
   * loading thread's work when a core is free) or `caller` (the loading thread,
   * synchronously: with the 512-bit AES-GCM a 768 KiB block is ~65 µs, about what
   * a round trip to the pool costs on a busy box; in bench/storage-seal.ts the two
   * were within noise of each other, the pool's worst round the better).
   */
  nativeOpenOn?: 'caller' | 'pool';
  /**
   * `sealedRead` hands the fs store a reader that decrypts each 64 KiB piece as
   * it is read (native aesGcmReadOpen: one pass, one pool hop); default true
   * when the addon has it and `nativeOpen` is not false.
   */
  readOpen?: boolean;
}

interface NativeOpen {
  openSync(data: Uint8Array, key: Uint8Array, nonce: Uint8Array, aad: Uint8Array, tag: Uint8Array): boolean;
  open(data: Uint8Array, key: Uint8Array, nonce: Uint8Array, aad: Uint8Array, tag: Uint8Array): Promise<boolean>;
  readOpen: ReadOpenFn | undefined;
}

/** The native open when the addon is built with it, else undefined (node:crypto on this thread or open threads then). */
function nativeOpenFn(): NativeOpen | undefined {
  try {
    const addon = loadAddon();
    if (typeof addon.aesGcmOpenInPlace !== 'function' || typeof addon.aesGcmOpenInPlaceSync !== 'function') return undefined;
    return {
      openSync: addon.aesGcmOpenInPlaceSync.bind(addon),
      open: addon.aesGcmOpenInPlace.bind(addon),
      readOpen: typeof addon.aesGcmReadOpen === 'function' ? addon.aesGcmReadOpen.bind(addon) : undefined,
    };
  } catch {
    return undefined; // not built: the same AES-GCM through node:crypto
  }
}

/**
 * AES-256-GCM envelopes around encoded blocks (format in seal-envelope.ts).
 *
 *   store: encoded block ──seal(block key, tenant salt)──▶ envelope ──▶ BlobStore.put
 *   load:  BlobStore.get ──▶ envelope ──open(block key, tenant salt)──▶ encoded block ──▶ BlockCodec.decode
 *
 * `open` throws a SealError (the caller counts it and treats the block as a
 * miss); it returns plaintext only after the tag has verified.
 */
export class BlockSealer {
  readonly keyring: SealKeyring;
  private readonly nonces: NonceSource;
  /** header ‖ block key, rebuilt per call (seal and open are synchronous, so one scratch buffer serves). */
  private readonly aad = Buffer.alloc(SEAL_HEADER_BYTES + BLOCK_KEY_BYTES);

  private readonly workers: OpenWorkers | undefined;
  private readonly nativeOpen: NativeOpen | undefined;
  private readonly nativeOnCaller: boolean;
  private readonly readOpen: ReadOpenFn | undefined;

  constructor(keyring: SealKeyring | SealKeyringSpec, options: BlockSealerOptions = {}) {
    this.keyring = keyring instanceof SealKeyring ? keyring : new SealKeyring(keyring);
    this.nonces = options.nonces ?? new NonceSource();
    this.nativeOpen = options.nativeOpen === false ? undefined : nativeOpenFn();
    this.nativeOnCaller = options.nativeOpenOn === 'caller';
    this.readOpen = options.readOpen === false ? undefined : this.nativeOpen?.readOpen;
    const threads = options.openThreads ?? (this.nativeOpen ? 0 : defaultOpenThreads());
    this.workers = threads === 0 ? undefined : new OpenWorkers(threads);
  }

  /** How `openAsync` opens large blocks: `native` (the addon, see `nativeOpenOn`), `threads` (worker threads), `inline` (node:crypto here). */
  get openPath(): 'native' | 'threads' | 'inline' {
    return this.nativeOpen ? 'native' : this.workers ? 'threads' : 'inline';
  }

  /** True when `sealedRead` gives a reader (blocks under the current key id decrypted as the fs store reads them). */
  get readsWhileOpening(): boolean {
    return this.readOpen !== undefined;
  }

  /** Where the native open runs (`caller`: the loading thread; `pool`: libuv's), undefined without it. */
  get nativeOpenOn(): 'caller' | 'pool' | undefined {
    return this.nativeOpen === undefined ? undefined : this.nativeOnCaller ? 'caller' : 'pool';
  }

  /** Threads large blocks are opened on by `openAsync` (0: the caller's thread). */
  get openThreads(): number {
    return this.workers?.size ?? 0;
  }

  /**
   * A reader for one block on the fs store that opens it while reading it
   * (sealed-read.ts; pass its `fill` in the store's GetOptions), or undefined
   * without the native read. Opens only blobs under the current key id.
   */
  sealedRead(blockKey: Uint8Array, tenantSalt: string): SealedRead | undefined {
    if (this.readOpen === undefined) return undefined;
    assertBlockKey(blockKey);
    const keyId = this.keyring.currentKeyId;
    const prefix = new Uint8Array(SEAL_HEADER_BYTES);
    writeSealHeader(prefix, keyId);
    return new SealedRead(this.readOpen, this.keyring.tenantKey(keyId, tenantSalt)!.export(), prefix.subarray(0, SEAL_NONCE_OFFSET), blockKey.slice());
  }

  /** Stops the open threads (they are unref'd, so a process exits without this). */
  async close(): Promise<void> {
    await this.workers?.close();
  }

  /** Seals `plain` (an encoded block) stored under `blockKey` for the tenant with `tenantSalt`, under the current key id. */
  seal(plain: Uint8Array, blockKey: Uint8Array, tenantSalt: string): Uint8Array {
    assertBlockKey(blockKey);
    const keyId = this.keyring.currentKeyId;
    const key = this.keyring.tenantKey(keyId, tenantSalt)!;
    const out = Buffer.allocUnsafeSlow(plain.byteLength + SEAL_OVERHEAD_BYTES);
    this.nonces.next(out, SEAL_NONCE_OFFSET);
    writeSealHeader(out, keyId);
    markSealedContent(out, plain);
    const cipher = createCipheriv('aes-256-gcm', key, out.subarray(SEAL_NONCE_OFFSET, SEAL_NONCE_OFFSET + SEAL_NONCE_BYTES), { authTagLength: SEAL_TAG_BYTES });
    cipher.setAAD(this.associatedData(out, blockKey));
    let at = SEAL_HEADER_BYTES;
    for (let from = 0; from < plain.byteLength; from += SEAL_CHUNK_BYTES) {
      const piece = cipher.update(plain.subarray(from, Math.min(plain.byteLength, from + SEAL_CHUNK_BYTES)));
      out.set(piece, at);
      at += piece.byteLength;
    }
    const tail = cipher.final(); // empty for GCM; kept for completeness
    out.set(tail, at);
    at += tail.byteLength;
    out.set(cipher.getAuthTag(), at);
    return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
  }

  /** The encoded block inside `sealed`, after its tag verified against `blockKey` and the tenant's key. */
  open(sealed: Uint8Array, blockKey: Uint8Array, tenantSalt: string): Uint8Array {
    assertBlockKey(blockKey);
    const header = readSealHeader(sealed);
    const key = this.keyring.tenantKey(header.keyId, tenantSalt);
    if (key === undefined) {
      throw new SealError('KVT_ERR_SEAL_UNKNOWN_KEY', `block sealed under key id ${header.keyId}, which this keyring (ids ${this.keyring.keyIds.join(', ')}) does not hold; keep an old id until its blocks expire`);
    }
    const tagAt = sealed.byteLength - SEAL_TAG_BYTES;
    const decipher = createDecipheriv('aes-256-gcm', key, header.nonce, { authTagLength: SEAL_TAG_BYTES });
    decipher.setAAD(this.associatedData(sealed, blockKey));
    decipher.setAuthTag(sealed.subarray(tagAt));
    const plain = decipher.update(sealed.subarray(SEAL_HEADER_BYTES, tagAt));
    try {
      decipher.final();
    } catch {
      plain.fill(0); // unauthenticated plaintext never leaves here
      throw new SealError('KVT_ERR_SEAL_AUTH_FAILED', 'sealed block failed authentication: tampered, stored under another key, or sealed for another tenant');
    }
    return new Uint8Array(plain.buffer, plain.byteOffset, plain.byteLength);
  }

  /**
   * As `open`, but decrypts over the ciphertext inside `sealed` and returns a
   * view of it: no fresh buffer for the block (its page faults cost as much
   * as the decryption). For the load path, which owns what `BlobStore.get`
   * returned; `sealed` is consumed (zeroed past the header if the tag fails,
   * so no unauthenticated plaintext stays behind).
   */
  openInPlace(sealed: Uint8Array, blockKey: Uint8Array, tenantSalt: string): Uint8Array {
    assertBlockKey(blockKey);
    const header = readSealHeader(sealed);
    const key = this.keyring.tenantKey(header.keyId, tenantSalt);
    if (key === undefined) return this.open(sealed, blockKey, tenantSalt); // throws KVT_ERR_SEAL_UNKNOWN_KEY
    const tagAt = sealed.byteLength - SEAL_TAG_BYTES;
    const decipher = createDecipheriv('aes-256-gcm', key, header.nonce, { authTagLength: SEAL_TAG_BYTES });
    decipher.setAAD(this.associatedData(sealed, blockKey));
    decipher.setAuthTag(sealed.subarray(tagAt));
    // Each piece is written back over the ciphertext it came from (same length, already consumed), while in cache.
    for (let from = SEAL_HEADER_BYTES; from < tagAt; from += SEAL_CHUNK_BYTES) {
      sealed.set(decipher.update(sealed.subarray(from, Math.min(tagAt, from + SEAL_CHUNK_BYTES))), from);
    }
    try {
      decipher.final();
    } catch {
      sealed.fill(0, SEAL_HEADER_BYTES, tagAt);
      throw new SealError('KVT_ERR_SEAL_AUTH_FAILED', 'sealed block failed authentication: tampered, stored under another key, or sealed for another tenant');
    }
    return sealed.subarray(SEAL_HEADER_BYTES, tagAt);
  }

  /**
   * As `openInPlace`, with large blocks decrypted on a thread (the load path reads
   * several blocks at once, so their decryption overlaps). Same checks, same
   * errors; a failed thread falls back to opening here.
   */
  async openAsync(sealed: Uint8Array, blockKey: Uint8Array, tenantSalt: string): Promise<Uint8Array> {
    if (this.nativeOpen !== undefined && sealed.byteLength >= NATIVE_MIN_BYTES) return this.openNative(this.nativeOpen, sealed, blockKey, tenantSalt);
    const workers = this.workers;
    if (workers === undefined || !workers.usable || sealed.byteLength < OFFLOAD_MIN_BYTES) return this.openInPlace(sealed, blockKey, tenantSalt);
    assertBlockKey(blockKey);
    const header = readSealHeader(sealed);
    const key = this.keyring.tenantKey(header.keyId, tenantSalt);
    if (key === undefined) return this.open(sealed, blockKey, tenantSalt); // throws KVT_ERR_SEAL_UNKNOWN_KEY
    let plain: Uint8Array | null;
    try {
      plain = await workers.open(sealed.subarray(SEAL_HEADER_BYTES), key.export(), header.nonce, Buffer.from(this.associatedData(sealed, blockKey)));
    } catch {
      return this.openInPlace(sealed, blockKey, tenantSalt);
    }
    if (plain === null) throw new SealError('KVT_ERR_SEAL_AUTH_FAILED', 'sealed block failed authentication: tampered, stored under another key, or sealed for another tenant');
    return plain;
  }

  /** `openInPlace` with the decryption on libuv's pool; `sealed` must not be touched until it settles (the load path owns it). */
  private async openNative(native: NativeOpen, sealed: Uint8Array, blockKey: Uint8Array, tenantSalt: string): Promise<Uint8Array> {
    assertBlockKey(blockKey);
    const header = readSealHeader(sealed);
    const key = this.keyring.tenantKey(header.keyId, tenantSalt);
    if (key === undefined) return this.open(sealed, blockKey, tenantSalt); // throws KVT_ERR_SEAL_UNKNOWN_KEY
    const tagAt = sealed.byteLength - SEAL_TAG_BYTES;
    const body = sealed.subarray(SEAL_HEADER_BYTES, tagAt);
    // key, nonce, AAD and tag are copied by the call itself, so the shared AAD scratch is free again at once.
    const args = [body, key.export(), header.nonce, this.associatedData(sealed, blockKey), sealed.subarray(tagAt)] as const;
    if (!(this.nativeOnCaller ? native.openSync(...args) : await native.open(...args))) {
      throw new SealError('KVT_ERR_SEAL_AUTH_FAILED', 'sealed block failed authentication: tampered, stored under another key, or sealed for another tenant');
    }
    return body;
  }

  private associatedData(envelope: Uint8Array, blockKey: Uint8Array): Buffer {
    this.aad.set(envelope.subarray(0, SEAL_HEADER_BYTES), 0);
    this.aad.set(blockKey, SEAL_HEADER_BYTES);
    return this.aad;
  }
}

function assertBlockKey(blockKey: Uint8Array): void {
  if (!(blockKey instanceof Uint8Array) || blockKey.byteLength !== BLOCK_KEY_BYTES) {
    throw new SealError('KVT_ERR_SEAL_MALFORMED', `the block key bound to an envelope is ${BLOCK_KEY_BYTES} bytes, got ${blockKey?.byteLength}`);
  }
}
