import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { describeError, ERROR_REGISTRY, specFor } from '../../../src/errors.ts';
import { parseKeysFile, resolveTrafficClass, TenantAuth } from '../../../src/serve/index.ts';

const dir = () => mkdtempSync(join(tmpdir(), 'kvt-auth-'));

describe('API keys and tenants', () => {
  it('reads JSON and line keys files', () => {
    const d = dir();
    writeFileSync(join(d, 'k.json'), JSON.stringify({ a: 'acme', b: { tenant: 'beta', shared: true } }));
    writeFileSync(join(d, 'k.txt'), '# comment\nsk-1 one\n\nsk-2 two shared\n');
    expect([...parseKeysFile(join(d, 'k.json'))]).toEqual([['a', { tenant: 'acme', shared: false }], ['b', { tenant: 'beta', shared: true }]]);
    expect(parseKeysFile(join(d, 'k.txt')).get('sk-2')).toEqual({ tenant: 'two', shared: true });
  });

  it('rejects bad keys files with KVT_ERR_CONFIG_API_KEYS', () => {
    const d = dir();
    writeFileSync(join(d, 'bad.txt'), 'sk-1 one extra words\n');
    expect(() => parseKeysFile(join(d, 'bad.txt'))).toThrow(expect.objectContaining({ code: 'KVT_ERR_CONFIG_API_KEYS' }));
    expect(() => parseKeysFile(join(d, 'missing.txt'))).toThrow(expect.objectContaining({ code: 'KVT_ERR_CONFIG_API_KEYS' }));
  });

  it('salts differ per tenant, are stable per secret, and shared keys share one salt', () => {
    const d = dir();
    writeFileSync(join(d, 'k.txt'), 'a acme\nb beta\nc one shared\nd two shared\n');
    const auth = TenantAuth.load({ apiKeysFile: join(d, 'k.txt'), adminToken: null, dataDir: d });
    const a = auth.identify({ authorization: 'Bearer a' });
    const b = auth.identify({ 'x-api-key': 'b' });
    expect(a.tenant).toBe('acme');
    expect(a.saltHex).not.toBe(b.saltHex);
    expect(auth.identify({ authorization: 'Bearer c' }).saltHex).toBe(auth.identify({ authorization: 'Bearer d' }).saltHex);
    const again = TenantAuth.load({ apiKeysFile: join(d, 'k.txt'), adminToken: null, dataDir: d });
    expect(again.identify({ authorization: 'Bearer a' }).saltHex).toBe(a.saltHex);
    const otherSecret = TenantAuth.load({ apiKeysFile: join(d, 'k.txt'), adminToken: null, dataDir: dir() });
    expect(otherSecret.identify({ authorization: 'Bearer a' }).saltHex).not.toBe(a.saltHex);
  });

  it('without a keys file every request is the anonymous tenant', () => {
    const auth = TenantAuth.load({ apiKeysFile: null, adminToken: null, dataDir: dir() });
    expect(auth.identify({}).tenant).toBe('anonymous');
    expect(() => auth.checkAdmin({ authorization: 'Bearer x' })).toThrow(expect.objectContaining({ code: 'KVT_ERR_AUTH_ADMIN_DISABLED' }));
  });
});

describe('traffic class', () => {
  const known = ['agent', 'chat'];
  it('header, then body, then agent when tools are present, else chat', () => {
    expect(resolveTrafficClass('chat', 'agent', true, known)).toBe('chat');
    expect(resolveTrafficClass(undefined, 'agent', false, known)).toBe('agent');
    expect(resolveTrafficClass(undefined, undefined, true, known)).toBe('agent');
    expect(resolveTrafficClass(undefined, undefined, false, known)).toBe('chat');
  });
  it('an unknown class is a 400 naming its source', () => {
    expect(() => resolveTrafficClass('bulk', undefined, false, known)).toThrow(expect.objectContaining({ code: 'KVT_ERR_REQUEST_UNKNOWN_CLASS', param: 'x-kvtier-class' }));
  });
});

describe('error registry', () => {
  it('every code has a status and a hint', () => {
    for (const [code, spec] of Object.entries(ERROR_REGISTRY)) {
      expect(code).toMatch(/^KVT_ERR_[A-Z_]+$/);
      expect(spec.status).toBeGreaterThanOrEqual(400);
      expect(spec.hint.length).toBeGreaterThan(10);
    }
  });
  it('maps lower layers by code', () => {
    expect(specFor('KVT_ERR_STORAGE_UNREACHABLE').status).toBe(503);
    expect(specFor('KVT_ERR_STORAGE_BAD_URL').status).toBe(500);
    expect(specFor('KVT_ERR_ENGINE_CONTEXT_OVERFLOW').status).toBe(400);
    expect(specFor('KVT_ERR_ENGINE_POOL_EXHAUSTED').status).toBe(503);
    expect(specFor('KVT_ERR_GGUF_BAD_MAGIC').status).toBe(500);
    expect(describeError(new Error('boom')).code).toBe('KVT_ERR_INTERNAL');
    expect(describeError({ code: 'KVT_ERR_BLOCK_PAYLOAD_CHECKSUM', message: 'bad' }).status).toBe(500);
  });
});
