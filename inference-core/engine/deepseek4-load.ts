/**
 * The deepseek4 parts of an Engine: config, the page layout of its growing
 * state (deepseek4-pages.ts), the weights (f32 on the host, deepseek4-weights.ts)
 * and the graph factory (load-model.ts picks this by general.architecture).
 * CPU only: the graph writes compressed entries into pages in place.
 */
import type { Backend } from '../../native/index.ts';
import type { GgufFile } from '../gguf/index.ts';
import type { KvLayout } from '../kv/kv-pool.ts';
import type { ForwardGraph } from './engine-parts.ts';
import { EngineError } from './engine-errors.ts';
import type { Deepseek4Config } from './deepseek4-config.ts';
import { Deepseek4Model } from './deepseek4-forward.ts';
import { Deepseek4Graph, type Deepseek4GraphConfig, type PageViewBackend } from './deepseek4-graph.ts';
import { checkMtp } from './deepseek4-mtp.ts';
import { deepseek4KvLayout, deepseek4PageLayout } from './deepseek4-pages.ts';

export interface Deepseek4EngineParts {
  config: Deepseek4Config & { ctxLen: number };
  graphConfig: Deepseek4GraphConfig;
  kvLayout: KvLayout;
  graph: (maxRows: number, maxLogitRows: number) => ForwardGraph;
}

/** `mtp`: the MTP block drafts (KVTIER_SPECULATIVE=mtp); the file must have one. */
export function deepseek4EngineParts(backend: Backend, gguf: GgufFile, mtp = false): Deepseek4EngineParts {
  const pv = backend as Partial<PageViewBackend>;
  if (typeof pv.pageView !== 'function') {
    throw new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', `${gguf.path}: deepseek4 runs on the cpu backend only (its state is written into pool pages in place); the ${backend.name} backend has no page view (KVTIER_DEVICE=cpu)`);
  }
  const model = new Deepseek4Model(gguf);
  if (mtp) checkMtp(model);
  // mat-vecs on the native kernels (the TypeScript loop stays the reference twin)
  const cfg = model.cfg;
  model.useNative(backend, gguf).preload(cfg.nLayer, mtp, cfg.oLoraRank);
  const pages = deepseek4PageLayout(cfg);
  const graphConfig: Deepseek4GraphConfig = { architecture: 'deepseek4', vocabSize: cfg.nVocab, cfg, pages };
  const ctxLen = gguf.optU32('deepseek4.context_length');
  if (ctxLen === undefined) throw new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', `${gguf.path}: deepseek4.context_length is missing`);
  return {
    config: { ...cfg, ctxLen },
    graphConfig,
    kvLayout: deepseek4KvLayout(pages),
    graph: (maxRows, maxLogitRows) => new Deepseek4Graph(backend as PageViewBackend, graphConfig, model, maxRows, maxLogitRows, mtp),
  };
}
