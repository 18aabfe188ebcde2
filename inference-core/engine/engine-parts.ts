/**
 * What a model loader hands the Engine: the forward pass it drives (the
 * ForwardGraph seam every architecture's graph implements) and the parts it
 * owns from then on (backend handles, KV layout, tokenizer, config).
 */
import type { Backend, KvPoolHandle } from '../../native/index.ts';
import type { KvLayout } from '../kv/kv-pool.ts';
import type { GraphConfig, ModelWeights } from './llama-graph.ts';
import type { RowSegment } from './graph-rows.ts';
import type { DeepseekGraphConfig } from './deepseek-graph.ts';
import type { Gemma3GraphConfig } from './gemma3-graph.ts';
import type { GptOssGraphConfig } from './gptoss-graph.ts';
import type { ConvState, Lfm2GraphConfig } from './lfm2-graph.ts';
import type { Deepseek4GraphConfig } from './deepseek4-graph.ts';
import type { Deepseek4State } from './deepseek4-state.ts';
import type { MtpStepper } from './sequence.ts';

/** The forward pass the engine drives (LlamaGraph, DeepseekGraph). */
export interface ForwardGraph {
  readonly maxRows: number;
  readonly maxLogitRows: number;
  forward(pool: KvPoolHandle, tokens: Int32Array, positions: Int32Array, segments: RowSegment[], logitRows: Int32Array): Float32Array;
  destroy(): void;
  /** Graphs with per-sequence state outside the pool (lfm2's convolution state): told when a sequence goes. */
  sequenceFreed?(seqId: number): void;
  /** Graphs with per-sequence state outside the pool: told after a truncation (deepseek4 rolls a rejected draft back). */
  sequenceTruncated?(seqId: number, length: number): void;
  /** deepseek4 loaded with mtp: its MTP block feeds along (mtpDrafter answers). */
  readonly mtp?: boolean;
  /** deepseek4 loaded with mtp: a drafter from the sequence's state (its MTP block), or null. */
  mtpDrafter?(seqId: number): MtpStepper | null;
  recurrentState?(seqId: number): ConvState | undefined;
  setRecurrentState?(seqId: number, state: ConvState): void;
  /** deepseek4: the sequence's state outside its full pages, for a unit (deepseek4-unit.ts), and its import. */
  unitState?(seqId: number): Deepseek4State | undefined;
  setUnitState?(seqId: number, state: Deepseek4State): void;
}

/** What the loader of an architecture with its own graph (gemma3, lfm2) hands loadEngine, which completes it into EngineParts. */
export interface ArchEngineParts<Cfg, GCfg> {
  config: Cfg;
  graphConfig: GCfg;
  kvLayout: KvLayout;
  /** The handles the engine's destroy() frees through ModelWeights (embedding, head, final norm). */
  weights: ModelWeights;
  ownedTensors: Parameters<Backend['free']>[0][];
  graph: (maxRows: number, maxLogitRows: number) => ForwardGraph;
}

export interface EngineParts<Tok, Cfg> {
  backend: Backend;
  graphConfig: GraphConfig | DeepseekGraphConfig | Gemma3GraphConfig | Lfm2GraphConfig | Deepseek4GraphConfig | GptOssGraphConfig;
  /**
   * Builds the forward pass for (maxRows, maxLogitRows); absent: LlamaGraph over
   * graphConfig and weights. Models with their own graph (deepseek2) pass it and
   * put all their handles in ownedTensors.
   */
  graph?: (maxRows: number, maxLogitRows: number) => ForwardGraph;
  /** Absent for a graph that keeps its weights itself (deepseek4: f32 on the host). */
  weights?: ModelWeights;
  /** Extra handles the engine frees on destroy (bias tensors, …). */
  ownedTensors: Parameters<Backend['free']>[0][];
  kvLayout: KvLayout;
  poolBytes: number;
  contextLength: number;
  fingerprint: string;
  tokenizer: Tok;
  config: Cfg;
  prefillChunk?: number;
  maxBatch?: number;
  /** Runs after destroy() freed everything (e.g. closes the GGUF the weights view). */
  onDestroy?: () => void;
}
