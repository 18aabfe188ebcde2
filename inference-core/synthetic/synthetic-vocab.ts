/**
 * Vocabularies of the synthetic models, trained deterministically on the
 * corpus shipped in inference-core/assets/corpus, and written as GGUF
 * tokenizer metadata exactly as llama.cpp's converters write real ones.
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gv, type GgufValue } from '../gguf/index.ts';
import { trainByteLevelBpe, trainSpmBpe, type PreTokenizerName } from '../tokenizer/index.ts';
import { TokenType } from '../tokenizer/index.ts';
import { CHATML_TEMPLATE } from '../chat-template.ts';

export const CORPUS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'assets', 'corpus');

export const CHATML_SPECIALS = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'] as const;

let corpusCache: { texts: string[]; hash: string } | undefined;

/** The corpus files (sorted by name) and a hash of their content. */
export function loadCorpus(): { texts: string[]; hash: string } {
  if (corpusCache) return corpusCache;
  const files = fs.readdirSync(CORPUS_DIR).filter((f) => f.endsWith('.txt')).sort();
  const h = createHash('sha256');
  const texts = files.map((f) => {
    const t = fs.readFileSync(path.join(CORPUS_DIR, f), 'utf8');
    h.update(f).update('\0').update(t).update('\0');
    return t;
  });
  corpusCache = { texts, hash: h.digest('hex') };
  return corpusCache;
}

export interface VocabMetadata {
  metadata: Array<[string, GgufValue]>;
  vocabSize: number;
}

// Training is deterministic, so one process trains each (kind, size, pre-tokenizer) once.
const vocabMemo = new Map<string, VocabMetadata>();
function memo(key: string, make: () => VocabMetadata): VocabMetadata {
  let v = vocabMemo.get(key);
  if (!v) vocabMemo.set(key, (v = make()));
  return v;
}

/** Byte-level BPE vocabulary with ChatML specials at the end; `vocabSize` counts them. */
export function byteLevelVocabMetadata(vocabSize: number, pre: PreTokenizerName): VocabMetadata {
  return memo(`bpe:${vocabSize}:${pre}`, () => trainByteLevelVocab(vocabSize, pre));
}

function trainByteLevelVocab(vocabSize: number, pre: PreTokenizerName): VocabMetadata {
  const { texts } = loadCorpus();
  const vocab = trainByteLevelBpe(texts, vocabSize - CHATML_SPECIALS.length, pre);
  const tokens = [...vocab.tokens, ...CHATML_SPECIALS];
  const types = new Int32Array(tokens.length).fill(TokenType.NORMAL);
  for (let i = vocab.tokens.length; i < tokens.length; i++) types[i] = TokenType.CONTROL;
  const id = (t: string) => tokens.indexOf(t);
  return {
    vocabSize: tokens.length,
    metadata: [
      ['tokenizer.ggml.model', gv.str('gpt2')],
      ['tokenizer.ggml.pre', gv.str(pre)],
      ['tokenizer.ggml.tokens', gv.strings(tokens)],
      ['tokenizer.ggml.token_type', gv.i32s(types)],
      ['tokenizer.ggml.merges', gv.strings(vocab.merges)],
      ['tokenizer.ggml.bos_token_id', gv.u32(id('<|endoftext|>'))],
      ['tokenizer.ggml.eos_token_id', gv.u32(id('<|im_end|>'))],
      ['tokenizer.ggml.padding_token_id', gv.u32(id('<|endoftext|>'))],
      ['tokenizer.ggml.add_bos_token', gv.bool(pre === 'llama-bpe')],
      ['tokenizer.chat_template', gv.str(CHATML_TEMPLATE)],
    ],
  };
}

/** SentencePiece-style vocabulary: <unk> <s> </s>, 256 byte tokens, pieces, then the ChatML turn markers. */
export function spmVocabMetadata(vocabSize: number): VocabMetadata {
  return memo(`spm:${vocabSize}`, () => trainSpmVocab(vocabSize));
}

function trainSpmVocab(vocabSize: number): VocabMetadata {
  const { texts } = loadCorpus();
  const head = ['<unk>', '<s>', '</s>'];
  const bytes = Array.from({ length: 256 }, (_, b) => `<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
  const tail = ['<|im_start|>', '<|im_end|>'];
  const spm = trainSpmBpe(texts, vocabSize - head.length - bytes.length - tail.length);
  const tokens = [...head, ...bytes, ...spm.pieces, ...tail];
  const types = new Int32Array(tokens.length).fill(TokenType.NORMAL);
  const scores = new Float32Array(tokens.length);
  types[0] = TokenType.UNKNOWN;
  types[1] = TokenType.CONTROL;
  types[2] = TokenType.CONTROL;
  for (let b = 0; b < 256; b++) types[3 + b] = TokenType.BYTE;
  const base = 3 + 256;
  for (let i = 0; i < spm.pieces.length; i++) scores[base + i] = spm.scores[i];
  for (let i = tokens.length - tail.length; i < tokens.length; i++) types[i] = TokenType.CONTROL;
  return {
    vocabSize: tokens.length,
    metadata: [
      ['tokenizer.ggml.model', gv.str('llama')],
      ['tokenizer.ggml.tokens', gv.strings(tokens)],
      ['tokenizer.ggml.scores', gv.f32s(scores)],
      ['tokenizer.ggml.token_type', gv.i32s(types)],
      ['tokenizer.ggml.bos_token_id', gv.u32(1)],
      ['tokenizer.ggml.eos_token_id', gv.u32(2)],
      ['tokenizer.ggml.unknown_token_id', gv.u32(0)],
      ['tokenizer.ggml.add_bos_token', gv.bool(true)],
      ['tokenizer.ggml.add_eos_token', gv.bool(false)],
      ['tokenizer.ggml.add_space_prefix', gv.bool(true)],
      ['tokenizer.chat_template', gv.str(CHATML_TEMPLATE)],
    ],
  };
}
