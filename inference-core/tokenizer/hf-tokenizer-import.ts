/**
 * Hugging Face tokenizer.json (+ tokenizer_config.json, + optionally the
 * model's config.json) → GGUF tokenizer metadata, written the way llama.cpp's
 * convert_hf_to_gguf.py writes it, so a user can build a GGUF vocabulary
 * from a HF repository:
 *
 *   byte-level BPE (Llama 3, Qwen2/3, DeepSeek V3, gpt-oss) → tokenizer.ggml.model "gpt2"
 *     tokens = model.vocab ∪ added_tokens by id (added tokens as raw text),
 *     ids missing below vocab_size → "[PAD<i>]" UNUSED, merges as "a b",
 *     pre = the llama.cpp pre-tokenizer name whose regexes equal the Split
 *     patterns of tokenizer.json (convert_hf_to_gguf.py finds it by hashing a
 *     tokenization; the patterns identify it just as well for the supported ones).
 *   BPE with byte_fallback (Llama 2, Mistral)       → tokenizer.ggml.model "llama"
 *     scores: tokenizer.json has none (convert reads them from tokenizer.model).
 *     A SentencePiece BPE model merges the pair whose result has the highest
 *     score and HF's converter writes merges sorted by that score, so a piece's
 *     score is minus the rank of the first merge producing it; pieces no merge
 *     produces (characters, bytes, specials) score below every merged one.
 *
 * Token types as convert_hf_to_gguf.py's get_vocab_base: added tokens that are
 * special or look special (<|…|>, <｜…｜>) are CONTROL, other added tokens
 * USER_DEFINED, <0xNN> BYTE, the model's unk UNKNOWN, the rest NORMAL. Special
 * ids, add_bos/add_eos and the chat template follow gguf-py's SpecialVocab:
 * tokenizer_config's *_token contents looked up among added_tokens, then
 * config.json's *_token_id; add_* from the post-processor's TemplateProcessing,
 * overridden by tokenizer_config's add_*_token.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { gv, type GgufValue } from '../gguf/index.ts';
import { TokenizerError } from './tokenizer-errors.ts';
import { TokenType } from './token-type.ts';
import { addsSpacePrefix, specialVocab } from './hf-special-vocab.ts';

type Json = Record<string, unknown>;

export interface HfAddedToken {
  id: number;
  content: string;
  special?: boolean;
  lstrip?: boolean;
  rstrip?: boolean;
  normalized?: boolean;
  single_word?: boolean;
}

/** The fields of a model's config.json the vocabulary needs (all optional). */
export interface HfModelConfig {
  vocab_size?: number;
  bos_token_id?: number | number[] | null;
  eos_token_id?: number | number[] | null;
  pad_token_id?: number | number[] | null;
}

export interface HfImportOptions {
  /** The model's config.json: vocab_size pads the vocabulary, *_token_id are fallbacks. */
  config?: HfModelConfig;
  /** Force tokenizer.ggml.pre instead of detecting it from the pre-tokenizer. */
  pre?: string;
}

export interface HfVocabImport {
  model: 'gpt2' | 'llama';
  /** tokenizer.ggml.pre ('default' for SentencePiece vocabularies). */
  pre: string;
  vocabSize: number;
  metadata: Array<[string, GgufValue]>;
  /** Added tokens with lstrip/rstrip: GGUF has no field for them (llama.cpp sets those attributes only for a few model names). */
  strippedAddedTokens: HfAddedToken[];
}

const err = (msg: string) => new TokenizerError('KVT_ERR_TOKENIZER_HF_IMPORT', msg);

/** The Split regexes of each llama.cpp pre-tokenizer, as tokenizer.json writes them. */
const PRE_PATTERNS: Array<{ name: string; patterns: string[] }> = [
  {
    name: 'llama-bpe',
    patterns: ["(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"],
  },
  {
    name: 'qwen2',
    patterns: ["(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"],
  },
  {
    name: 'deepseek-v3',
    patterns: [
      '\\p{N}{1,3}',
      '[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+',
      '[!"#$%&\'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+',
    ],
  },
  {
    // o200k (gpt-oss's o200k_harmony): tokenizer.json's Split, followed by a ByteLevel without regex
    name: 'gpt-4o',
    patterns: [
      '[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:\'s|\'t|\'re|\'ve|\'m|\'ll|\'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:\'s|\'t|\'re|\'ve|\'m|\'ll|\'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+',
    ],
  },
];

function obj(v: unknown, what: string): Json {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw err(`${what} is not a JSON object`);
  return v as Json;
}

function splitPatterns(pre: unknown): string[] {
  if (typeof pre !== 'object' || pre === null) return [];
  const p = pre as Json;
  if (p.type === 'Sequence' && Array.isArray(p.pretokenizers)) return p.pretokenizers.flatMap(splitPatterns);
  if (p.type === 'Split') {
    const pat = p.pattern as Json | undefined;
    if (pat && typeof pat.Regex === 'string') return [pat.Regex];
    if (pat && typeof pat.String === 'string') return [pat.String];
  }
  return [];
}

/** The llama.cpp pre-tokenizer name of a byte-level BPE tokenizer.json, or undefined when none matches. */
export function detectHfPreTokenizer(tokenizerJson: unknown): string | undefined {
  const pats = splitPatterns(obj(tokenizerJson, 'tokenizer.json').pre_tokenizer);
  const found = PRE_PATTERNS.find((p) => p.patterns.length === pats.length && p.patterns.every((x, i) => x === pats[i]));
  return found?.name;
}

function mergeStrings(merges: unknown): string[] {
  if (!Array.isArray(merges)) return [];
  // Since transformers 4.45 merges may be pairs; gguf-py joins them with a space, writing a space inside a part as U+0120.
  return merges.map((m) => (typeof m === 'string' ? m : (m as string[]).map((part) => part.replace(/ /g, '\u0120')).join(' ')));
}

function looksSpecial(t: string): boolean {
  return (
    ['<pad>', '<mask>', '<2mass>', '[@BOS@]'].includes(t) ||
    (t.startsWith('<|') && t.endsWith('|>')) ||
    (t.startsWith('<\uff5c') && t.endsWith('\uff5c>')) ||
    (t.startsWith('<unused') && t.endsWith('>'))
  );
}

export function importHfTokenizer(tokenizerJson: unknown, tokenizerConfig: unknown = {}, options: HfImportOptions = {}): HfVocabImport {
  const tj = obj(tokenizerJson, 'tokenizer.json');
  const tc = tokenizerConfig === undefined || tokenizerConfig === null ? {} : obj(tokenizerConfig, 'tokenizer_config.json');
  const m = obj(tj.model, 'tokenizer.json model');
  if (m.type !== 'BPE') throw err(`tokenizer.json model type "${String(m.type)}" is not supported (BPE is)`);
  const vocab = obj(m.vocab, 'tokenizer.json model.vocab') as Record<string, number>;
  const added = (Array.isArray(tj.added_tokens) ? tj.added_tokens : []) as HfAddedToken[];
  const isSpm = m.byte_fallback === true;

  // Vocabulary by id.
  const byId = new Map<number, string>();
  for (const [t, id] of Object.entries(vocab)) byId.set(id, t);
  const addedById = new Map<number, HfAddedToken>();
  for (const a of added) {
    addedById.set(a.id, a);
    byId.set(a.id, a.content);
  }
  let maxId = -1;
  for (const id of byId.keys()) maxId = Math.max(maxId, id);
  const vocabSize = Math.max(options.config?.vocab_size ?? 0, maxId + 1);

  const tokens: string[] = new Array(vocabSize);
  const types = new Int32Array(vocabSize);
  const unk = isSpm && typeof m.unk_token === 'string' ? m.unk_token : undefined;
  for (let i = 0; i < vocabSize; i++) {
    const t = byId.get(i);
    if (t === undefined) {
      tokens[i] = `[PAD${i}]`;
      types[i] = TokenType.UNUSED;
      continue;
    }
    tokens[i] = t;
    const a = addedById.get(i);
    if (isSpm && /^<0x[0-9A-Fa-f]{2}>$/.test(t)) types[i] = TokenType.BYTE;
    else if (t === unk) types[i] = TokenType.UNKNOWN;
    else if (a) types[i] = a.special || looksSpecial(t) ? TokenType.CONTROL : TokenType.USER_DEFINED;
    else types[i] = TokenType.NORMAL;
    // SentencePiece: convert_hf_to_gguf.py writes a user-defined token's "▁" as a space (Gemma 3's
    // "▁▁" runs), since llama.cpp matches user-defined tokens in the text before escaping spaces.
    if (isSpm && types[i] === TokenType.USER_DEFINED) tokens[i] = t.replaceAll('\u2581', ' ');
  }

  const meta: Array<[string, GgufValue]> = [];
  let pre: string;
  const merges = mergeStrings(m.merges);
  if (isSpm) {
    pre = 'default';
    const firstRank = new Map<string, number>();
    for (let r = 0; r < merges.length; r++) {
      const sp = merges[r].indexOf(' ', 1);
      const piece = merges[r].slice(0, sp) + merges[r].slice(sp + 1);
      if (!firstRank.has(piece)) firstRank.set(piece, r);
    }
    const scores = new Float32Array(vocabSize);
    for (let i = 0; i < vocabSize; i++) {
      const r = types[i] === TokenType.NORMAL ? firstRank.get(tokens[i]) : undefined;
      scores[i] = r !== undefined ? -r : -(merges.length + i);
    }
    meta.push(['tokenizer.ggml.model', gv.str('llama')], ['tokenizer.ggml.pre', gv.str(pre)]);
    meta.push(['tokenizer.ggml.tokens', gv.strings(tokens)], ['tokenizer.ggml.scores', gv.f32s(scores)], ['tokenizer.ggml.token_type', gv.i32s(types)]);
    meta.push(['tokenizer.ggml.add_space_prefix', gv.bool(addsSpacePrefix(tj))]);
  } else {
    const detected = options.pre ?? detectHfPreTokenizer(tj);
    if (!detected) throw err('the pre-tokenizer of this tokenizer.json is none llama.cpp knows as llama-bpe, qwen2, deepseek-v3 or gpt-4o; pass options.pre to force one');
    pre = detected;
    meta.push(['tokenizer.ggml.model', gv.str('gpt2')], ['tokenizer.ggml.pre', gv.str(pre)]);
    meta.push(['tokenizer.ggml.tokens', gv.strings(tokens)], ['tokenizer.ggml.token_type', gv.i32s(types)], ['tokenizer.ggml.merges', gv.strings(merges)]);
  }

  const special = specialVocab(tj, tc, added, options.config ?? {}, vocabSize);
  const KEY: Record<string, string> = { bos: 'bos_token_id', eos: 'eos_token_id', unk: 'unknown_token_id', sep: 'seperator_token_id', pad: 'padding_token_id', eot: 'eot_token_id', eom: 'eom_token_id' };
  for (const [typ, id] of special.ids) meta.push([`tokenizer.ggml.${KEY[typ]}`, gv.u32(id)]);
  for (const [typ, on] of special.add) meta.push([`tokenizer.ggml.add_${typ}_token`, gv.bool(on)]);

  const ct = tc.chat_template;
  if (typeof ct === 'string') meta.push(['tokenizer.chat_template', gv.str(ct)]);
  else if (Array.isArray(ct)) {
    const names: string[] = [];
    for (const e of ct as Array<{ name?: unknown; template?: unknown }>) {
      if (typeof e.name !== 'string' || typeof e.template !== 'string') continue;
      if (e.name === 'default') meta.push(['tokenizer.chat_template', gv.str(e.template)]);
      else {
        names.push(e.name);
        meta.push([`tokenizer.chat_template.${e.name}`, gv.str(e.template)]);
      }
    }
    if (names.length) meta.push(['tokenizer.chat_templates', gv.strings(names)]);
  }

  return { model: isSpm ? 'llama' : 'gpt2', pre, vocabSize, metadata: meta, strippedAddedTokens: added.filter((a) => a.lstrip || a.rstrip) };
}
/**
 * importHfTokenizer on a downloaded HF model directory: tokenizer.json (required),
 * tokenizer_config.json and config.json (optional), and the template of
 * chat_template.jinja / chat_template.json when tokenizer_config.json has none
 * (gguf-py's order).
 */
export function importHfTokenizerDir(dir: string, options: Omit<HfImportOptions, 'config'> = {}): HfVocabImport {
  const read = (name: string): unknown => {
    const file = path.join(dir, name);
    if (!fs.existsSync(file)) return undefined;
    try {
      return JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch (e) {
      throw err(`${file} is not valid JSON (${(e as Error).message})`);
    }
  };
  const tokenizerJson = read('tokenizer.json');
  if (tokenizerJson === undefined) throw err(`${dir} has no tokenizer.json (download it with the model's other files)`);
  const tokenizerConfig = { ...((read('tokenizer_config.json') as Json | undefined) ?? {}) };
  if (tokenizerConfig.chat_template === undefined) {
    const jinja = path.join(dir, 'chat_template.jinja');
    const fromJson = (read('chat_template.json') as Json | undefined)?.chat_template;
    if (fs.existsSync(jinja)) tokenizerConfig.chat_template = fs.readFileSync(jinja, 'utf8');
    else if (typeof fromJson === 'string') tokenizerConfig.chat_template = fromJson;
  }
  return importHfTokenizer(tokenizerJson, tokenizerConfig, { ...options, config: read('config.json') as HfModelConfig | undefined });
}
