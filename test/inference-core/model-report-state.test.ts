/**
 * `kvtier model inspect` on the new architectures (#26): a gemma3 file is
 * runnable, its state is not block-concatenable (sliding layers), the unit
 * tail it would add is stated, and the block tier stays on (whole pages are
 * exact in kvtier's engine: gemma3-parity.test.ts's cache equivalence); a
 * llama file is block-concatenable; a gpt-oss file (MXFP4 experts) is runnable,
 * its alternating sliding layers make it not block-concatenable; an lfm2 file is runnable, not
 * block-concatenable, and served without the block tier.
 */
import { describe, expect, it } from 'vitest';
import { inspectModelFile } from '../../inference-core/index.ts';
import { ensureGemma3Model } from '../../inference-core/synthetic/gemma3-synthetic.ts';
import { ensureLfm2Model } from '../../inference-core/synthetic/lfm2-synthetic.ts';
import { ensureGptOssModel } from '../../inference-core/synthetic/gptoss-synthetic.ts';
import { ensureArchVariantModel } from '../../inference-core/synthetic/arch-variants.ts';
import { formatModelReport } from '../../src/cli/commands/model-command.ts';
import { TEST_DATA_DIR } from './engine-fixtures.ts';

describe('model inspect: state at p', () => {
  it('gemma3: runnable, not block-concatenable, unit tail stated, block tier on', () => {
    const r = inspectModelFile(ensureGemma3Model('gemma3-tiny', { dataDir: TEST_DATA_DIR }));
    expect(r.runnable).toEqual({ ok: true });
    expect(r.state).toMatchObject({ blockConcatenable: false, tier: 'on' });
    // 7 sliding layers × K|V × 1 kv head × 39 tokens × 32 dims × 2 bytes, + the global layer's partial block (63 tokens)
    expect(r.state!.unitTailBytes).toBe(7 * 2 * 39 * 32 * 2 + 2 * 63 * 32 * 2);
    const text = formatModelReport(r);
    expect(text).toMatch(/state at p +not block-concatenable: 7 of 8 layers slide over 40 tokens/);
    expect(text).toMatch(/block tier on/);
  });
  it('gpt-oss: runnable (MXFP4 experts), not block-concatenable, unit tail stated', () => {
    const r = inspectModelFile(ensureGptOssModel('gpt-oss-tiny', { dataDir: TEST_DATA_DIR }));
    expect(r.runnable).toEqual({ ok: true });
    expect(r.state).toMatchObject({ blockConcatenable: false });
    // 2 sliding layers × K|V × 2 kv heads × 39 tokens × 32 dims × 2 bytes, + the 2 full layers' partial block (63 tokens)
    expect(r.state!.unitTailBytes).toBe(2 * 2 * 2 * 39 * 32 * 2 + 2 * 2 * 2 * 63 * 32 * 2);
    expect(formatModelReport(r)).toMatch(/state at p +not block-concatenable: 2 of 4 layers slide over 40 tokens: a unit is the full-attention layers' blocks/);
  });
  it('lfm2: runnable, not block-concatenable (convolution state), block tier off', () => {
    const r = inspectModelFile(ensureLfm2Model({ dataDir: TEST_DATA_DIR }));
    expect(r.runnable).toEqual({ ok: true });
    expect(r.state).toMatchObject({ blockConcatenable: false, tier: 'off' });
    // 4 conv layers × 2 rows × 64 f32, + the 2 attention layers' partial block (63 tokens, 2 kv heads × 16 dims, f16)
    expect(r.state!.unitTailBytes).toBe(4 * 2 * 64 * 4 + 2 * 2 * 2 * 16 * 2 * 63);
    expect(formatModelReport(r)).toMatch(/state at p +not block-concatenable: 4 of 6 layers are short convolutions.* · block tier off/);
  });
  it('llama: block-concatenable', () => {
    const r = inspectModelFile(ensureArchVariantModel('qwen3', { dataDir: TEST_DATA_DIR, weightType: 'f16' }));
    expect(r.state).toMatchObject({ blockConcatenable: true, tier: 'on' });
    expect(formatModelReport(r)).toMatch(/state at p +block-concatenable · block tier on/);
  });
});
