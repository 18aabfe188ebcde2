/**
 * What a GGUF file is and whether kvtier can run it, read from its header
 * alone (tensor bytes are mapped, never touched): `kvtier model inspect`
 * prints it, `kvtier serve --model FILE` refuses an unrunnable file with its
 * `runnable.reason` before loading anything.
 *
 * "Runnable" is decided by the engine's own load-time checks (model config,
 * graph config, weight types, tokenizer), so the report cannot disagree with
 * what loading the file would do.
 */
import { readGguf, ggmlTypeName, GgmlType, SUPPORTED_GGML_TYPES, type GgufFile } from './gguf/index.ts';
import { modelConfigFromGguf } from './model-config.ts';
import { engineWeightDType, graphConfigFrom } from './engine/model-weights.ts';
import { Tokenizer } from './tokenizer/index.ts';
import { TOKENS_PER_BLOCK } from './kv/index.ts';
import { deepseekConfigFromGguf } from './deepseek-config.ts';
import { deepseekGraphConfig } from './engine/deepseek-graph.ts';
import { readDeepseek4Config } from './engine/deepseek4-config.ts';
import { deepseek4StateBytes, deepseek4StateRates } from './engine/deepseek4-state.ts';

/** Why a deepseek4 model never uses the block tier yet (said by model inspect and the serve startup log). */
/** How the tier serves deepseek4 (ModelReport.dsv4.units). */
export const DEEPSEEK4_UNITS_DETAIL =
  "deepseek4's SWA window and compressor state at a position depend on everything before it, so its cache is not a chain of independent 64-token blocks; it is served with prefix units: its compressed-entry pages as 64-token blocks shared by every unit on a prefix, plus one tail per unit (SWA windows, unfinished CSA/HCA groups, the partial block's entries)";
import { gemma3ConfigFromGguf } from './gemma3-config.ts';
import { deepseek4TailBytes } from './engine/deepseek4-unit.ts';
import { deepseek4KvLayout, deepseek4PageLayout } from './engine/deepseek4-pages.ts';
import { lfm2ConfigFromGguf } from './lfm2-config.ts';
import { lfm2GraphConfig } from './engine/lfm2-graph.ts';
import { gemma3GraphConfig } from './engine/gemma3-graph.ts';
import { gptOssConfigFromGguf } from './gptoss-config.ts';
import { gptOssGraphConfig } from './engine/gptoss-graph.ts';
import { ropeScalingFrom } from './engine/rope-scaling.ts';

export interface QuantMixRow {
  /** GGML type name (Q4_K, F32, …). */
  type: string;
  tensors: number;
  params: number;
  bytes: number;
}

export interface ModelReport {
  path: string;
  fileBytes: number;
  architecture: string;
  name?: string;
  dims: {
    layers?: number;
    dModel?: number;
    heads?: number;
    kvHeads?: number;
    keyDim?: number;
    valueDim?: number;
    ffnDim?: number;
    vocabSize?: number;
  };
  contextLength?: number;
  rope: { freqBase?: number; scaling?: string; freqFactors: boolean };
  slidingWindow?: number;
  /** One row per tensor type, most parameters first. */
  quantMix: QuantMixRow[];
  params: number;
  bitsPerWeight: number;
  vocab: { model?: string; pre?: string; size?: number };
  /** harmony: the template writes gpt-oss's channels (the server splits replies by channel: src/recipe/harmony.ts). */
  chatTemplate: { present: boolean; chars: number; harmony: boolean };
  /** f16 K and V of every layer for one token, and for one 64-token kvtier block; undefined when the dims are not declared. */
  kvBytesPerToken?: number;
  kvBytesPerBlock?: number;
  /**
   * deepseek2 (MLA): the cache holds one latent row [c_kv | k_pe] per token and layer, so
   * kvBytesPerToken/Block above are the latent sizes; `expanded*` is what per-head K and V would take.
   */
  mla?: { kvLoraRank: number; ropeDim: number; expandedBytesPerToken: number; expandedBytesPerBlock: number };
  /**
   * deepseek4 (V4): no per-token K/V chain; the f32 state kvtier's deepseek4 path holds per sequence:
   * `perTokenInWindow` bytes for each token inside the SWA window, `perPosition` bytes for each context
   * position for ever (compressed entries + indexer keys), and the total at 4k / 32k context.
   * Served with prefix units (`units` says how): `unitTailBytes` is one unit's tail at most (f32, any p; MTP
   * drafting adds its window and hidden state), next to the whole state at 4k; `unitBlockBytes` one shared
   * 64-token block of compressed entries and indexer keys.
   */
  dsv4?: { swaWindow: number; compressRatios: number[]; perTokenInWindow: number; perPosition: number; stateBytes4k: number; stateBytes32k: number; unitTailBytes: number; unitBlockBytes: number; units: string };
  /**
   * What the state after a prefix is (issue #26). `blockConcatenable`: the
   * minimal state at p is the chain of its 64-token blocks (full attention,
   * MLA). Otherwise `unitTailBytes` is what one unit's tail adds at most (f16)
   * and `tier` says whether kvtier's block tier is exact for the model as the
   * engine runs it (gemma3: the engine keeps every layer's K/V at every
   * position, so whole-page blocks are a complete state; units, which store
   * less, are not wired into the tier yet).
   */
  state?: { blockConcatenable: boolean; tier: 'on' | 'off'; detail: string; unitTailBytes?: number };
  runnable: { ok: true } | { ok: false; reason: string };
}

/** Opens `path`, reports on it, closes it. Throws GgufError when the file is not a readable GGUF. */
export function inspectModelFile(path: string): ModelReport {
  const gguf = readGguf(path, { rejectUnsupportedTypes: false });
  try {
    return inspectModel(gguf);
  } finally {
    gguf.close();
  }
}

export function inspectModel(g: GgufFile): ModelReport {
  const arch = g.optString('general.architecture') ?? '(none)';
  const key = (k: string) => `${arch}.${k}`;
  const u32 = (k: string) => (g.metadata.get(k)?.type === 'u32' ? g.optU32(k) : undefined);
  const heads = u32(key('attention.head_count'));
  const dModel = u32(key('embedding_length'));
  const keyDim = u32(key('attention.key_length')) ?? (heads && dModel ? dModel / heads : undefined);
  const dims: ModelReport['dims'] = {
    layers: u32(key('block_count')),
    dModel,
    heads,
    kvHeads: u32(key('attention.head_count_kv')) ?? heads,
    keyDim,
    valueDim: u32(key('attention.value_length')) ?? keyDim,
    ffnDim: u32(key('feed_forward_length')),
    vocabSize: u32(key('vocab_size')) ?? g.optStringArray('tokenizer.ggml.tokens')?.length,
  };
  const mix = new Map<string, QuantMixRow>();
  let params = 0;
  let bytes = 0;
  for (const t of g.tensors.values()) {
    const type = ggmlTypeName(t.type);
    const row = mix.get(type) ?? { type, tensors: 0, params: 0, bytes: 0 };
    row.tensors++;
    row.params += t.elements;
    row.bytes += t.byteLength;
    mix.set(type, row);
    params += t.elements;
    bytes += t.byteLength;
  }
  const { layers, kvHeads, valueDim } = dims;
  const kvBytesPerToken = layers && kvHeads && keyDim && valueDim ? layers * kvHeads * (keyDim + valueDim) * 2 : undefined;
  let mla: ModelReport['mla'];
  let kvPerToken = kvBytesPerToken;
  if (arch === 'deepseek2') {
    const kvLora = u32(key('attention.kv_lora_rank'));
    const rope = u32(key('rope.dimension_count'));
    const kMla = u32(key('attention.key_length_mla')) ?? keyDim;
    const vMla = u32(key('attention.value_length_mla')) ?? valueDim;
    kvPerToken = layers && kvLora && rope ? layers * (kvLora + rope) * 2 : undefined;
    if (kvLora && rope && layers && heads && kMla && vMla) {
      const expanded = layers * heads * (kMla + vMla) * 2;
      mla = { kvLoraRank: kvLora, ropeDim: rope, expandedBytesPerToken: expanded, expandedBytesPerBlock: expanded * TOKENS_PER_BLOCK };
    }
  }
  let dsv4: ModelReport['dsv4'];
  if (arch === 'deepseek4') {
    kvPerToken = undefined;
    try {
      const c = readDeepseek4Config(g);
      const rates = deepseek4StateRates(c);
      dsv4 = {
        swaWindow: c.nSwa,
        compressRatios: c.ratios.slice(0, c.nLayer),
        perTokenInWindow: rates.perTokenInWindow,
        perPosition: rates.perPosition,
        stateBytes4k: deepseek4StateBytes(c, 4096),
        stateBytes32k: deepseek4StateBytes(c, 32768),
        // the tail is bounded: its largest is within one 128-token HCA group past the window
        unitTailBytes: Math.max(...Array.from({ length: 128 }, (_, i) => deepseek4TailBytes(c, 4096 + i))),
        unitBlockBytes: deepseek4KvLayout(deepseek4PageLayout(c)).blockBytes,
        units: DEEPSEEK4_UNITS_DETAIL,
      };
    } catch {
      // runnable() reports the config error
    }
  }
  const template = g.optString('tokenizer.chat_template');
  return {
    path: g.path,
    fileBytes: g.fileSize,
    architecture: arch,
    name: g.optString('general.name'),
    dims,
    contextLength: u32(key('context_length')),
    rope: { freqBase: g.metadata.get(key('rope.freq_base'))?.type === 'f32' ? g.optF32(key('rope.freq_base')) : undefined, scaling: g.optString(key('rope.scaling.type')), freqFactors: g.tensors.has('rope_freqs.weight') },
    slidingWindow: u32(key('attention.sliding_window')),
    quantMix: [...mix.values()].sort((a, b) => b.params - a.params),
    params,
    bitsPerWeight: params > 0 ? (bytes * 8) / params : 0,
    vocab: { model: g.optString('tokenizer.ggml.model'), pre: g.optString('tokenizer.ggml.pre'), size: g.optStringArray('tokenizer.ggml.tokens')?.length },
    chatTemplate: { present: template !== undefined, chars: template?.length ?? 0, harmony: template !== undefined && template.includes('<|start|>assistant') && template.includes('<|channel|>') },
    kvBytesPerToken: kvPerToken,
    kvBytesPerBlock: kvPerToken === undefined ? undefined : kvPerToken * TOKENS_PER_BLOCK,
    ...(mla ? { mla } : {}),
    ...(dsv4 ? { dsv4 } : {}),
    ...(arch === 'lfm2' ? lfm2State(g) : stateOf(arch, dims, u32(key('attention.sliding_window')), u32(key('attention.sliding_window_pattern')) ?? (arch === 'gpt-oss' ? 2 : 6), kvBytesPerToken)),
    runnable: runnable(g),
  };
}

function stateOf(arch: string, d: ModelReport['dims'], window: number | undefined, pattern: number, kvPerToken: number | undefined): Pick<ModelReport, 'state'> {
  // gemma3 (default pattern 6) and gpt-oss (default 2: alternating): sliding layers' windows in the tail
  if ((arch === 'gemma3' || arch === 'gpt-oss') && window && d.layers && d.kvHeads && d.keyDim) {
    const sliding = Array.from({ length: d.layers }, (_, i) => pattern === 0 || i % pattern < pattern - 1).filter(Boolean).length;
    const tail = sliding * 2 * d.kvHeads * (window - 1) * d.keyDim * 2 + (kvPerToken ? ((d.layers - sliding) / d.layers) * kvPerToken * (TOKENS_PER_BLOCK - 1) : 0);
    return {
      state: {
        blockConcatenable: false,
        tier: 'on',
        detail: `${sliding} of ${d.layers} layers slide over ${window} tokens: a unit is the ${arch === 'gpt-oss' ? 'full-attention' : 'global'} layers' blocks + a tail (window K/V, partial block); whole-page blocks (every layer) are exact and the block tier uses those`,
        unitTailBytes: Math.round(tail),
      },
    };
  }
  if (arch === 'llama' || arch === 'qwen2' || arch === 'qwen3' || arch === 'deepseek2' || arch === 'gemma3') {
    return { state: { blockConcatenable: true, tier: 'on', detail: 'full attention: the state at p is the chain of its blocks' } };
  }
  return {};
}

function lfm2State(g: GgufFile): Pick<ModelReport, 'state'> {
  try {
    const c = lfm2ConfigFromGguf(g);
    const conv = c.kvHeadsPerLayer.filter((h) => h === 0).length;
    const attn = c.nLayers - conv;
    const tail = conv * (c.convL - 1) * c.dModel * 4 + attn * 2 * c.nKvHeads * c.headDim * 2 * (TOKENS_PER_BLOCK - 1);
    return {
      state: {
        blockConcatenable: false,
        tier: 'off',
        detail: `${conv} of ${c.nLayers} layers are short convolutions whose state (the last ${c.convL - 1} inputs per channel, f32) is not in the K/V blocks; a unit is the ${attn} attention layers' blocks + a tail with that state; served without the block tier until units are wired in`,
        unitTailBytes: tail,
      },
    };
  } catch {
    return {};
  }
}

/** The engine's own load-time checks, without uploading a weight. */
function runnable(g: GgufFile): ModelReport['runnable'] {
  try {
    if (g.optString('general.architecture') === 'deepseek4') {
      readDeepseek4Config(g);
      // the deepseek4 path computes every type Deepseek4Weights dequantizes (MXFP4 experts included)
      for (const t of g.tensors.values()) {
        if (t.type !== GgmlType.I32 && t.type !== GgmlType.MXFP4 && !SUPPORTED_GGML_TYPES.has(t.type)) {
          return { ok: false, reason: `deepseek4 tensor ${t.name} has type ${ggmlTypeName(t.type)}, which the deepseek4 path does not compute` };
        }
      }
      Tokenizer.fromGguf(g);
      return { ok: true };
    }
    const arch = g.optString('general.architecture');
    if (arch === 'deepseek2') deepseekGraphConfig(deepseekConfigFromGguf(g), g.path);
    else if (arch === 'lfm2') lfm2GraphConfig(lfm2ConfigFromGguf(g));
    else if (arch === 'gpt-oss') {
      const c = gptOssConfigFromGguf(g);
      gptOssGraphConfig(c, ropeScalingFrom(c.ropeScaling, g.path));
    } else if (arch === 'gemma3') {
      const c = gemma3ConfigFromGguf(g);
      gemma3GraphConfig(c, ropeScalingFrom(c.ropeScaling, g.path));
    } else graphConfigFrom(g, modelConfigFromGguf(g));
    for (const t of g.tensors.values()) {
      // gpt-oss's MXFP4 experts load as exact Q8_0 (gptoss-load.ts)
      if (t.dims.filter((d) => d > 1).length >= 2 && !engineWeightDType(t.type) && !(arch === 'gpt-oss' && t.type === GgmlType.MXFP4)) {
        return { ok: false, reason: `tensor ${t.name} has weight type ${ggmlTypeName(t.type)}, which the engine does not compute` };
      }
    }
    Tokenizer.fromGguf(g);
    return { ok: true };
  } catch (err) {
    return { ok: false, reason: (err as Error).message };
  }
}
