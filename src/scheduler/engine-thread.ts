/**
 * worker_threads entry: the thread that owns the engine and the cache tier.
 * The engine's calls are CPU-heavy and synchronous; running them here keeps
 * the owner's event loop (HTTP, or BullMQ lock renewal) responsive while
 * tokens stream.
 *
 *   owner ─ init ─▶ thread   loads the model, opens storage + KvTier ─▶ ready {fingerprint, contextLength, …}
 *   owner ─ submit/cancel ─▶ thread ─ event {jobId, JobEvent} ─▶ owner
 *   owner ─ admin {requestId, call} ─▶ thread ─ adminResult ─▶ owner
 */
import { parentPort, workerData } from 'node:worker_threads';

import { adjustsLogits, loadEngine, Sampler, type Sequence } from '../../inference-core/index.ts';
import { GrammarCursor, planSpeculativeBatch, SpeculativeSession } from '../../inference-core/speculative/index.ts';
import { constrainedDecoder, grammarOf, masksOf, vocabOf } from '../../inference-core/grammar/index.ts';
import type { RequestSpec } from './job.ts';
import { FetchOrRecompute } from '../cluster/index.ts';
import { openBlobStore, type BlobStore } from '../../storage-adapters/index.ts';
import { BlockSealer, CodecGate, KvTier, RedisPolicyStore, type PolicyStore } from '../kvtier/index.ts';
import { KvTierCache } from './cache-adapter.ts';
import type { EngineThreadInit, FromEngineThread, ToEngineThread } from './engine-thread-protocol.ts';
import { PrefillScheduler } from './prefill-scheduler.ts';
import type { EngineModel } from './ports.ts';
import { adminCall } from './tier-admin.ts';
import { checkBlockTokens } from './block-tokens-check.ts';


const port = parentPort;
if (!port) throw new Error('engine-thread.ts runs as a worker thread (new Worker(...)), not as a script');

const send = (message: FromEngineThread): void => port.postMessage(message);
/** Rows one speculative verification feeds at most (the last token + 7 drafts). */
const SPEC_ROWS = 8;

async function main(init: EngineThreadInit): Promise<void> {
  const speculative = init.speculative ?? 'off';
  // Verifying drafts returns logits for every drafted row: room for SPEC_ROWS logit rows per sequence.
  const logitRowsPerSequence = speculative === 'off' ? 1 : SPEC_ROWS;
  const engine = await loadEngine(init.model, { dataDir: init.dataDir, threads: init.threads, poolBytes: init.poolBytes, maxBatch: Math.max(1, init.maxBatch) * logitRowsPerSequence });
  checkBlockTokens(init.blockTokens, engine.kvLayout.tokensPerBlock);
  const draftEngine = speculative === 'draft' ? await loadEngine(init.draftModel!, { dataDir: init.dataDir, threads: init.threads, poolBytes: init.poolBytes }) : null;
  let tier: KvTier | null = null;
  let blobStore: BlobStore | null = null;
  let policyStore: PolicyStore | undefined;
  let cacheProblem: string | undefined;
  try {
    blobStore = await openBlobStore(init.storage);
    policyStore = init.redisUrl ? await RedisPolicyStore.open({ url: init.redisUrl }) : undefined;
    tier = await KvTier.open({ dataDir: init.dataDir, store: blobStore, blockTokens: init.blockTokens, hotCacheBytes: init.hotCacheBytes, policyStore, gcIntervalMs: init.gcIntervalMs, metadataRedisUrl: init.redisUrl ?? '', seal: init.encryption ? new BlockSealer(init.encryption) : undefined });
  } catch (error) {
    // A cache that cannot open must not stop serving: every request is then a (correct) full prefill.
    cacheProblem = `${(error as { code?: string }).code ?? 'KVT_ERR_INTERNAL'}: ${(error as Error).message}`;
    send({ type: 'log', level: 'error', message: `cache tier unavailable, serving without it: ${cacheProblem}` });
  }
  const cache = tier ? await KvTierCache.create(tier, engine.kvLayout) : null;
  const model: EngineModel = {
    fingerprint: engine.fingerprint,
    contextLength: engine.contextLength,
    createSequence: () => engine.createSequence(),
    freeBlocks: () => engine.pool.freePages,
    totalBlocks: () => engine.pool.pages,
    maxStepTokens: engine.prefillChunk,
    maxLogitRows: engine.maxBatch,
    step: (items) => engine.step(items.map(({ sequence, tokens, logits }) => ({ seq: sequence as Sequence, tokens, logits }))),
  };
  const storageFaults: Record<string, number> = {};
  /** Constrained jobs under speculation: the grammar after the tokens sampled so far, until the session takes it. */
  const grammarTracks = new WeakMap<RequestSpec, { cursor: GrammarCursor }>();
  const scheduler = new PrefillScheduler({
    engine: model,
    cache,
    fetchPolicy: init.fetchPolicy === 'load' ? undefined : new FetchOrRecompute(),
    stepTokens: init.stepTokens,
    retainSequences: init.retainSequences,
    blockTokens: init.blockTokens,
    maxBatch: init.maxBatch,
    emit: (jobId, event) => send({ type: 'event', jobId, event }),
    createSampler: (job) => {
      const s = job.sampling;
      const sampler = new Sampler({
        temperature: s.temperature, topK: s.topK, topP: s.topP, seed: s.seed, stopTokens: s.stopTokenIds,
        ...(s.logitBias ? { logitBias: s.logitBias } : {}), presencePenalty: s.presencePenalty ?? 0, frequencyPenalty: s.frequencyPenalty ?? 0,
      });
      if (!job.constraint) return { sample: (logits) => sampler.sample(logits) };
      if (speculative !== 'off' && !adjustsLogits(job.sampling)) {
        // Speculative decoding takes over after the first token: that token goes through the grammar cursor the
        // session carries on with (same masks as the decoder below; speculative-constrained.test.ts checks that).
        const track = { cursor: GrammarCursor.start(masksOf(grammarOf(job.constraint), vocabOf(engine.tokenizer)), job.sampling.maxTokens, job.sampling.stopTokenIds) };
        grammarTracks.set(job, track);
        return {
          sample: (logits) => {
            const token = sampler.sample(logits, track.cursor.mask());
            track.cursor = track.cursor.advance(token);
            return token;
          },
        };
      }
      // Structured output: the grammar's mask (cached per schema and vocabulary) before every pick.
      const decoder = constrainedDecoder(job.constraint, engine.tokenizer, job.sampling.maxTokens, job.sampling.stopTokenIds);
      return {
        sample: (logits) => {
          const token = sampler.sample(logits, decoder.nextMask());
          decoder.accept(token);
          return token;
        },
      };
    },
    createSpeculative: (job, sequence, context) => {
      // The drafts are verified against the model's own distribution; a request that shifts logits (bias, penalties) decodes plainly.
      if (speculative === 'off' || adjustsLogits(job.sampling)) return null;
      // A constrained reply continues from the grammar after its first token (sampled by createSampler's sampler).
      const track = job.constraint ? grammarTracks.get(job) : undefined;
      if (job.constraint && !track) return null;
      grammarTracks.delete(job);
      const s = job.sampling;
      return new SpeculativeSession({
        target: sequence as Sequence,
        context,
        sampling: { temperature: s.temperature, topK: s.topK, topP: s.topP, seed: s.seed, stopTokens: s.stopTokenIds },
        mode: speculative,
        ...(draftEngine ? { draftEngine } : {}),
        length: { mode: 'adaptive', maxDraft: SPEC_ROWS - 1 },
        ...(track ? { constraint: track.cursor } : {}),
      });
    },
    // Draft-model steps of all decoding sequences in one draft-engine step per draft position.
    planSpeculative: (batch) => planSpeculativeBatch(batch.map(({ decoder, limit }) => ({ session: decoder as SpeculativeSession, limit }))),
    onStorageError: (phase, error) => {
      storageFaults[phase] = (storageFaults[phase] ?? 0) + 1;
      send({ type: 'log', level: 'warn', message: `storage ${phase} fault (degraded to a miss): ${(error as Error).message}` });
    },
  });
  // Block codecs a policy change names are measured on this engine before they are accepted (once per codec).
  const codecGate = new CodecGate(engine);
  port!.on('message', (message: ToEngineThread) => {
    if (message.type === 'submit') scheduler.submit(message.job);
    else if (message.type === 'cancel') scheduler.cancel(message.jobId);
    else if (message.type === 'admin') {
      // A purge also empties this thread's own cache in front of the tier (retained sequences); the tier's pending writes land before it deletes.
      if (message.call.op === 'purge') scheduler.dropRetained();
      adminCall(tier, message.call, { scheduler: scheduler.depth, storageFaults, cacheProblem }, codecGate)
        .then((result) => send({ type: 'adminResult', requestId: message.requestId, ok: true, result }))
        .catch((error: unknown) =>
          send({ type: 'adminResult', requestId: message.requestId, ok: false, error: { code: (error as { code?: string }).code ?? 'KVT_ERR_INTERNAL', message: (error as Error).message } }),
        );
    } else if (message.type === 'close') {
      void (async () => {
        await scheduler.close();
        await tier?.close();
        await policyStore?.close();
        await blobStore?.close();
        engine.destroy();
        draftEngine?.destroy();
        send({ type: 'closed' });
      })();
    }
  });
  // The owner reads the policy from these notifications (route class checks, response TTLs), never by asking.
  tier?.policy.onChange((policy) => send({ type: 'policy', doc: policy.doc }));
  send({ type: 'ready', fingerprint: engine.fingerprint, contextLength: engine.contextLength, modelPath: engine.modelPath, cacheProblem, ...(tier ? { policy: tier.policy.current().doc } : {}) });
}

main(workerData as EngineThreadInit).catch((error: unknown) => {
  send({ type: 'fatal', error: { code: (error as { code?: string }).code ?? 'KVT_ERR_INTERNAL', message: (error as Error).message } });
});
