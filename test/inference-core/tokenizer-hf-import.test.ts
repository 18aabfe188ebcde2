/**
 * importHfTokenizer: tokenizer.json + tokenizer_config.json → GGUF tokenizer
 * metadata with the values convert_hf_to_gguf.py writes for the real models
 * (the ids below are those of the published GGUFs of each model).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { TokenType, TokenizerError, detectHfPreTokenizer, importHfTokenizer, importHfTokenizerDir, type GgufValue } from '../../inference-core/index.ts';
import { importRealVocab, readRealVocab, realVocabDir, type RealVocabName } from '../helpers/real-vocab-gguf.ts';

function metaOf(name: RealVocabName) {
  const imp = importRealVocab(name);
  const m = new Map<string, GgufValue>(imp.metadata);
  const val = (k: string) => (m.get(k) as { value: unknown } | undefined)?.value;
  const tokens = val('tokenizer.ggml.tokens') as string[];
  const types = val('tokenizer.ggml.token_type') as Int32Array;
  const typeOf = (t: string) => types[tokens.indexOf(t)];
  return { imp, m, val, tokens, types, typeOf };
}

describe('importHfTokenizer on the real vocabularies', () => {
  it('Llama 3.1: gpt2 / llama-bpe, BOS added, eos <|eot_id|>, specials CONTROL', () => {
    const { imp, val, tokens, typeOf } = metaOf('llama3_1');
    expect([imp.model, imp.pre, imp.vocabSize]).toEqual(['gpt2', 'llama-bpe', 128256]);
    expect(val('tokenizer.ggml.bos_token_id')).toBe(128000);
    expect(val('tokenizer.ggml.eos_token_id')).toBe(128009);
    expect(val('tokenizer.ggml.add_bos_token')).toBe(true);
    expect((val('tokenizer.ggml.merges') as string[]).length).toBe(280147);
    expect(tokens[128009]).toBe('<|eot_id|>');
    expect(typeOf('<|eot_id|>')).toBe(TokenType.CONTROL);
    expect(typeOf('Hello')).toBe(TokenType.NORMAL);
    expect(typeof val('tokenizer.chat_template')).toBe('string');
  });

  it('Qwen2.5: gpt2 / qwen2, padded to config vocab_size with UNUSED, user-defined <tool_call>, look-special fim tokens CONTROL', () => {
    const { imp, val, tokens, typeOf } = metaOf('qwen2_5');
    expect([imp.model, imp.pre, imp.vocabSize]).toEqual(['gpt2', 'qwen2', 151936]);
    expect(val('tokenizer.ggml.eos_token_id')).toBe(151645);
    expect(val('tokenizer.ggml.padding_token_id')).toBe(151643);
    expect(val('tokenizer.ggml.bos_token_id')).toBe(151643); // config.json's bos_token_id: tokenizer_config has none
    expect(val('tokenizer.ggml.add_bos_token')).toBe(false);
    expect(typeOf('<tool_call>')).toBe(TokenType.USER_DEFINED);
    expect(typeOf('<|fim_prefix|>')).toBe(TokenType.CONTROL); // special: false, but looks special
    expect(typeOf('<|im_start|>')).toBe(TokenType.CONTROL);
    expect(tokens[151665]).toBe('[PAD151665]');
    expect(typeOf('[PAD151935]')).toBe(TokenType.UNUSED);
  });

  it('Qwen3: merges stored as pairs are written "a b"; <think> is user-defined', () => {
    const { imp, val, typeOf } = metaOf('qwen3');
    expect(imp.pre).toBe('qwen2');
    const merges = val('tokenizer.ggml.merges') as string[];
    expect(merges[0]).toBe('Ġ Ġ');
    expect(merges.every((x) => x.split(' ').length === 2)).toBe(true);
    expect(typeOf('<think>')).toBe(TokenType.USER_DEFINED);
  });

  it('DeepSeek V3: gpt2 / deepseek-v3, BOS added, <｜User｜> CONTROL', () => {
    const { imp, val, typeOf } = metaOf('deepseek_v3');
    expect([imp.model, imp.pre, imp.vocabSize]).toEqual(['gpt2', 'deepseek-v3', 129280]);
    expect(val('tokenizer.ggml.bos_token_id')).toBe(0);
    expect(val('tokenizer.ggml.eos_token_id')).toBe(1);
    expect(val('tokenizer.ggml.padding_token_id')).toBe(1);
    expect(val('tokenizer.ggml.add_bos_token')).toBe(true);
    expect(val('tokenizer.ggml.add_eos_token')).toBe(false);
    expect(typeOf('<｜User｜>')).toBe(TokenType.CONTROL);
    expect(typeOf('<｜begin▁of▁sentence｜>')).toBe(TokenType.CONTROL);
  });

  it('Llama 2 / Mistral: llama (SPM) with byte tokens, UNKNOWN <unk>, space prefix, and scores ordered like the merges', () => {
    const { imp, val, tokens, typeOf } = metaOf('llama2');
    expect([imp.model, imp.pre, imp.vocabSize]).toEqual(['llama', 'default', 32000]);
    expect([val('tokenizer.ggml.unknown_token_id'), val('tokenizer.ggml.bos_token_id'), val('tokenizer.ggml.eos_token_id')]).toEqual([0, 1, 2]);
    expect(val('tokenizer.ggml.add_bos_token')).toBe(true);
    expect(val('tokenizer.ggml.add_eos_token')).toBe(false);
    expect(val('tokenizer.ggml.add_space_prefix')).toBe(true);
    expect(typeOf('<unk>')).toBe(TokenType.UNKNOWN);
    expect(typeOf('<s>')).toBe(TokenType.CONTROL);
    expect(typeOf('<0x0A>')).toBe(TokenType.BYTE);
    const scores = val('tokenizer.ggml.scores') as Float32Array;
    const merges = readRealVocab('llama2').tokenizerJson.model as { merges: string[] };
    const piece = (r: number) => merges.merges[r].replace(' ', '');
    // Earlier merge → higher score; a piece no merge makes scores below all merged ones.
    expect(scores[tokens.indexOf(piece(0))]).toBeGreaterThan(scores[tokens.indexOf(piece(1))]);
    expect(scores[tokens.indexOf(piece(100))]).toBeGreaterThan(scores[tokens.indexOf(piece(5000))]);
    expect(scores[tokens.indexOf(piece(merges.merges.length - 1))]).toBeGreaterThan(scores[tokens.indexOf('e')]);
  });
});

describe('importHfTokenizer errors and formats', () => {
  const tiny = (pre: unknown, merges: unknown = ['a b']) => ({
    model: { type: 'BPE', vocab: { a: 0, b: 1, ab: 2, 'Ġ': 3, 'ĠĠ': 4 }, merges },
    pre_tokenizer: pre,
    added_tokens: [],
  });

  it('a pre-tokenizer llama.cpp does not know is a typed error naming the fix', () => {
    const gpt2Like = { type: 'ByteLevel', add_prefix_space: false, use_regex: true };
    expect(detectHfPreTokenizer(tiny(gpt2Like))).toBeUndefined();
    expect(() => importHfTokenizer(tiny(gpt2Like))).toThrow(TokenizerError);
    expect(() => importHfTokenizer(tiny(gpt2Like))).toThrow(/KVT_ERR_TOKENIZER_HF_IMPORT.*options\.pre/);
    expect(importHfTokenizer(tiny(gpt2Like), {}, { pre: 'qwen2' }).pre).toBe('qwen2');
  });

  it('a non-BPE model is refused', () => {
    expect(() => importHfTokenizer({ model: { type: 'Unigram', vocab: [] } })).toThrow(/KVT_ERR_TOKENIZER_HF_IMPORT.*Unigram/);
  });

  it('merge pairs with a space inside a part write that space as U+0120 (gguf-py)', () => {
    const qwenPre = readRealVocab('qwen2_5').tokenizerJson.pre_tokenizer;
    const imp = importHfTokenizer(tiny(qwenPre, [['a', 'b'], [' ', ' ']]));
    const merges = new Map(imp.metadata).get('tokenizer.ggml.merges') as { value: string[] };
    expect(merges.value).toEqual(['a b', 'Ġ Ġ']);
  });
});

describe('importHfTokenizerDir', () => {
  it('reads a model directory: config.json pads and fills ids, chat_template.jinja supplies a missing template', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvtier-hfdir-'));
    try {
      for (const f of ['tokenizer.json', 'tokenizer_config.json']) fs.copyFileSync(path.join(realVocabDir('llama2'), f), path.join(dir, f));
      fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ vocab_size: 32008, bos_token_id: 1, eos_token_id: 2 }));
      fs.writeFileSync(path.join(dir, 'chat_template.jinja'), '{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}');
      const imp = importHfTokenizerDir(dir);
      const m = new Map(imp.metadata);
      expect(imp.vocabSize).toBe(32008);
      expect((m.get('tokenizer.chat_template') as { value: string }).value).toContain('bos_token');
      fs.rmSync(path.join(dir, 'tokenizer.json'));
      expect(() => importHfTokenizerDir(dir)).toThrow(/KVT_ERR_TOKENIZER_HF_IMPORT.*no tokenizer\.json/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
