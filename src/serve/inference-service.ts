/**
 * One generation, API-agnostic: prompt tokens in, an async stream of
 * `start` (cache usage known) → `text`* → `end` out. The routes shape these
 * into OpenAI or Anthropic responses.
 *
 * Here live the request limits (context, max_tokens), the request timeout,
 * detokenizing, stop strings, tool-call splitting, the reply memory (so the
 * next turn re-uses the sampled ids) and the per-request metrics.
 */
import { randomUUID } from 'node:crypto';

import { KvtError } from '../errors.ts';
import { checkConstraintBudget, StopStringMatcher, ToolCallStreamSplitter, type ConstraintSpec, type CacheUsage, type FinishReason, type PromptCodec, type ReplyMemory, type SamplingRequest, type ToolCall } from '../recipe/index.ts';
import { contentIdsOf, promptOpensThinking, ReasoningSplitter } from '../recipe/reasoning.ts';
import type { JobEvent, JobRunner, PrefillJob } from '../workers/index.ts';
import type { CacheRetentionHint } from '../recipe/cache-retention.ts';
import type { TenantIdentity } from './auth.ts';
import type { ServeMetrics } from './metrics.ts';

export interface GenerateRequest {
  route: string;
  /** The prompt's ids as the recipe built them (src/recipe/chat-prompt.ts): carried to the engine without a conversion. */
  tokens: Uint32Array;
  sampling: SamplingRequest;
  identity: TenantIdentity;
  trafficClass: string;
  parseToolCalls: boolean;
  /** false: the reply is returned raw, a think block included (/v1/completions). Default: split it off (recipe/reasoning.ts). */
  splitReasoning?: boolean;
  /** Request field that holds the prompt, for error messages. */
  promptParam: string;
  /** Structured output (response_format, a forced tool call): compiled and checked by the route's codec. */
  constraint?: ConstraintSpec;
  /** Retention the client asked for (recipe/cache-retention.ts); absent: the class TTL. */
  retention?: CacheRetentionHint;
}

export type GenerateEvent =
  | { type: 'start'; usage: CacheUsage }
  | { type: 'text'; text: string }
  /** Thinking text of templates with a think block (recipe/reasoning.ts), apart from the content. */
  | { type: 'reasoning'; text: string }
  /** reasoning: null when the reply had no think block. */
  | { type: 'end'; content: string; reasoning: string | null; reasoningTokens: number; sampled: SampledReply[]; toolCalls: ToolCall[]; finishReason: FinishReason; stopSequence: string | null; usage: CacheUsage; workerMs: number; queueMs: number };

/** A reply text and the ids it was sampled as (what the reply memory keeps for the next turn). */
export interface SampledReply {
  text: string;
  ids: number[];
}

export interface InferenceServiceOptions {
  codec: PromptCodec;
  runner: JobRunner;
  memory: ReplyMemory;
  metrics: ServeMetrics;
  modelId: string;
  contextLength: number;
  requestTimeoutMs: number;
}

export class InferenceService {
  constructor(private readonly options: InferenceServiceOptions) {}

  /**
   * Puts replies sampled elsewhere into this process's reply memory: a stored
   * response continued through another API process (REDIS_URL) re-uses the
   * ids its reply was sampled as, not a re-encoding of its text.
   */
  rememberReplies(tenantScope: string, replies: readonly SampledReply[]): void {
    for (const reply of replies) this.options.memory.remember(tenantScope, reply.text, reply.ids);
  }

  /** Throws the 4xx of a request that cannot run (before anything is queued). */
  check(request: GenerateRequest): void {
    const { contextLength } = this.options;
    if (request.tokens.length === 0) throw new KvtError('KVT_ERR_REQUEST_EMPTY_PROMPT', `${request.promptParam} renders to no tokens`, { param: request.promptParam });
    if (request.tokens.length >= contextLength) {
      throw new KvtError('KVT_ERR_REQUEST_CONTEXT_OVERFLOW', `${request.promptParam} is ${request.tokens.length} tokens; the context length is ${contextLength}`, { param: request.promptParam });
    }
    if (request.tokens.length + request.sampling.maxTokens > contextLength) {
      throw new KvtError(
        'KVT_ERR_REQUEST_MAX_TOKENS',
        `max_tokens ${request.sampling.maxTokens} + prompt ${request.tokens.length} tokens exceeds the context length ${contextLength}; use max_tokens ≤ ${contextLength - request.tokens.length}`,
        { param: 'max_tokens' },
      );
    }
    checkConstraintBudget(request.constraint, request.sampling.maxTokens);
  }

  async *generate(request: GenerateRequest, clientSignal: AbortSignal): AsyncGenerator<GenerateEvent> {
    this.check(request);
    const { codec, runner, metrics } = this.options;
    const acceptedAt = performance.now();
    const job: PrefillJob = {
      id: randomUUID(),
      model: this.options.modelId,
      tenant: request.identity.tenant,
      tenantSalt: request.identity.saltHex,
      trafficClass: request.trafficClass,
      // Typed once, by the recipe: the job carries the ids as they are to the engine (workers/job.ts).
      tokens: request.tokens,
      sampling: {
        maxTokens: request.sampling.maxTokens,
        // A temperature so small that 1/t overflows is greedy decoding (the sampler draws with 1/t).
        temperature: Number.isFinite(1 / request.sampling.temperature) ? request.sampling.temperature : 0,
        topP: request.sampling.topP,
        topK: request.sampling.topK,
        seed: request.sampling.seed,
        stopTokenIds: [...codec.stopTokenIds],
        ...(request.sampling.logitBias ? { logitBias: request.sampling.logitBias } : {}),
        ...(request.sampling.presencePenalty ? { presencePenalty: request.sampling.presencePenalty } : {}),
        ...(request.sampling.frequencyPenalty ? { frequencyPenalty: request.sampling.frequencyPenalty } : {}),
      },
      submittedAt: Date.now(),
      ...(request.constraint ? { constraint: request.constraint } : {}),
      ...(request.retention ? { retention: request.retention } : {}),
    };
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
    const finished = runner.run(job, (event) => events.push(event), jobAbort.signal).then(
      () => events.end(),
      (error: unknown) => events.fail(error),
    );
    const stopIds = new Set(codec.stopTokenIds);
    const detokenizer = codec.createDetokenizer();
    const stops = new StopStringMatcher(request.sampling.stopStrings);
    const splitter = new ToolCallStreamSplitter(request.parseToolCalls);
    // A prompt ending in `<think>` (the generation prompt opened it) starts the reply inside the reasoning,
    // unless a grammar holds the reply: then it is the constrained content from its first token.
    let reasoningTokens = 0;
    let countingReasoning = true;
    const thinking = new ReasoningSplitter(request.splitReasoning === false ? 'off' : request.constraint === undefined && promptOpensThinking(codec.decode(request.tokens.slice(-8))));
    const replyIds: number[] = [];
    let rawText = '';
    let usage: CacheUsage = { promptTokens: request.tokens.length, cachedTokens: 0, computedTokens: request.tokens.length, storedPromptTokens: 0, completionTokens: 0 };
    let firstTokenAt: number | null = null;
    let stopSequence: string | null = null;
    let done: Extract<JobEvent, { type: 'done' }> | null = null;
    let queueMs = 0;
    try {
      for await (const event of events) {
        if (event.type === 'error') throw new KvtError(event.code, event.message);
        if (event.type === 'prefilled') {
          usage = { ...usage, cachedTokens: event.cachedTokens, computedTokens: event.promptTokens - event.cachedTokens, storedPromptTokens: event.storedPromptTokens };
          queueMs = event.queueMs;
          if (event.storageError) metrics.storageFaults.inc({ phase: 'lookup' });
          yield { type: 'start', usage };
          continue;
        }
        if (event.type === 'tokens') {
          if (firstTokenAt === null) {
            firstTokenAt = performance.now();
            metrics.ttft.observe({ route: request.route }, (firstTokenAt - acceptedAt) / 1000);
          }
          if (stopSequence !== null) continue;
          for (const id of event.ids) {
            usage.completionTokens++;
            if (stopIds.has(id)) continue;
            replyIds.push(id);
            const piece = detokenizer.push(id);
            if (piece === '') continue;
            const { text, stopped } = stops.push(piece);
            rawText += text;
            const split = thinking.push(text);
            // Reasoning tokens: every token up to the one that closed the think block.
            if (thinking.opened && countingReasoning) reasoningTokens = usage.completionTokens;
            if (thinking.opened && !thinking.inReasoning) countingReasoning = false;
            if (split.reasoning !== '') yield { type: 'reasoning', text: split.reasoning };
            const safe = splitter.push(split.content);
            if (safe !== '') yield { type: 'text', text: safe };
            if (stopped !== null) {
              stopSequence = stopped;
              jobAbort.abort(new KvtError('KVT_ERR_INTERNAL', 'stop sequence reached'));
              break;
            }
          }
          continue;
        }
        done = event;
      }
      await finished;
    } catch (error) {
      // The route counts and reports the error (HTTP status, or an SSE error event once streaming).
      if (stopSequence === null) throw error;
    } finally {
      clearTimeout(timer);
      clientSignal.removeEventListener('abort', onClientAbort);
      if (!jobAbort.signal.aborted && done === null) jobAbort.abort(new KvtError('KVT_ERR_INTERNAL', 'consumer stopped'));
    }
    if (stopSequence === null) {
      const tail = stops.push(detokenizer.flush()).text + stops.flush();
      rawText += tail;
      const split = thinking.push(tail);
      if (split.reasoning !== '') yield { type: 'reasoning', text: split.reasoning };
      const safe = splitter.push(split.content);
      if (safe !== '') yield { type: 'text', text: safe };
    }
    const last = thinking.finish();
    if (last.reasoning !== '') yield { type: 'reasoning', text: last.reasoning };
    if (last.content !== '') {
      const safe = splitter.push(last.content);
      if (safe !== '') yield { type: 'text', text: safe };
    }
    const rest = splitter.finish();
    if (rest.content !== '') yield { type: 'text', text: rest.content };
    // The next turn sends this reply back: remember its exact ids (only when they decode to exactly what we return).
    const sampled: SampledReply[] = [];
    if (stopSequence === null && replyIds.length > 0 && rawText !== '' && codec.decode(replyIds) === rawText) {
      sampled.push({ text: rawText, ids: replyIds });
      // The next turn sends back the content alone (templates drop earlier reasoning): remember its own ids too.
      const contentIds = thinking.opened ? contentIdsOf(codec, thinking.content, replyIds) : null;
      if (contentIds) sampled.push({ text: thinking.content, ids: contentIds });
      this.rememberReplies(request.identity.scope, sampled);
    }
    const finishReason: FinishReason = rest.toolCalls.length > 0 ? 'tool_calls' : done?.finishReason === 'length' && stopSequence === null ? 'length' : 'stop';
    metrics.countPrompt(usage.promptTokens, usage.cachedTokens);
    metrics.prefillTokens.inc(usage.computedTokens);
    metrics.decodeTokens.inc(Math.max(0, usage.completionTokens - 1));
    const workerMs = done?.workerMs ?? 0;
    metrics.workerMs.observe(workerMs / 1000);
    if (done?.speculative) metrics.countSpeculative(done.speculative);
    if (firstTokenAt !== null && usage.completionTokens > 1) {
      metrics.timePerOutputToken.observe({ route: request.route }, (performance.now() - firstTokenAt) / 1000 / (usage.completionTokens - 1));
    }
    const content = rest.toolCalls.length > 0 ? splitterContent(thinking.content) : thinking.content;
    yield { type: 'end', content, reasoning: thinking.opened ? thinking.reasoning : null, reasoningTokens: thinking.opened ? (thinking.inReasoning ? usage.completionTokens : reasoningTokens) : 0, sampled, toolCalls: rest.toolCalls, finishReason, stopSequence, usage, workerMs, queueMs };
  }
}

/** The content before the first tool call (what the splitter streamed). */
function splitterContent(rawText: string): string {
  const at = rawText.indexOf('<tool_call>');
  return (at === -1 ? rawText : rawText.slice(0, at)).replace(/\s+$/, '');
}

/** A push-based async iterable: the runner's callbacks in, `for await` out. */
export class AsyncQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private waiter: (() => void) | null = null;
  private ended = false;
  private error: unknown = null;
  private failed = false;

  push(item: T): void {
    this.items.push(item);
    this.wake();
  }
  end(): void {
    this.ended = true;
    this.wake();
  }
  fail(error: unknown): void {
    this.failed = true;
    this.error = error;
    this.wake();
  }
  private wake(): void {
    const waiter = this.waiter;
    this.waiter = null;
    waiter?.();
  }
  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      if (this.items.length > 0) {
        yield this.items.shift()!;
        continue;
      }
      if (this.failed) throw this.error;
      if (this.ended) return;
      await new Promise<void>((resolve) => (this.waiter = resolve));
    }
  }
}
