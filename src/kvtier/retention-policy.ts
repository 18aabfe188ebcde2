import { BLOCK_CODECS, type BlockCodecName } from './codecs/kv-codecs.ts';
import { PolicyError } from './errors.ts';

export const HOUR_MS = 60 * 60 * 1000;
export const DAY_MS = 24 * HOUR_MS;

/** One retention class: how long a block lives after its last use, and optionally a byte quota for the class. */
export interface RetentionClassSpec {
  ttlMs: number;
  quotaBytes?: number;
  /** How this class's new blocks are stored (codecs/kv-codecs.ts); absent = the document's `codec`. */
  codec?: BlockCodecName;
}

/** Per-tenant override: other TTLs for some classes and/or a byte quota for the tenant. */
export interface TenantOverride {
  ttlMs?: Record<string, number>;
  quotaBytes?: number;
}

/**
 * The stored policy document. `version` is bumped by the policy store on each
 * change; every process compares it to see a change.
 */
export interface RetentionPolicyDoc {
  version: number;
  updatedAt: number;
  /** Class used when a request names none (the serve layer normally decides). */
  defaultClass: string;
  classes: Record<string, RetentionClassSpec>;
  /** Global byte quota over all blocks; absent = unlimited. */
  quotaBytes?: number;
  tenants: Record<string, TenantOverride>;
  /** How new blocks are stored unless their class says otherwise; absent = none. Blocks already stored keep their codec. */
  codec?: BlockCodecName;
  /**
   * Longest TTL a client's retention hint (prompt_cache_retention, cache_control ttl) may set for its blocks;
   * absent = any hint up to the class TTL. A hint only ever shortens the class TTL (the plane keeps it as a cap).
   */
  clientTtlMaxMs?: number;
}

/** DeepSeek's published retention: agent traffic 3 days, chat 7 days, from the last use. */
export function defaultPolicyDoc(): RetentionPolicyDoc {
  return {
    version: 1,
    updatedAt: 0,
    defaultClass: 'chat',
    classes: { agent: { ttlMs: 3 * DAY_MS }, chat: { ttlMs: 7 * DAY_MS } },
    tenants: {},
  };
}

const CLASS_NAME = /^[a-z][a-z0-9_-]{0,31}$/;
const MAX_TENANT_LENGTH = 128;

/** A scope of the byte accounting: everything, one class, or one tenant. */
export type QuotaScope = { kind: 'global' } | { kind: 'class'; name: string } | { kind: 'tenant'; name: string };

/** Validated, read-only view of a policy document with the lookups the hot path needs. */
export class RetentionPolicy {
  readonly doc: Readonly<RetentionPolicyDoc>;
  /** Smallest TTL of any class under any tenant: an entry used more recently than this is live without further checks. */
  readonly minTtlMs: number;

  constructor(doc: RetentionPolicyDoc) {
    this.doc = Object.freeze(structuredClone(validatePolicyDoc(doc)));
    let min = Infinity;
    for (const spec of Object.values(this.doc.classes)) min = Math.min(min, spec.ttlMs);
    for (const tenant of Object.values(this.doc.tenants)) for (const ttl of Object.values(tenant.ttlMs ?? {})) min = Math.min(min, ttl);
    this.minTtlMs = min;
  }

  get version(): number {
    return this.doc.version;
  }

  hasClass(name: string): boolean {
    return Object.hasOwn(this.doc.classes, name);
  }

  /** Throws KVT_ERR_POLICY_UNKNOWN_CLASS naming the known classes. */
  assertClass(name: string): void {
    if (!this.hasClass(name)) {
      throw new PolicyError(
        'KVT_ERR_POLICY_UNKNOWN_CLASS',
        `unknown traffic class ${JSON.stringify(name)}; known: ${Object.keys(this.doc.classes).join(', ')} (add one with policy.update)`,
      );
    }
  }

  /** TTL for blocks of `trafficClass` written or used by `tenant`; a class deleted since falls back to the default class. */
  ttlMs(trafficClass: string, tenant: string): number {
    const override = Object.hasOwn(this.doc.tenants, tenant) ? this.doc.tenants[tenant].ttlMs : undefined;
    if (override !== undefined && Object.hasOwn(override, trafficClass)) return override[trafficClass];
    const spec = Object.hasOwn(this.doc.classes, trafficClass) ? this.doc.classes[trafficClass] : this.doc.classes[this.doc.defaultClass];
    return spec.ttlMs;
  }

  /** The TTL cap to record for a client's hint: the hint, capped by `clientTtlMaxMs`. */
  clientTtlMs(hintMs: number): number {
    const max = this.doc.clientTtlMaxMs;
    return max !== undefined && max < hintMs ? max : hintMs;
  }

  /** The codec new blocks of `trafficClass` are stored under (a class deleted since falls back to the default class). */
  codecFor(trafficClass: string): BlockCodecName {
    const spec = Object.hasOwn(this.doc.classes, trafficClass) ? this.doc.classes[trafficClass] : this.doc.classes[this.doc.defaultClass];
    return spec.codec ?? this.doc.codec ?? 'none';
  }

  /** Every scope with a byte quota, with that quota. */
  quotas(): { scope: QuotaScope; quotaBytes: number }[] {
    const out: { scope: QuotaScope; quotaBytes: number }[] = [];
    if (this.doc.quotaBytes !== undefined) out.push({ scope: { kind: 'global' }, quotaBytes: this.doc.quotaBytes });
    for (const [name, spec] of Object.entries(this.doc.classes)) {
      if (spec.quotaBytes !== undefined) out.push({ scope: { kind: 'class', name }, quotaBytes: spec.quotaBytes });
    }
    for (const [name, spec] of Object.entries(this.doc.tenants)) {
      if (spec.quotaBytes !== undefined) out.push({ scope: { kind: 'tenant', name }, quotaBytes: spec.quotaBytes });
    }
    return out;
  }

  toJSON(): RetentionPolicyDoc {
    return structuredClone(this.doc) as RetentionPolicyDoc;
  }
}

/** Checks every field; throws KVT_ERR_POLICY_INVALID naming the field and what is allowed. */
export function validatePolicyDoc(doc: RetentionPolicyDoc): RetentionPolicyDoc {
  const invalid = (what: string): never => {
    throw new PolicyError('KVT_ERR_POLICY_INVALID', `invalid retention policy: ${what}`);
  };
  if (typeof doc !== 'object' || doc === null) invalid('the policy must be an object');
  if (!Number.isInteger(doc.version) || doc.version < 1) invalid(`version must be a positive integer, got ${doc.version}`);
  if (typeof doc.updatedAt !== 'number' || !Number.isFinite(doc.updatedAt)) invalid('updatedAt must be a number (ms since epoch)');
  if (typeof doc.classes !== 'object' || doc.classes === null) invalid('classes must be an object of {ttlMs, quotaBytes?}');
  const classNames = Object.keys(doc.classes);
  if (classNames.length === 0) invalid('at least one class is needed');
  for (const name of classNames) {
    if (!CLASS_NAME.test(name)) invalid(`class name ${JSON.stringify(name)}: use 1-32 of [a-z0-9_-], starting with a letter`);
    const spec = doc.classes[name];
    checkTtl(`classes.${name}.ttlMs`, spec?.ttlMs, invalid);
    if (spec.quotaBytes !== undefined) checkQuota(`classes.${name}.quotaBytes`, spec.quotaBytes, invalid);
    if (spec.codec !== undefined) checkCodec(`classes.${name}.codec`, spec.codec, invalid);
  }
  if (doc.codec !== undefined) checkCodec('codec', doc.codec, invalid);
  if (!Object.hasOwn(doc.classes, doc.defaultClass)) invalid(`defaultClass ${JSON.stringify(doc.defaultClass)} is not one of ${classNames.join(', ')}`);
  if (doc.quotaBytes !== undefined) checkQuota('quotaBytes', doc.quotaBytes, invalid);
  if (doc.clientTtlMaxMs !== undefined) checkTtl('clientTtlMaxMs', doc.clientTtlMaxMs, invalid);
  if (typeof doc.tenants !== 'object' || doc.tenants === null) invalid('tenants must be an object (use {} for none)');
  for (const [tenant, override] of Object.entries(doc.tenants)) {
    if (tenant.length === 0 || tenant.length > MAX_TENANT_LENGTH || tenant.includes('\0')) invalid(`tenant name ${JSON.stringify(tenant)}`);
    for (const [name, ttl] of Object.entries(override.ttlMs ?? {})) {
      if (!Object.hasOwn(doc.classes, name)) invalid(`tenants.${tenant}.ttlMs names unknown class ${JSON.stringify(name)}`);
      checkTtl(`tenants.${tenant}.ttlMs.${name}`, ttl, invalid);
    }
    if (override.quotaBytes !== undefined) checkQuota(`tenants.${tenant}.quotaBytes`, override.quotaBytes, invalid);
  }
  return doc;
}

function checkTtl(field: string, value: unknown, invalid: (what: string) => never): void {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1000 || value > 3650 * DAY_MS) {
    invalid(`${field} must be an integer number of ms between 1 s and 10 years, got ${String(value)}`);
  }
}

function checkCodec(field: string, value: unknown, invalid: (what: string) => never): void {
  if (!(BLOCK_CODECS as readonly unknown[]).includes(value)) invalid(`${field} must be one of ${BLOCK_CODECS.join(', ')}, got ${JSON.stringify(value)}`);
}

function checkQuota(field: string, value: unknown, invalid: (what: string) => never): void {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    invalid(`${field} must be a non-negative integer number of bytes, got ${String(value)}`);
  }
}

export function assertTenantName(tenant: string): void {
  if (typeof tenant !== 'string' || tenant.length === 0 || tenant.length > MAX_TENANT_LENGTH || tenant.includes('\0')) {
    throw new PolicyError('KVT_ERR_POLICY_INVALID', `tenant must be 1-${MAX_TENANT_LENGTH} characters without NUL, got ${JSON.stringify(tenant)}`);
  }
}
