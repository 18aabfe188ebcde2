import { createSecretKey, hkdfSync, type KeyObject } from 'node:crypto';

import { isKeyId } from './seal-envelope.ts';
import { SealError } from './seal-errors.ts';

/** Shortest secret accepted, in characters (e.g. `openssl rand -hex 32` gives 64). */
export const MIN_SECRET_CHARS = 32;
const TENANT_KEY_CACHE = 4096;

/**
 * The server's encryption secrets by key id: plain data, so it crosses a
 * worker_threads boundary in the engine thread's init message.
 */
export interface SealKeyringSpec {
  /** The id new blocks are sealed under. */
  currentKeyId: number;
  /** Every id blocks may still be sealed under, the current one included. Drop an id only after its blocks have expired. */
  keys: { id: number; secret: string }[];
}

/** `KVTIER_ENCRYPTION_SECRET`: one secret, key id 1. */
export function keyringFromSecret(secret: string): SealKeyringSpec {
  const spec = { currentKeyId: 1, keys: [{ id: 1, secret }] };
  validateKeyringSpec(spec);
  return spec;
}

/**
 * `KVTIER_ENCRYPTION_KEYRING` file: `{"current": 2, "keys": {"1": "<old secret>", "2": "<new secret>"}}`.
 * Rotation: add a new id, make it current; remove the old id once every block sealed under it has expired.
 */
export function parseKeyringJson(text: string, where: string): SealKeyringSpec {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new SealError('KVT_ERR_SEAL_BAD_CONFIG', `${where} is not valid JSON: ${(error as Error).message}`);
  }
  const doc = value as { current?: unknown; keys?: unknown };
  if (typeof doc !== 'object' || doc === null || typeof doc.keys !== 'object' || doc.keys === null || Array.isArray(doc.keys)) {
    throw new SealError('KVT_ERR_SEAL_BAD_CONFIG', `${where}: expected {"current": <id>, "keys": {"<id>": "<secret>", …}}`);
  }
  const keys = Object.entries(doc.keys as Record<string, unknown>).map(([id, secret]) => {
    if (!/^[1-9][0-9]*$/.test(id)) throw new SealError('KVT_ERR_SEAL_BAD_CONFIG', `${where}: key id "${id}" is not a whole number ≥ 1`);
    if (typeof secret !== 'string') throw new SealError('KVT_ERR_SEAL_BAD_CONFIG', `${where}: the secret of key id ${id} must be a string`);
    return { id: Number(id), secret };
  });
  const spec = { currentKeyId: doc.current as number, keys };
  validateKeyringSpec(spec, where);
  return spec;
}

export function validateKeyringSpec(spec: SealKeyringSpec, where = 'keyring'): void {
  if (!Array.isArray(spec?.keys) || spec.keys.length === 0) throw new SealError('KVT_ERR_SEAL_BAD_CONFIG', `${where} holds no keys`);
  const seen = new Set<number>();
  for (const { id, secret } of spec.keys) {
    if (!isKeyId(id)) throw new SealError('KVT_ERR_SEAL_BAD_CONFIG', `${where}: key id ${id} is not a u32 ≥ 1`);
    if (seen.has(id)) throw new SealError('KVT_ERR_SEAL_BAD_CONFIG', `${where}: key id ${id} is listed twice`);
    seen.add(id);
    if (typeof secret !== 'string' || secret.length < MIN_SECRET_CHARS) {
      throw new SealError('KVT_ERR_SEAL_BAD_CONFIG', `${where}: the secret of key id ${id} is shorter than ${MIN_SECRET_CHARS} characters; make one with: openssl rand -hex 32`);
    }
  }
  if (!seen.has(spec.currentKeyId)) {
    throw new SealError('KVT_ERR_SEAL_BAD_CONFIG', `${where}: the current key id ${spec.currentKeyId} is not among its keys (${[...seen].join(', ')})`);
  }
}

/**
 * Per-tenant AES-256 keys derived from the keyring:
 *
 * ```
 * key(id, salt) = HKDF-SHA256(ikm = secret[id], salt = utf8(tenant salt), info = "kvtier seal v1 aes-256-gcm key " ‖ id, 32 bytes)
 * ```
 *
 * The tenant salt is the namespace salt (src/serve/auth.ts): isolated tenants
 * get their own key; tenants flagged shared share one salt, hence one key.
 * Derived keys are memoised (a bounded map; HKDF costs ~2 HMACs).
 */
export class SealKeyring {
  readonly currentKeyId: number;
  private readonly secrets = new Map<number, Buffer>();
  private readonly derived = new Map<string, KeyObject>();

  constructor(spec: SealKeyringSpec) {
    validateKeyringSpec(spec);
    this.currentKeyId = spec.currentKeyId;
    for (const { id, secret } of spec.keys) this.secrets.set(id, Buffer.from(secret, 'utf8'));
  }

  get keyIds(): number[] {
    return [...this.secrets.keys()].sort((a, b) => a - b);
  }

  has(keyId: number): boolean {
    return this.secrets.has(keyId);
  }

  /** The tenant's key under `keyId`; undefined when the keyring lacks that id. */
  tenantKey(keyId: number, tenantSalt: string): KeyObject | undefined {
    const memo = `${keyId}\u0000${tenantSalt}`;
    const hit = this.derived.get(memo);
    if (hit !== undefined) return hit;
    const secret = this.secrets.get(keyId);
    if (secret === undefined) return undefined;
    const bytes = Buffer.from(hkdfSync('sha256', secret, Buffer.from(tenantSalt, 'utf8'), `kvtier seal v1 aes-256-gcm key ${keyId}`, 32));
    const key = createSecretKey(bytes);
    bytes.fill(0);
    if (this.derived.size >= TENANT_KEY_CACHE) this.derived.delete(this.derived.keys().next().value!);
    this.derived.set(memo, key);
    return key;
  }
}
