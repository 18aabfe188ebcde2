/**
 * lstrip/rstrip of special and added tokens on real vocabularies, as llama.cpp
 * applies them: GGUF has no field for HF's per-token lstrip/rstrip, and
 * llama.cpp sets RSTRIP only by model name (general.name containing "phi-3").
 */
import { Tokenizer as HfTokenizer } from '@huggingface/tokenizers';
import { describe, expect, it } from 'vitest';
import { Tokenizer, gv, readGguf } from '../../inference-core/index.ts';
import { llamaCppTokenize } from '../helpers/llamacpp-tokenize.ts';
import { buildRealVocabGguf, readRealVocab } from '../helpers/real-vocab-gguf.ts';

const enc = (tok: Tokenizer, text: string) => Array.from(tok.encode(text, { addSpecial: false, parseSpecial: true }));

describe('rstrip by model name (llama.cpp: phi-3 specials except <unk> <s> <|endoftext|>)', () => {
  const texts = ['a </s>  b', '<s>  x </s>\n\n y', 'p</s>\t\tq</s>', ' <unk>  z', '</s></s>  w', 'u<|end|>\n v<|endoftext|>  w', '<|end|> <|user|>  hi'];
  // Phi-3's vocabulary is Llama 2's plus these (llama.cpp looks "<|endoftext|>" up by name and fails to load without it).
  const phi3Specials = (tj: Record<string, unknown>) => {
    ['<|endoftext|>', '<|end|>', '<|user|>'].forEach((content, k) =>
      (tj.added_tokens as unknown[]).push({ id: 32000 + k, content, single_word: false, lstrip: false, rstrip: k > 0, normalized: false, special: true }),
    );
  };

  it('a GGUF named "Phi-3 …" swallows whitespace right of </s> and <|end|> exactly as llama.cpp does', async () => {
    const file = buildRealVocabGguf('llama2', { editTokenizerJson: phi3Specials, variant: 'phi3', extraMetadata: [['general.name', gv.str('Phi-3 mini (kvtier strip test)')]] });
    const tok = Tokenizer.fromGguf(readGguf(file));
    const ref = (await llamaCppTokenize(file, texts.map((text) => ({ text, parseSpecial: true })))).tokens;
    expect(texts.map((t) => enc(tok, t))).toEqual(ref);
    // The rule is visible: without it, the space after </s> would be a token.
    const plain = Tokenizer.fromGguf(readGguf(buildRealVocabGguf('llama2', { editTokenizerJson: phi3Specials, variant: 'phi3' })));
    expect(enc(plain, texts[0])).not.toEqual(ref[0]);
  }, 120_000);
});

describe("HF added tokens with lstrip/rstrip (Qwen2.5 vocabulary plus one such token)", () => {
  const STRIP = '<|strip_me|>';
  const addStripToken = (tj: Record<string, unknown>) => {
    (tj.added_tokens as unknown[]).push({ id: 151665, content: STRIP, single_word: false, lstrip: true, rstrip: true, normalized: false, special: true });
  };

  it('llama.cpp ignores them (the GGUF cannot carry them) and kvtier follows llama.cpp; HF strips', async () => {
    const file = buildRealVocabGguf('qwen2_5', { editTokenizerJson: addStripToken, variant: 'strip-token' });
    const tok = Tokenizer.fromGguf(readGguf(file));
    const texts = [`a ${STRIP} b`, `x  \n${STRIP}\n\t y`, `${STRIP}   `];
    const ref = (await llamaCppTokenize(file, texts.map((text) => ({ text, parseSpecial: true })))).tokens;
    expect(texts.map((t) => enc(tok, t))).toEqual(ref);
    expect(ref[0]).toContain(151665);

    const { tokenizerJson, tokenizerConfig } = readRealVocab('qwen2_5');
    addStripToken(tokenizerJson);
    const hf = new HfTokenizer(tokenizerJson, tokenizerConfig);
    // HF: "a", <|strip_me|>, "b" — the spaces around the token are gone. kvtier keeps them, as the
    // GGUF's llama.cpp does: a prompt's ids must be the ones the engine's own tokenizer would make.
    expect(hf.encode(texts[0], { add_special_tokens: false }).ids).toEqual([64, 151665, 65]);
    expect(ref[0]).not.toEqual([64, 151665, 65]);
  }, 120_000);
});
