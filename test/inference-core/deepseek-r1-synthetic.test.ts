/**
 * synthetic:deepseek-r1-tiny: deepseek-tiny's shape with DeepSeek-V3's
 * vocabulary and R1's chat template (inference-core/synthetic/
 * deepseek-r1-template.ts), picked by name in the existing
 * synthetic:<name>[:<weight type>] grammar; synthetic:deepseek-tiny is
 * unchanged (synthetic vocabulary, no R1 template); R1's template without the
 * V3 vocabulary is a typed error.
 */
import { describe, expect, it } from 'vitest';

import { ChatTemplate } from '../../inference-core/chat-template.ts';
import { readGguf } from '../../inference-core/gguf/index.ts';
import { resolveModelPath } from '../../inference-core/engine/load-model.ts';
import { DEEPSEEK_R1_CHAT_TEMPLATE } from '../../inference-core/synthetic/deepseek-r1-template.ts';
import { deepseekModelPath, ensureDeepseekModel } from '../../inference-core/synthetic/deepseek-synthetic.ts';
import { TEST_DATA_DIR } from './engine-fixtures.ts';

function templateAndVocab(file: string): { template: string | undefined; vocab: number; name: string | undefined } {
  const g = readGguf(file);
  try {
    return { template: g.optString('tokenizer.chat_template'), vocab: g.optStringArray('tokenizer.ggml.tokens')!.length, name: g.optString('general.name') };
  } finally {
    g.close();
  }
}

describe('synthetic DeepSeek with the R1 template', () => {
  it('synthetic:deepseek-r1-tiny has the V3 vocabulary and R1 template; its prompt opens <think>', () => {
    const file = resolveModelPath('synthetic:deepseek-r1-tiny', { dataDir: TEST_DATA_DIR });
    expect(file).toBe(deepseekModelPath('deepseek-tiny', { dataDir: TEST_DATA_DIR, weightType: 'f16', vocab: 'deepseek-v3', template: 'r1' }));
    expect(file).toMatch(/deepseek-tiny-dsv3vocab-r1-v3-f16-[0-9a-f]{12}\.gguf$/);
    const { template, vocab, name } = templateAndVocab(file);
    expect(template).toBe(DEEPSEEK_R1_CHAT_TEMPLATE);
    expect(vocab).toBe(129280);
    expect(name).toBe('kvtier synthetic deepseek-tiny v3 r1');
    const g = readGguf(file);
    try {
      const text = ChatTemplate.fromGguf(g).render({ messages: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: '<think>\nx\n</think>\n\nHello' }, { role: 'user', content: 'Bye' }], addGenerationPrompt: true });
      expect(text).toBe('<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜>\n\nHello<｜end▁of▁sentence｜><｜User｜>Bye<｜Assistant｜><think>\n');
    } finally {
      g.close();
    }
  }, 120_000);

  it('a weight type suffix works as for deepseek-tiny; the V3-template file is another file', () => {
    expect(resolveModelPath('synthetic:deepseek-r1-tiny:q8_0', { dataDir: TEST_DATA_DIR })).toMatch(/deepseek-tiny-dsv3vocab-r1-v3-q8_0-[0-9a-f]{12}\.gguf$/);
    const v3 = deepseekModelPath('deepseek-tiny', { dataDir: TEST_DATA_DIR, weightType: 'f16', vocab: 'deepseek-v3' });
    expect(v3).toMatch(/deepseek-tiny-dsv3vocab-v3-f16-/);
    expect(deepseekModelPath('deepseek-tiny', { dataDir: TEST_DATA_DIR, weightType: 'f16', vocab: 'deepseek-v3', template: 'v3' })).toBe(v3);
  }, 120_000);

  it('synthetic:deepseek-tiny keeps the synthetic vocabulary and no R1 template', () => {
    const { template, vocab } = templateAndVocab(resolveModelPath('synthetic:deepseek-tiny', { dataDir: TEST_DATA_DIR }));
    expect(template).not.toBe(DEEPSEEK_R1_CHAT_TEMPLATE);
    expect(template ?? '').not.toContain('<think>');
    expect(vocab).toBeLessThan(129280);
  }, 120_000);

  it('typed errors: R1 template without the V3 vocabulary, unknown r1 size', () => {
    expect(() => ensureDeepseekModel('deepseek-tiny', { dataDir: TEST_DATA_DIR, template: 'r1' })).toThrow(expect.objectContaining({ code: 'KVT_ERR_SYNTHETIC_SPEC', message: expect.stringContaining("vocab 'deepseek-v3'") }));
    expect(() => resolveModelPath('synthetic:deepseek-r1-huge', { dataDir: TEST_DATA_DIR })).toThrow(
      expect.objectContaining({ code: 'KVT_ERR_ENGINE_BAD_ARGUMENT', message: expect.stringContaining('synthetic:deepseek-r1-tiny') }),
    );
    expect(() => resolveModelPath('synthetic:deepseek-r1-tiny:q3', { dataDir: TEST_DATA_DIR })).toThrow(expect.objectContaining({ code: 'KVT_ERR_ENGINE_BAD_ARGUMENT' }));
  });
});
