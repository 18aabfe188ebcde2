// KVTIER_SYNTHETIC_CACHE: a synthetic model is generated once into the cache
// and each dataDir gets its own copy at the path the generator would use.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { resolveModelPath } from '../../inference-core/engine/index.ts';
import { viaSyntheticCache } from '../../inference-core/engine/synthetic-model-cache.ts';
import { syntheticModelPath } from '../../inference-core/synthetic/index.ts';

describe('synthetic model cache', () => {
  let dir: string;
  let saved: string | undefined;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvt-syncache-'));
    saved = process.env.KVTIER_SYNTHETIC_CACHE;
  });
  afterEach(() => {
    if (saved === undefined) delete process.env.KVTIER_SYNTHETIC_CACHE;
    else process.env.KVTIER_SYNTHETIC_CACHE = saved;
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('generates once into the cache and copies into each dataDir', () => {
    process.env.KVTIER_SYNTHETIC_CACHE = path.join(dir, 'cache');
    let generated = 0;
    const ensure = (dataDir: string) => {
      const file = path.join(dataDir, 'models', 'm-abc.gguf');
      if (!fs.existsSync(file)) {
        fs.mkdirSync(path.dirname(file), { recursive: true });
        fs.writeFileSync(file, 'GGUF bytes');
        generated++;
      }
      return file;
    };
    const a = viaSyntheticCache(path.join(dir, 'a'), ensure);
    const b = viaSyntheticCache(path.join(dir, 'b'), ensure);
    expect(a).toBe(path.join(dir, 'a', 'models', 'm-abc.gguf'));
    expect(b).toBe(path.join(dir, 'b', 'models', 'm-abc.gguf'));
    expect(generated).toBe(1);
    expect(fs.readFileSync(b, 'utf8')).toBe('GGUF bytes');
    // a copy, not a link: damaging one dataDir's model leaves the cache intact
    fs.writeFileSync(a, 'damaged');
    expect(fs.readFileSync(viaSyntheticCache(path.join(dir, 'c'), ensure), 'utf8')).toBe('GGUF bytes');
  });

  it('without the variable the generator writes into the dataDir itself', () => {
    delete process.env.KVTIER_SYNTHETIC_CACHE;
    const seen: string[] = [];
    viaSyntheticCache(path.join(dir, 'a'), (d) => (seen.push(d), path.join(d, 'x.gguf')));
    expect(seen).toEqual([path.join(dir, 'a')]);
  });

  it('resolveModelPath returns the path the generator names, with identical bytes', () => {
    process.env.KVTIER_SYNTHETIC_CACHE = path.join(dir, 'cache');
    const a = resolveModelPath('synthetic:tiny', { dataDir: path.join(dir, 'a') });
    const b = resolveModelPath('synthetic:tiny', { dataDir: path.join(dir, 'b') });
    expect(a).toBe(syntheticModelPath('tiny', { dataDir: path.join(dir, 'a'), weightType: 'f16', arch: 'llama' }));
    expect(fs.readFileSync(a).equals(fs.readFileSync(b))).toBe(true);
  });
});
