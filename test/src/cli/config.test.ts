import { describe, expect, it } from 'vitest';

import { loadConfig } from '../../../src/config.ts';

describe('config', () => {
  it('defaults are the embedded default', () => {
    const config = loadConfig({}, []);
    expect(config.host).toBe('127.0.0.1');
    expect(config.port).toBe(8080);
    expect(config.model).toBe('synthetic:small');
    expect(config.redisUrl).toBeNull();
    expect(config.storage).toBe(`fs:${config.dataDir}/blocks`);
  });

  it('env, then flags of the same names', () => {
    const config = loadConfig({ PORT: '9000', KVTIER_MODEL: 'synthetic:tiny', REDIS_URL: 'redis://127.0.0.1:6379' }, ['--port', '9100', '--data-dir=/tmp/x', '--kvtier-threads', '3']);
    expect(config.port).toBe(9100);
    expect(config.model).toBe('synthetic:tiny');
    expect(config.redisUrl).toBe('redis://127.0.0.1:6379');
    expect(config.dataDir).toBe('/tmp/x');
    expect(config.storage).toBe('fs:/tmp/x/blocks');
    expect(config.threads).toBe(3);
  });

  it('bad values name the variable or flag', () => {
    expect(() => loadConfig({ PORT: 'eighty' })).toThrow(expect.objectContaining({ code: 'KVT_ERR_CONFIG_INVALID', param: 'PORT' }));
    expect(() => loadConfig({}, ['--port', '-1'])).toThrow(expect.objectContaining({ code: 'KVT_ERR_CONFIG_INVALID', param: '--port' }));
    expect(() => loadConfig({ REDIS_URL: 'http://x' })).toThrow(expect.objectContaining({ param: 'REDIS_URL' }));
    expect(() => loadConfig({}, ['--colour', 'red'])).toThrow(expect.objectContaining({ code: 'KVT_ERR_CONFIG_INVALID', param: 'colour' }));
    expect(() => loadConfig({}, ['--port'])).toThrow(expect.objectContaining({ code: 'KVT_ERR_CONFIG_INVALID' }));
  });
});
