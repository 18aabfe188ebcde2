/**
 * API keys → tenants, and each tenant's namespace salt.
 *
 *   salt(tenant) = HMAC-SHA256(server secret, "tenant\0" + tenant)   (isolated, the default)
 *   salt(shared) = HMAC-SHA256(server secret, "shared")              (keys flagged shared)
 *
 * The salt goes into the block namespace, so a tenant's prefix hashes are
 * unguessable by anyone without the secret: no tenant can hit another's
 * blocks, nor time a lookup of them. The secret is KVTIER_SECRET, else a
 * random one kept in <dataDir>/server-secret (created on first start). API
 * processes that share a cache must share the secret (same data dir or env).
 *
 * Keys file (KVTIER_API_KEYS), either JSON:
 *   {"sk-abc": "acme", "sk-def": {"tenant": "beta", "shared": true}}   or   [{"key": …, "tenant": …, "shared": …}]
 * or lines:
 *   sk-abc acme
 *   sk-def beta shared        # comments and blank lines are ignored
 * With no keys file every request is the one anonymous tenant (keys are ignored).
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { describeError, KvtError } from '../errors.ts';

export interface TenantIdentity {
  tenant: string;
  shared: boolean;
  /** Hex namespace salt. */
  saltHex: string;
  /** Scope for per-tenant state in the API process (reply memory): the salt itself. */
  scope: string;
}

interface KeyEntry {
  tenant: string;
  shared: boolean;
}

export const ANONYMOUS_TENANT = 'anonymous';

/** Tenants whose salt is kept (the keys file's, in practice); past it the memo starts over. */
const MAX_REMEMBERED_SALTS = 4096;

export class TenantAuth {
  private readonly salts = new Map<string, string>();

  private constructor(
    private readonly keys: Map<string, KeyEntry> | null,
    private readonly secret: Buffer,
    private readonly adminToken: string | null,
  ) {}

  static load(options: { apiKeysFile: string | null; adminToken: string | null; dataDir: string; secret?: string }): TenantAuth {
    const keys = options.apiKeysFile ? parseKeysFile(options.apiKeysFile) : null;
    return new TenantAuth(keys, loadSecret(options.dataDir, options.secret ?? process.env.KVTIER_SECRET), options.adminToken);
  }

  get requiresKeys(): boolean {
    return this.keys !== null;
  }

  /** Authorization: Bearer <key>, or x-api-key (the Anthropic SDK's header). */
  identify(headers: Record<string, string | string[] | undefined>): TenantIdentity {
    if (!this.keys) return this.identity(ANONYMOUS_TENANT, false);
    const key = bearer(headers.authorization) ?? single(headers['x-api-key']);
    if (!key) throw new KvtError('KVT_ERR_AUTH_MISSING_KEY', 'no API key: send Authorization: Bearer <key> or x-api-key: <key>', { param: 'authorization' });
    const entry = this.keys.get(key);
    if (!entry) throw new KvtError('KVT_ERR_AUTH_BAD_KEY', 'the API key is not known to this server', { param: 'authorization' });
    return this.identity(entry.tenant, entry.shared);
  }

  identity(tenant: string, shared: boolean): TenantIdentity {
    const name = shared ? 'shared' : `tenant\u0000${tenant}`;
    // An HMAC per request was ~0.06 ms of the API's main thread; a tenant's salt never changes while the secret does not.
    let salt = this.salts.get(name);
    if (salt === undefined) {
      salt = createHmac('sha256', this.secret).update(name).digest('hex').slice(0, 32);
      if (this.salts.size >= MAX_REMEMBERED_SALTS) this.salts.clear();
      this.salts.set(name, salt);
    }
    return { tenant, shared, saltHex: salt, scope: salt };
  }

  checkAdmin(headers: Record<string, string | string[] | undefined>): void {
    if (this.adminToken === null) throw new KvtError('KVT_ERR_AUTH_ADMIN_DISABLED', '/admin/* is disabled: start the server with KVTIER_ADMIN_TOKEN set');
    const given = bearer(headers.authorization) ?? single(headers['x-admin-token']);
    if (!given || !constantTimeEqual(given, this.adminToken)) throw new KvtError('KVT_ERR_AUTH_ADMIN_TOKEN', 'missing or wrong admin token', { param: 'authorization' });
  }
}

function bearer(value: string | string[] | undefined): string | undefined {
  const header = single(value);
  if (!header) return undefined;
  const match = /^Bearer\s+(.+)$/i.exec(header.trim());
  return match ? match[1].trim() : undefined;
}

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function constantTimeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

function loadSecret(dataDir: string, fromEnv: string | undefined): Buffer {
  if (fromEnv) return Buffer.from(fromEnv);
  const file = join(dataDir, 'server-secret');
  try {
    return Buffer.from(readFileSync(file, 'utf8').trim(), 'hex');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  mkdirSync(dataDir, { recursive: true });
  const secret = randomBytes(32).toString('hex');
  try {
    writeFileSync(file, secret + '\n', { mode: 0o600, flag: 'wx' });
  } catch (error) {
    // Another process created it first: use theirs, so both salt alike.
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return Buffer.from(readFileSync(file, 'utf8').trim(), 'hex');
  }
  return Buffer.from(secret, 'hex');
}

export function parseKeysFile(path: string): Map<string, KeyEntry> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new KvtError('KVT_ERR_CONFIG_API_KEYS', `cannot read KVTIER_API_KEYS file ${path}: ${describeError(error).message}`, { param: 'KVTIER_API_KEYS' });
  }
  const keys = new Map<string, KeyEntry>();
  const add = (key: unknown, tenant: unknown, shared: unknown, where: string): void => {
    if (typeof key !== 'string' || key === '' || typeof tenant !== 'string' || tenant === '') {
      throw new KvtError('KVT_ERR_CONFIG_API_KEYS', `${path} ${where}: each entry needs a non-empty key and tenant`, { param: 'KVTIER_API_KEYS' });
    }
    keys.set(key, { tenant, shared: shared === true || shared === 'shared' });
  };
  const trimmed = text.trim();
  if (trimmed.startsWith('{') || trimmed.startsWith('[')) {
    let value: unknown;
    try {
      value = JSON.parse(trimmed);
    } catch (error) {
      throw new KvtError('KVT_ERR_CONFIG_API_KEYS', `${path} is not valid JSON: ${describeError(error).message}`, { param: 'KVTIER_API_KEYS' });
    }
    if (Array.isArray(value)) {
      value.forEach((entry: { key?: unknown; tenant?: unknown; shared?: unknown }, i) => add(entry?.key, entry?.tenant, entry?.shared, `entry ${i}`));
    } else {
      for (const [key, entry] of Object.entries(value as Record<string, unknown>)) {
        if (typeof entry === 'string') add(key, entry, false, `key ${key}`);
        else add(key, (entry as { tenant?: unknown })?.tenant, (entry as { shared?: unknown })?.shared, `key ${key}`);
      }
    }
  } else {
    text.split('\n').forEach((raw, i) => {
      const line = raw.replace(/#.*$/, '').trim();
      if (line === '') return;
      const [key, tenant, flag, ...rest] = line.split(/\s+/);
      if (rest.length > 0 || (flag !== undefined && flag !== 'shared')) {
        throw new KvtError('KVT_ERR_CONFIG_API_KEYS', `${path} line ${i + 1}: expected "key tenant [shared]"`, { param: 'KVTIER_API_KEYS' });
      }
      add(key, tenant, flag, `line ${i + 1}`);
    });
  }
  if (keys.size === 0) throw new KvtError('KVT_ERR_CONFIG_API_KEYS', `${path} lists no keys`, { param: 'KVTIER_API_KEYS' });
  return keys;
}

/** Traffic class: x-kvtier-class header, else body kvtier_class, else agent when tools/tool results are present, else chat. */
export function resolveTrafficClass(header: string | string[] | undefined, bodyField: unknown, agentic: boolean, knownClasses: readonly string[]): string {
  const explicit = single(header) ?? (typeof bodyField === 'string' ? bodyField : undefined);
  if (explicit !== undefined) {
    if (!knownClasses.includes(explicit)) {
      const param = single(header) !== undefined ? 'x-kvtier-class' : 'kvtier_class';
      throw new KvtError('KVT_ERR_REQUEST_UNKNOWN_CLASS', `${param} "${explicit}" is not a traffic class; known: ${knownClasses.join(', ')}`, { param });
    }
    return explicit;
  }
  return agentic ? 'agent' : 'chat';
}
