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

import { loadEngine, type Sequence } from '../../inference-core/index.ts';
import { FetchOrRecompute } from '../cluster/index.ts';
import { openBlobStore, type BlobStore } from '../../storage-adapters/index.ts';
import { parkThreads } from '../../native/index.ts';
import { BlockSealer, CodecGate, KvTier, RedisPolicyStore, type PolicyStore } from '../kvtier/index.ts';
import { KvTierCache } from './cache-adapter.ts';
import { engineDecoders } from './engine-decoders.ts';
import { wireError, type EngineThreadInit, type FromEngineThread, type ToEngineThread } from './engine-thread-protocol.ts';
import { PrefillScheduler } from './prefill-scheduler.ts';
import type { EngineModel } from './ports.ts';
import { adminCall } from './tier-admin.ts';
import { checkBlockTokens } from './block-tokens-check.ts';
import { UnitPolicy, unitServing } from './units.ts';


const port = parentPort;
if (!port) throw new Error('engine-thread.ts runs as a worker thread (new Worker(...)), not as a script');

const send = (message: FromEngineThread): void => port.postMessage(message);
/** Rows one speculative verification feeds at most (the last token + 7 drafts). */
const SPEC_ROWS = 8;

async function main(init: EngineThreadInit): Promise<void> {
  const speculative = init.speculative ?? 'off';
  // Verifying drafts returns logits for every drafted row: room for SPEC_ROWS logit rows per sequence.
  const logitRowsPerSequence = speculative === 'off' ? 1 : SPEC_ROWS;
  // mtp: the model's own MTP block drafts (deepseek4); a model without one fails to load with a typed error
  const engine = await loadEngine(init.model, { dataDir: init.dataDir, threads: init.threads, poolBytes: init.poolBytes, maxBatch: Math.max(1, init.maxBatch) * logitRowsPerSequence, mtp: speculative === 'mtp' });
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
    const wire = wireError(error);
    cacheProblem = `${wire.code}: ${wire.message}`;
    send({ type: 'log', level: 'error', message: `cache tier unavailable, serving without it: ${cacheProblem}` });
  }
  // Served from the tier as whole-page blocks when they are the state; as prefix units (#26, units.ts) when a
  // unit holds it all (gemma3's sliding layers, lfm2's convolution state, deepseek4's windows and compressor rows):
  // blocks of the unit's block layers are stored but only hit as part of a unit; a retained sequence is continued
  // only when it is a whole prefix of the prompt (units.ts takeWholeDonor); tier off when neither does.
  const serving = unitServing(engine);
  if (serving.mode === 'units') send({ type: 'log', level: 'info', message: `${engine.modelPath}: its state is not a chain of K/V blocks (sliding-window, compressed or recurrent layers); serving with prefix units` });
  if (serving.mode === 'off') send({ type: 'log', level: 'info', message: `${engine.modelPath}: its state is not a chain of K/V blocks and no unit holds it; block tier off for this model, nothing is stored or loaded` });
  const cache = tier && serving.mode !== 'off' ? await KvTierCache.create(tier, serving.layout) : null;
  const units = cache && serving.port ? new UnitPolicy(serving.port, cache, { intervalTokens: init.unitIntervalTokens, commonPrefixRequests: init.unitCommonPrefixRequests }) : null;
  const model: EngineModel<Sequence> = {
    // the cache namespace's fingerprint (unit blocks of a layer subset have their own)
    fingerprint: serving.fingerprint,
    contextLength: engine.contextLength,
    createSequence: () => engine.createSequence(),
    freeBlocks: () => engine.pool.freePages,
    totalBlocks: () => engine.pool.pages,
    maxStepTokens: engine.prefillChunk,
    maxLogitRows: engine.maxBatch,
    step: (items) => engine.step(items.map(({ sequence, tokens, logits }) => ({ seq: sequence, tokens, logits }))),
    idle: parkThreads,
  };
  const storageFaults: Record<string, number> = {};
  const scheduler = new PrefillScheduler({
    engine: model,
    cache,
    fetchPolicy: init.fetchPolicy === 'load' ? undefined : new FetchOrRecompute(),
    stepTokens: init.stepTokens,
    // Unit mode retains only with its fetch (units.ts takeWholeDonor continues a retained sequence only whole); without
    // it (tier unavailable) the block fetch would cut a retained sequence back, which a window or recurrent state cannot be.
    retainSequences: serving.mode === 'blocks' || units !== null ? init.retainSequences : 0,
    units,
    blockTokens: init.blockTokens,
    maxBatch: init.maxBatch,
    emit: (jobId, event) => send({ type: 'event', jobId, event }),
    decoders: engineDecoders(engine, { speculative, draftEngine, maxRows: SPEC_ROWS }),
    onStorageError: (phase, error) => {
      storageFaults[phase] = (storageFaults[phase] ?? 0) + 1;
      send({ type: 'log', level: 'warn', message: `storage ${phase} fault (degraded to a miss): ${wireError(error).message}` });
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
        .then((reply) => send({ type: 'adminResult', requestId: message.requestId, ok: true, reply }))
        .catch((error: unknown) =>
          send({ type: 'adminResult', requestId: message.requestId, ok: false, error: wireError(error) }),
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

const init: EngineThreadInit = workerData;
main(init).catch((error: unknown) => send({ type: 'fatal', error: wireError(error) }));
