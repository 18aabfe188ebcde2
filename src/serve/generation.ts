/**
 * One generation on the API side: everything a request keeps between its
 * job's events (detokenizer, stop strings, tool-call and reasoning
 * splitting, usage, timings), in one object. InferenceService feeds it the
 * job's events in order; it answers with what the route streams.
 *
 *   prefilled ─▶ start (usage known)
 *   tokens    ─▶ text* / reasoning*   (until a stop string: `stopSequence` set, the job is then cancelled)
 *   done      ─▶ remembered
 *   finish()  ─▶ the tail text, then end (content, tool calls, finish reason, usage); metrics counted once
 */
import {
  HarmonySplitter,
  ReasoningSplitter,
  replyFormOf,
  replySplitter,
  sampledReplies,
  StopStringMatcher,
  type ReplyForm,
  type SampledReply,
  ToolCallStreamSplitter,
  type CacheUsage,
  type FinishReason,
  type PromptCodec,
  type ToolCall,
} from '../recipe/index.ts';
import type { JobEvent, RequestSpec } from '../workers/index.ts';
import type { ServeMetrics } from './metrics.ts';

export type GenerateEvent =
  | { type: 'start'; usage: CacheUsage }
  | { type: 'text'; text: string }
  /** Thinking text of templates with a think block (recipe/reasoning.ts), apart from the content. */
  | { type: 'reasoning'; text: string }
  /** reasoning: null when the reply had no think block. */
  /** sampled: what the reply memory keeps; sharedByWorker: the worker wrote its shared records already (JobEvent done). */
  | { type: 'end'; content: string; reasoning: string | null; reasoningTokens: number; sampled: SampledReply[]; sharedByWorker: boolean; toolCalls: ToolCall[]; finishReason: FinishReason; stopSequence: string | null; usage: CacheUsage; workerMs: number; queueMs: number };

export type EndEvent = Extract<GenerateEvent, { type: 'end' }>;

export type { SampledReply };

/** What the route decides about a generation beyond its spec. */
export interface GenerateOptions {
  /** Route label of the metrics. */
  route: string;
  parseToolCalls: boolean;
  /** false: the reply is returned raw, a think block included (/v1/completions). Default: split it off (recipe/reasoning.ts). */
  splitReasoning?: boolean;
}

export class Generation {
  /** The stop string that ended the reply (the job is cancelled then), or null. */
  stopSequence: string | null = null;
  private readonly acceptedAt = performance.now();
  private readonly stopIds: Set<number>;
  private readonly detokenizer: { push(id: number): string; flush(): string };
  private readonly stops: StopStringMatcher;
  private readonly splitter: ToolCallStreamSplitter;
  private readonly form: ReplyForm;
  /** `<think>` blocks, or harmony's channels (gpt-oss: the prompt ends in `<|start|>assistant`). */
  private readonly thinking: ReasoningSplitter | HarmonySplitter;
  private readonly harmony: HarmonySplitter | null;
  private reasoningTokens = 0;
  private countingReasoning = true;
  private readonly replyIds: number[] = [];
  /** The end-of-generation id that ended the reply, if one did. */
  private stopId: number | null = null;
  private rawText = '';
  private usage: CacheUsage;
  private firstTokenAt: number | null = null;
  private done: Extract<JobEvent, { type: 'done' }> | null = null;
  private queueMs = 0;

  constructor(
    readonly spec: RequestSpec,
    private readonly options: GenerateOptions,
    private readonly codec: PromptCodec,
    private readonly metrics: ServeMetrics,
  ) {
    this.stopIds = new Set(codec.stopTokenIds);
    this.detokenizer = codec.createDetokenizer();
    this.stops = new StopStringMatcher(spec.sampling.stopStrings ?? []);
    // harmony (gpt-oss): channels carry reasoning, content and tool calls (recipe/harmony.ts); a prompt ending in
    // `<think>` starts the reply inside the reasoning; a grammar-held reply is plain content (recipe/sampled-replies.ts)
    this.form = replyFormOf(codec, spec, options.splitReasoning !== false);
    this.thinking = replySplitter(this.form);
    this.harmony = this.thinking instanceof HarmonySplitter ? this.thinking : null;
    this.splitter = new ToolCallStreamSplitter(options.parseToolCalls && this.harmony === null);
    const promptTokens = spec.tokens.length;
    this.usage = { promptTokens, cachedTokens: 0, computedTokens: promptTokens, storedPromptTokens: 0, completionTokens: 0 };
  }

  /** True once the job said it is done (a stop string may end the reply before). */
  get ended(): boolean {
    return this.done !== null;
  }

  /** One job event (never `error`: the caller throws those) → what the client sees now. */
  accept(event: Exclude<JobEvent, { type: 'error' }>): GenerateEvent[] {
    if (event.type === 'prefilled') {
      this.usage = { ...this.usage, cachedTokens: event.cachedTokens, computedTokens: event.promptTokens - event.cachedTokens, storedPromptTokens: event.storedPromptTokens };
      this.queueMs = event.queueMs;
      if (event.storageError) this.metrics.storageFaults.inc({ phase: 'lookup' });
      return [{ type: 'start', usage: this.usage }];
    }
    if (event.type === 'done') {
      this.done = event;
      return [];
    }
    if (this.firstTokenAt === null) {
      this.firstTokenAt = performance.now();
      this.metrics.ttft.observe({ route: this.options.route }, (this.firstTokenAt - this.acceptedAt) / 1000);
    }
    const out: GenerateEvent[] = [];
    if (this.stopSequence !== null) return out;
    for (const id of event.ids) {
      this.usage.completionTokens++;
      if (this.stopIds.has(id)) {
        this.stopId = id;
        continue;
      }
      this.replyIds.push(id);
      const piece = this.detokenizer.push(id);
      if (piece === '') continue;
      const { text, stopped } = this.stops.push(piece);
      this.rawText += text;
      const split = this.thinking.push(text);
      // Reasoning tokens: every token up to the one that closed the think block.
      if (this.thinking.opened && this.countingReasoning) this.reasoningTokens = this.usage.completionTokens;
      if (this.thinking.opened && !this.thinking.inReasoning) this.countingReasoning = false;
      if (split.reasoning !== '') out.push({ type: 'reasoning', text: split.reasoning });
      const safe = this.splitter.push(split.content);
      if (safe !== '') out.push({ type: 'text', text: safe });
      if (stopped !== null) {
        this.stopSequence = stopped;
        break;
      }
    }
    return out;
  }

  /** The job ended: the held-back tail, then the end event; the reply is remembered and the metrics counted. */
  finish(): GenerateEvent[] {
    const { thinking, splitter, usage, metrics } = this;
    const out: GenerateEvent[] = [];
    const emit = (split: { reasoning: string; content: string }, always: boolean) => {
      if (split.reasoning !== '') out.push({ type: 'reasoning', text: split.reasoning });
      const safe = always || split.content !== '' ? splitter.push(split.content) : '';
      if (safe !== '') out.push({ type: 'text', text: safe });
    };
    if (this.stopSequence === null) {
      const tail = this.stops.push(this.detokenizer.flush()).text + this.stops.flush();
      this.rawText += tail;
      emit(thinking.push(tail), true);
    }
    emit(thinking.finish(), false);
    const rest = splitter.finish();
    if (rest.content !== '') out.push({ type: 'text', text: rest.content });
    if (this.harmony && this.options.parseToolCalls) rest.toolCalls = this.harmony.toolCalls(this.rawText);
    const sampled = this.sampledReplies();
    const done = this.done;
    const finishReason: FinishReason = rest.toolCalls.length > 0 ? 'tool_calls' : done?.finishReason === 'length' && this.stopSequence === null ? 'length' : 'stop';
    metrics.countPrompt(usage.promptTokens, usage.cachedTokens);
    metrics.prefillTokens.inc(usage.computedTokens);
    metrics.decodeTokens.inc(Math.max(0, usage.completionTokens - 1));
    const workerMs = done?.workerMs ?? 0;
    metrics.workerMs.observe(workerMs / 1000);
    if (done?.speculative) metrics.countSpeculative(done.speculative);
    if (this.firstTokenAt !== null && usage.completionTokens > 1) {
      metrics.timePerOutputToken.observe({ route: this.options.route }, (performance.now() - this.firstTokenAt) / 1000 / (usage.completionTokens - 1));
    }
    const content = rest.toolCalls.length > 0 && this.harmony === null ? splitterContent(thinking.content) : thinking.content;
    const reasoningTokens = thinking.opened ? (thinking.inReasoning ? usage.completionTokens : this.reasoningTokens) : 0;
    out.push({ type: 'end', content, reasoning: thinking.opened ? thinking.reasoning : null, reasoningTokens, sampled, sharedByWorker: done?.repliesShared === true, toolCalls: rest.toolCalls, finishReason, stopSequence: this.stopSequence, usage, workerMs, queueMs: this.queueMs });
    return out;
  }

  /** The reply's exact ids, when they decode to exactly what is returned: the next turn sends the reply back. */
  private sampledReplies(): SampledReply[] {
    if (this.stopSequence !== null) return [];
    return sampledReplies(this.codec, this.form, { ids: this.replyIds, rawText: this.rawText, stopId: this.stopId, thinking: this.thinking });
  }
}

/** The content before the first tool call (what the splitter streamed). */
function splitterContent(rawText: string): string {
  const at = rawText.indexOf('<tool_call>');
  return (at === -1 ? rawText : rawText.slice(0, at)).replace(/\s+$/, '');
}
