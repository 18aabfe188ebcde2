/**
 * Runs one RequestSpec (built once by the route, build-spec.ts) on the job
 * runner and streams what the client sees: `start` (cache usage known) →
 * `text`* → `end`. The per-request state lives in its Generation
 * (generation.ts); this file owns the job's lifetime: the client going away,
 * the request timeout, a stop string cancelling the job, the reply memory
 * (so the next turn re-uses the sampled ids).
 */
import { KvtError } from '../errors.ts';
import type { PromptCodec, ReplyMemory } from '../recipe/index.ts';
import type { JobEvent, JobRunner, RequestSpec } from '../workers/index.ts';
import { AsyncQueue } from './async-queue.ts';
import { Generation, type EndEvent, type GenerateEvent, type GenerateOptions, type SampledReply } from './generation.ts';
import type { ServeMetrics } from './metrics.ts';

export type { EndEvent, GenerateEvent, GenerateOptions, SampledReply } from './generation.ts';

export interface InferenceServiceOptions {
  codec: PromptCodec;
  runner: JobRunner;
  memory: ReplyMemory;
  metrics: ServeMetrics;
  requestTimeoutMs: number;
}

export class InferenceService {
  private readonly endListeners: ((spec: RequestSpec, end: EndEvent) => void)[] = [];

  constructor(private readonly options: InferenceServiceOptions) {}

  /**
   * Puts replies sampled elsewhere into this process's reply memory: a stored
   * response continued through another API process (REDIS_URL) re-uses the
   * ids its reply was sampled as, not a re-encoding of its text. Local only:
   * the process that generated them shared them already.
   */
  rememberReplies(tenantScope: string, replies: readonly SampledReply[]): void {
    for (const reply of replies) this.options.memory.remember(tenantScope, reply.text, reply.ids);
  }

  /** Called with every generation that completes (the stats recorder counts each API format once, with its tenant). */
  onEnd(listener: (spec: RequestSpec, end: EndEvent) => void): void {
    this.endListeners.push(listener);
  }

  async *generate(spec: RequestSpec, options: GenerateOptions, clientSignal: AbortSignal): AsyncGenerator<GenerateEvent> {
    const { codec, runner, metrics } = this.options;
    const generation = new Generation(spec, options, codec, metrics);
    const jobAbort = new AbortController();
    const onClientAbort = () => jobAbort.abort(new KvtError('KVT_ERR_INTERNAL', 'client went away'));
    // An already-aborted signal fires no 'abort' event: that client is gone before its job was queued.
    if (clientSignal.aborted) onClientAbort();
    else clientSignal.addEventListener('abort', onClientAbort, { once: true });
    const timer = setTimeout(
      () => jobAbort.abort(new KvtError('KVT_ERR_WORKER_TIMEOUT', `the request did not finish within ${this.options.requestTimeoutMs} ms`)),
      this.options.requestTimeoutMs,
    );
    const events = new AsyncQueue<JobEvent>();
    const finished = runner.run(spec, (event) => events.push(event), jobAbort.signal).then(
      () => events.end(),
      (error: unknown) => events.fail(error),
    );
    try {
      for await (const event of events) {
        if (event.type === 'error') throw new KvtError(event.code, event.message);
        yield* generation.accept(event);
        // A stop string ended the reply: the job is cancelled (its abort ends the loop through the runner).
        if (generation.stopSequence !== null && !jobAbort.signal.aborted) jobAbort.abort(new KvtError('KVT_ERR_INTERNAL', 'stop sequence reached'));
      }
      await finished;
    } catch (error) {
      // The route counts and reports the error (HTTP status, or an SSE error event once streaming).
      if (generation.stopSequence === null) throw error;
    } finally {
      clearTimeout(timer);
      clientSignal.removeEventListener('abort', onClientAbort);
      if (!jobAbort.signal.aborted && !generation.ended) jobAbort.abort(new KvtError('KVT_ERR_INTERNAL', 'consumer stopped'));
    }
    for (const event of generation.finish()) {
      if (event.type === 'end') {
        // Shared before the client sees the end (by the worker, or here): its next turn, sent to any API process, finds these ids.
        if (event.sampled.length > 0) await this.options.memory.share(spec.tenantSalt, event.sampled, event.sharedByWorker);
        for (const listener of this.endListeners) listener(spec, event);
      }
      yield event;
    }
  }
}
