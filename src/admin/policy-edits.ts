/**
 * Admin edits of the retention policy as PolicyStore changes. Each is applied
 * inside the store's atomic read-modify-write, so two operators editing at
 * once never lose an edit; the store validates the result.
 */
import { BLOCK_CODECS, defaultPolicyDoc, isBlockCodecName, PolicyError, type BlockCodecName, type PolicyChange, type RetentionPolicyDoc } from '../kvtier/index.ts';
import { AdminError } from './admin-error.ts';
import type { PolicyEdit } from './admin-types.ts';

function knownClass(doc: RetentionPolicyDoc, name: string, hint: string): void {
  if (!Object.hasOwn(doc.classes, name)) {
    throw new PolicyError('KVT_ERR_POLICY_UNKNOWN_CLASS', `unknown class "${name}"; known: ${Object.keys(doc.classes).join(', ')}${hint}`);
  }
}

export function policyChangeFor(edit: PolicyEdit): PolicyChange {
  switch (edit.op) {
    case 'setClass':
      return (doc) => {
        if (!edit.create) knownClass(doc, edit.name, ' (add a new one with --add)');
        else if (Object.hasOwn(doc.classes, edit.name)) throw new AdminError('KVT_ERR_ADMIN_BAD_REQUEST', `class "${edit.name}" exists already; drop --add to change it`, 'name');
        const spec = { ...(doc.classes[edit.name] ?? { ttlMs: 0 }) };
        if (edit.ttlMs !== undefined) spec.ttlMs = edit.ttlMs;
        else if (edit.create) throw new AdminError('KVT_ERR_ADMIN_BAD_REQUEST', `a new class needs a TTL (--ttl)`, 'ttlMs');
        if (edit.quotaBytes === null) delete spec.quotaBytes;
        else if (edit.quotaBytes !== undefined) spec.quotaBytes = edit.quotaBytes;
        if (edit.codec !== undefined) spec.codec = edit.codec;
        doc.classes[edit.name] = spec;
      };
    case 'setCodec':
      return (doc) => {
        if (edit.trafficClass === undefined) {
          doc.codec = edit.codec;
          return;
        }
        knownClass(doc, edit.trafficClass, '');
        doc.classes[edit.trafficClass] = { ...doc.classes[edit.trafficClass], codec: edit.codec };
      };
    case 'setTenant':
      return (doc) => {
        const override = structuredClone(doc.tenants[edit.tenant] ?? {});
        if (edit.trafficClass !== undefined) {
          knownClass(doc, edit.trafficClass, '');
          if (edit.ttlMs === undefined) throw new AdminError('KVT_ERR_ADMIN_BAD_REQUEST', 'a per-tenant class override needs a TTL (--ttl)', 'ttlMs');
          override.ttlMs = { ...override.ttlMs, [edit.trafficClass]: edit.ttlMs };
        } else if (edit.ttlMs !== undefined) {
          // No class named: the TTL applies to every class for this tenant.
          override.ttlMs = Object.fromEntries(Object.keys(doc.classes).map((name) => [name, edit.ttlMs!]));
        }
        if (edit.quotaBytes === null) delete override.quotaBytes;
        else if (edit.quotaBytes !== undefined) override.quotaBytes = edit.quotaBytes;
        doc.tenants[edit.tenant] = override;
      };
    case 'reset':
      return (doc) => {
        if (edit.tenant === undefined) {
          const fresh = defaultPolicyDoc();
          return { ...fresh, version: doc.version, updatedAt: doc.updatedAt };
        }
        if (!Object.hasOwn(doc.tenants, edit.tenant)) {
          throw new AdminError('KVT_ERR_ADMIN_NOT_FOUND', `tenant "${edit.tenant}" has no override; known: ${Object.keys(doc.tenants).join(', ') || 'none'}`, 'tenant');
        }
        delete doc.tenants[edit.tenant];
      };
    case 'setClientTtlMax':
      return (doc) => {
        if (edit.ttlMs === null) delete doc.clientTtlMaxMs;
        else doc.clientTtlMaxMs = edit.ttlMs;
      };
    case 'setGlobalQuota':
      return (doc) => {
        if (edit.quotaBytes === null) delete doc.quotaBytes;
        else doc.quotaBytes = edit.quotaBytes;
      };
    default:
      throw new AdminError('KVT_ERR_ADMIN_BAD_REQUEST', `unknown policy edit ${JSON.stringify((edit as { op?: unknown }).op)}; use setClass, setTenant, setCodec, reset, setGlobalQuota or setClientTtlMax`, 'op');
  }
}

/** Checks the shape of an edit that came over HTTP before it reaches the store. */
export function parsePolicyEdit(body: unknown): PolicyEdit {
  const bad = (what: string, param: string): never => {
    throw new AdminError('KVT_ERR_ADMIN_BAD_REQUEST', `policy edit: ${what}`, param);
  };
  if (typeof body !== 'object' || body === null) bad('send a JSON object {op, …}', 'body');
  const edit = body as Record<string, unknown>;
  const optionalTtl = (): number | undefined => {
    if (edit.ttlMs === undefined) return undefined;
    if (typeof edit.ttlMs !== 'number' || !Number.isInteger(edit.ttlMs) || edit.ttlMs < 1000) bad('ttlMs must be an integer number of ms ≥ 1000', 'ttlMs');
    return edit.ttlMs as number;
  };
  const optionalQuota = (): number | null | undefined => {
    if (edit.quotaBytes === undefined || edit.quotaBytes === null) return edit.quotaBytes as null | undefined;
    if (typeof edit.quotaBytes !== 'number' || !Number.isSafeInteger(edit.quotaBytes) || edit.quotaBytes < 0) bad('quotaBytes must be a non-negative integer or null', 'quotaBytes');
    return edit.quotaBytes as number;
  };
  const name = (field: string): string => {
    const value = edit[field];
    if (typeof value !== 'string' || value === '') bad(`${field} must be a non-empty string`, field);
    return value as string;
  };
  const optionalCodec = (): BlockCodecName | undefined => {
    if (edit.codec === undefined) return undefined;
    if (!isBlockCodecName(edit.codec)) bad(`codec must be one of ${BLOCK_CODECS.join(', ')}, got ${JSON.stringify(edit.codec)}`, 'codec');
    return edit.codec as BlockCodecName;
  };
  const optionalForce = (): boolean | undefined => {
    if (edit.force === undefined) return undefined;
    if (typeof edit.force !== 'boolean') bad('force must be true or false', 'force');
    return edit.force as boolean;
  };
  switch (edit.op) {
    case 'setClass': {
      const codec = optionalCodec();
      const force = optionalForce();
      if (force !== undefined && codec === undefined) bad('force goes with codec (it overrides the codec quality gate)', 'force');
      // A codec is checked where the engine runs before it is stored; a class is created first, then given a codec.
      if (codec !== undefined && edit.create === true) bad('add the class first, then set its codec (setCodec or setClass with codec)', 'codec');
      return { op: 'setClass', name: name('name'), ttlMs: optionalTtl(), quotaBytes: optionalQuota(), create: edit.create === true, ...(codec !== undefined ? { codec } : {}), ...(force !== undefined ? { force } : {}) };
    }
    case 'setCodec': {
      const codec = optionalCodec();
      if (codec === undefined) bad(`codec is required: one of ${BLOCK_CODECS.join(', ')}`, 'codec');
      const force = optionalForce();
      return { op: 'setCodec', codec: codec!, ...(edit.trafficClass !== undefined ? { trafficClass: name('trafficClass') } : {}), ...(force !== undefined ? { force } : {}) };
    }
    case 'setTenant':
      return { op: 'setTenant', tenant: name('tenant'), trafficClass: edit.trafficClass === undefined ? undefined : name('trafficClass'), ttlMs: optionalTtl(), quotaBytes: optionalQuota() };
    case 'reset':
      return { op: 'reset', tenant: edit.tenant === undefined ? undefined : name('tenant') };
    case 'setGlobalQuota': {
      const quota = optionalQuota();
      if (quota === undefined) bad('quotaBytes is required (null removes the quota)', 'quotaBytes');
      return { op: 'setGlobalQuota', quotaBytes: quota as number | null };
    }
    case 'setClientTtlMax': {
      if (edit.ttlMs === null) return { op: 'setClientTtlMax', ttlMs: null };
      const ttl = optionalTtl();
      if (ttl === undefined) bad('ttlMs is required (null: client hints up to the class TTL)', 'ttlMs');
      return { op: 'setClientTtlMax', ttlMs: ttl as number };
    }
    default:
      return bad(`unknown op ${JSON.stringify(edit.op)}; use setClass, setTenant, setCodec, reset, setGlobalQuota or setClientTtlMax`, 'op');
  }
}
