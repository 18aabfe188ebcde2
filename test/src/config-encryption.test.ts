/** KVTIER_ENCRYPTION_SECRET / KVTIER_ENCRYPTION_KEYRING → config.encryption (off by default); bad values stop the start naming the variable. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { loadConfig } from '../../src/config.ts';

const SECRET = '0123456789abcdef0123456789abcdef-config';

function failure(run: () => unknown): { code?: string; param?: string; message: string } {
  try {
    run();
  } catch (error) {
    return { code: (error as { code?: string }).code, param: (error as { param?: string }).param, message: (error as Error).message };
  }
  throw new Error('expected a config error');
}

describe('encryption at rest config', () => {
  it('is off by default', () => {
    expect(loadConfig({}).encryption).toBeNull();
  });

  it('one secret is key id 1; the flag works too', () => {
    expect(loadConfig({ KVTIER_ENCRYPTION_SECRET: SECRET }).encryption).toEqual({ currentKeyId: 1, keys: [{ id: 1, secret: SECRET }] });
    expect(loadConfig({}, ['--encryption-secret', SECRET]).encryption?.currentKeyId).toBe(1);
  });

  it('a keyring file gives every id and the current one', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'kvtier-keyring-')), 'keyring.json');
    writeFileSync(file, JSON.stringify({ current: 3, keys: { 2: SECRET + '-2', 3: SECRET + '-3' } }));
    const spec = loadConfig({ KVTIER_ENCRYPTION_KEYRING: file }).encryption!;
    expect(spec.currentKeyId).toBe(3);
    expect(spec.keys.map((k) => k.id).sort()).toEqual([2, 3]);
  });

  it('a short secret, a bad keyring, a missing file or both settings stop the start', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvtier-keyring-'));
    writeFileSync(join(dir, 'bad.json'), JSON.stringify({ current: 9, keys: { 1: SECRET } }));
    writeFileSync(join(dir, 'good.json'), JSON.stringify({ current: 1, keys: { 1: SECRET } }));
    for (const [env, param] of [
      [{ KVTIER_ENCRYPTION_SECRET: 'short' }, 'KVTIER_ENCRYPTION_SECRET'],
      [{ KVTIER_ENCRYPTION_KEYRING: join(dir, 'bad.json') }, 'KVTIER_ENCRYPTION_KEYRING'],
      [{ KVTIER_ENCRYPTION_KEYRING: join(dir, 'missing.json') }, 'KVTIER_ENCRYPTION_KEYRING'],
      [{ KVTIER_ENCRYPTION_SECRET: SECRET, KVTIER_ENCRYPTION_KEYRING: join(dir, 'good.json') }, 'KVTIER_ENCRYPTION_KEYRING'],
    ] as const) {
      const error = failure(() => loadConfig(env as NodeJS.ProcessEnv));
      expect(error.code).toBe('KVT_ERR_CONFIG_INVALID');
      expect(error.param).toBe(param);
    }
    expect(failure(() => loadConfig({ KVTIER_ENCRYPTION_SECRET: SECRET, KVTIER_ENCRYPTION_KEYRING: join(dir, 'good.json') })).message).toMatch(/not both/);
  });
});
