/**
 * Loading deepseek2 files: a backend without the MLA ops (the CUDA backend
 * today) is refused with a typed error before any weight is uploaded; the
 * spec synthetic:deepseek-tiny loads the V3-shaped model; an unknown
 * synthetic DeepSeek spec or weight type is a typed error.
 */
import { describe, expect, it } from 'vitest';
import { CpuBackend, type WeightHandle } from '../../native/index.ts';
import { loadEngine } from '../../inference-core/engine/index.ts';
import { ensureDeepseekModel } from '../../inference-core/synthetic/deepseek-synthetic.ts';
import { TEST_DATA_DIR } from './engine-fixtures.ts';

/** The CPU backend without its MLA ops, counting weight uploads. */
class NoMlaBackend extends CpuBackend {
  uploads = 0;
  override uploadWeight(...args: Parameters<CpuBackend['uploadWeight']>): WeightHandle {
    this.uploads++;
    return super.uploadWeight(...args);
  }
}
Object.assign(NoMlaBackend.prototype, { createMlaKvPool: undefined, mlaKvWrite: undefined, mlaAttention: undefined });

describe('loading deepseek2', () => {
  it('a backend without MLA ops: KVT_ERR_ENGINE_UNSUPPORTED_MODEL before any upload', async () => {
    const backend = new NoMlaBackend();
    const file = ensureDeepseekModel('deepseek-tiny', { dataDir: TEST_DATA_DIR, weightType: 'f16' });
    await expect(loadEngine(file, { backend, threads: 1, poolBytes: 2 ** 20 })).rejects.toMatchObject({ code: 'KVT_ERR_ENGINE_UNSUPPORTED_MODEL' });
    expect(backend.uploads).toBe(0);
  });

  it('synthetic:deepseek-tiny loads the V3-shaped file; unknown names and weight types are typed errors', async () => {
    const e = await loadEngine('synthetic:deepseek-tiny:f16', { dataDir: TEST_DATA_DIR, threads: 1, poolBytes: 2 ** 20 });
    try {
      expect(e.graphConfig.architecture).toBe('deepseek2');
      expect(e.modelPath).toBe(ensureDeepseekModel('deepseek-tiny', { dataDir: TEST_DATA_DIR, weightType: 'f16', shape: 'v3' }));
    } finally {
      e.destroy();
    }
    await expect(loadEngine('synthetic:deepseek-huge', { dataDir: TEST_DATA_DIR })).rejects.toMatchObject({ code: 'KVT_ERR_ENGINE_BAD_ARGUMENT' });
    await expect(loadEngine('synthetic:deepseek-tiny:q3_k', { dataDir: TEST_DATA_DIR })).rejects.toMatchObject({ code: 'KVT_ERR_ENGINE_BAD_ARGUMENT' });
  });
});
