/**
 * Fuzzes the tokenizers with arbitrary strings: the synthetic byte-level BPE
 * and SentencePiece (byte fallback) vocabularies and real ones (Llama 3.1,
 * Qwen 2.5, DeepSeek V3 byte-level BPE; Llama 2 SentencePiece) through
 * test/helpers/real-vocab-gguf.ts. encode never throws; decode(encode(s)) is s
 * (well-formed: a lone surrogate becomes U+FFFD, as its UTF-8 does); the
 * streaming detokenizer gives the same text; random ids decode or fail with a
 * typed TokenizerError. (SentencePiece with parse_special is checked for no
 * throw only: llama.cpp puts a space prefix after every special there.)
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { ensureSyntheticModel, readGguf, Tokenizer, TokenizerError } from '../../inference-core/index.ts';
import { buildRealVocabGguf, type RealVocabName } from '../helpers/real-vocab-gguf.ts';
import { fuzz, int, randomString, type Rand } from './fuzz-runner.ts';

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvtier-fuzz-tok-'));
afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

const wellFormed = (s: string) => (s as string & { toWellFormed(): string }).toWellFormed();

function load(file: string): Tokenizer {
  const gguf = readGguf(file);
  try {
    return Tokenizer.fromGguf(gguf);
  } finally {
    gguf.close();
  }
}

function checkRoundTrip(tok: Tokenizer, rand: Rand): void {
  const text = randomString(rand, 1 + int(rand, 3) * 40, { loneSurrogates: rand() < 0.3 });
  const spm = tok.model === 'llama';
  const parseSpecial = rand() < 0.3;
  const ids = tok.encode(text, { addSpecial: false, parseSpecial });
  for (const id of ids) expect(id).toBeLessThan(tok.vocabSize);
  const decoded = tok.decode(ids, { stripLeadingSpace: spm, renderSpecial: parseSpecial });
  // SentencePiece with parse_special is not a round trip by design (as llama.cpp: a space prefix after each special, <unk> renders as itself).
  if (!(spm && parseSpecial)) expect(decoded, JSON.stringify(text)).toBe(wellFormed(text));
  const stream = tok.createDetokenizer({ stripLeadingSpace: spm, renderSpecial: parseSpecial });
  let streamed = '';
  for (const id of ids) streamed += stream.push(id);
  streamed += stream.flush();
  expect(streamed).toBe(decoded);
  // Random ids: text or a typed error, never anything else.
  const random = Array.from({ length: int(rand, 20) }, () => (rand() < 0.05 ? tok.vocabSize + int(rand, 10) : int(rand, tok.vocabSize)));
  try {
    tok.decode(random, { renderSpecial: rand() < 0.5 });
  } catch (error) {
    if (!(error instanceof TokenizerError)) throw error;
  }
}

describe('fuzz: tokenizers round-trip arbitrary strings', () => {
  it('synthetic byte-level BPE', async () => {
    const tok = load(ensureSyntheticModel('tiny', { dataDir, weightType: 'f32', progress: null }));
    await fuzz({ name: 'tokenizer synthetic bpe', budgetMs: 1000 }, (rand) => checkRoundTrip(tok, rand));
  });

  it('synthetic SentencePiece with byte fallback', async () => {
    const tok = load(ensureSyntheticModel('tiny', { dataDir, weightType: 'f32', tokenizer: 'spm', progress: null }));
    await fuzz({ name: 'tokenizer synthetic spm', budgetMs: 1000 }, (rand) => checkRoundTrip(tok, rand));
  });

  for (const name of ['llama3_1', 'qwen2_5', 'deepseek_v3', 'llama2'] as RealVocabName[]) {
    it(`real vocabulary ${name}`, async () => {
      const tok = load(buildRealVocabGguf(name));
      await fuzz({ name: `tokenizer ${name}`, budgetMs: 800 }, (rand) => checkRoundTrip(tok, rand));
    });
  }
});
