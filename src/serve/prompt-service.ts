/**
 * Prompt building for the routes, never long on the event loop.
 *
 *   small transcript ──────────────► draft + finish here (≤ a few ms)
 *   large transcript ─► prompt thread: render, length check, tokenize (draft)
 *                        └─────────► finish here: reply memory, O(tokens)
 *
 * "Small" is measured before any template or tokenizer work: at most
 * INLINE_MAX_MESSAGES messages and INLINE_MAX_CHARS characters of strings.
 * The reply memory stays on the API thread (it is filled by the generations
 * this process streams and, with Redis, read from the cluster's shared
 * memory), so the thread returns a draft whose reply spans are swapped for
 * remembered ids here.
 */
import type { Worker } from 'node:worker_threads';

import { KvtError } from '../errors.ts';
import {
  draftChatPrompt,
  encodeCompletionPrompt,
  finishChatPrompt,
  type ChatMessage,
  type ChatPrompt,
  type ChatPromptDraft,
  type PromptCodec,
  type ReplyMemory,
  type ToolSpec,
} from '../recipe/index.ts';
import { tsWorker } from '../workers/index.ts';
import { yieldToLoop } from './request-limits.ts';

export const INLINE_MAX_MESSAGES = 64;
export const INLINE_MAX_CHARS = 32 * 1024;
/** Messages per copy to the prompt thread. */
const MESSAGES_PER_SLICE = 256;

export interface PromptThreadInit {
  modelPath: string;
}

/** A transcript goes over in slices (`chat-part`, then `chat` with the last one), so no single copy holds the loop long. */
export type ToPromptThread =
  | { op: 'chat-part'; id: number; messages: ChatMessage[] }
  | { op: 'chat'; id: number; messages: ChatMessage[]; tools: ToolSpec[] | undefined; contextLength: number; param: string; templateKwargs?: Record<string, unknown> }
  | { op: 'completion'; id: number; prompt: string; contextLength: number; param: string };

type ThreadError = { code: string; message: string; param: string | null };

export type FromPromptThread =
  | { type: 'ready' }
  | { type: 'fatal'; error: ThreadError }
  | { type: 'failed'; id: number; error: ThreadError }
  | { type: 'chat'; id: number; tokens: Uint32Array; messageStarts: number[]; prefixStable: boolean; replies: ChatPromptDraft['replies'] }
  | { type: 'completion'; id: number; tokens: Uint32Array };

export interface PromptServiceOptions {
  codec: PromptCodec;
  memory: ReplyMemory | null;
  /** The GGUF file the prompt thread reads its codec from (the same model as `codec`). */
  modelPath: string;
  contextLength: number;
}

type Pending = { resolve(message: FromPromptThread): void; reject(error: unknown): void };

export class PromptService {
  private thread: { worker: Worker; ready: Promise<void> } | null = null;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private closed = false;
  /** Prompts built on the API thread and on the prompt thread (what keeps the event loop free for large ones). */
  readonly built = { inline: 0, thread: 0 };

  constructor(private readonly options: PromptServiceOptions) {}

  /** templateKwargs: the request's chat_template_kwargs (e.g. enable_thinking), passed to the template as variables. */
  async chat(messages: ChatMessage[], tools: ToolSpec[] | undefined, tenantScope: string, param: string, templateKwargs?: Record<string, unknown>): Promise<ChatPrompt> {
    const { codec, contextLength } = this.options;
    const limits = { contextLength, param };
    if (messages.length <= INLINE_MAX_MESSAGES && !charsExceed([messages, tools], INLINE_MAX_CHARS)) {
      this.built.inline++;
      return this.finish(draftChatPrompt(codec, messages, tools, limits, templateKwargs), tenantScope);
    }
    this.built.thread++;
    const answer = await this.ask({ op: 'chat', id: 0, messages, tools, contextLength, param, ...(templateKwargs ? { templateKwargs } : {}) });
    if (answer.type !== 'chat') throw new KvtError('KVT_ERR_INTERNAL', `prompt thread answered ${answer.type} to a chat prompt`);
    const draft: ChatPromptDraft = { tokens: answer.tokens, messageStarts: answer.messageStarts, prefixStable: answer.prefixStable, replies: answer.replies };
    return this.finish(draft, tenantScope);
  }

  /** Reply spans → remembered ids; replies another API process generated are fetched from the shared memory first. */
  private async finish(draft: ChatPromptDraft, tenantScope: string): Promise<ChatPrompt> {
    const { memory } = this.options;
    if (memory !== null && draft.replies.length > 0) await memory.load(tenantScope, draft.replies.map((reply) => reply.text));
    return finishChatPrompt(draft, memory, tenantScope);
  }

  /** A text prompt is tokenized (BOS first); a client's ids (checked and typed by the route) are the prompt as they are. */
  async completion(prompt: string | Uint32Array, param: string): Promise<Uint32Array> {
    const { codec, contextLength } = this.options;
    if (typeof prompt !== 'string' || prompt.length <= INLINE_MAX_CHARS) {
      this.built.inline++;
      return encodeCompletionPrompt(codec, prompt, { contextLength, param });
    }
    this.built.thread++;
    const answer = await this.ask({ op: 'completion', id: 0, prompt, contextLength, param });
    if (answer.type !== 'completion') throw new KvtError('KVT_ERR_INTERNAL', `prompt thread answered ${answer.type} to a completion prompt`);
    return answer.tokens;
  }

  async close(): Promise<void> {
    this.closed = true;
    const thread = this.thread;
    this.thread = null;
    this.failAll(new KvtError('KVT_ERR_SERVER_SHUTTING_DOWN', 'the server is stopping'));
    if (thread) await thread.worker.terminate();
  }

  private async ask(request: ToPromptThread): Promise<FromPromptThread> {
    if (this.closed) throw new KvtError('KVT_ERR_SERVER_SHUTTING_DOWN', 'the server is stopping');
    const thread = this.startThread();
    await thread.ready;
    const id = this.nextId++;
    const answer = new Promise<FromPromptThread>((resolve, reject) => this.pending.set(id, { resolve, reject }));
    answer.catch(() => undefined); // the thread may die while slices are still being sent: awaited below
    if (request.op === 'chat' && request.messages.length > MESSAGES_PER_SLICE) {
      const last = request.messages.length - MESSAGES_PER_SLICE;
      for (let at = 0; at < last; at += MESSAGES_PER_SLICE) {
        thread.worker.postMessage({ op: 'chat-part', id, messages: request.messages.slice(at, Math.min(at + MESSAGES_PER_SLICE, last)) } satisfies ToPromptThread);
        await yieldToLoop();
      }
      thread.worker.postMessage({ ...request, id, messages: request.messages.slice(last) });
    } else {
      thread.worker.postMessage({ ...request, id });
    }
    return settled(await answer);
  }

  /** Started on first need; a thread that died is replaced by the next request. */
  private startThread(): { worker: Worker; ready: Promise<void> } {
    if (this.thread) return this.thread;
    const worker = tsWorker(new URL('./prompt-thread.ts', import.meta.url), { modelPath: this.options.modelPath } satisfies PromptThreadInit);
    worker.unref();
    let markReady!: () => void;
    let markFailed!: (error: unknown) => void;
    const ready = new Promise<void>((resolve, reject) => ([markReady, markFailed] = [resolve, reject]));
    const thread = { worker, ready };
    const lost = (error: KvtError) => {
      if (this.thread === thread) this.thread = null;
      markFailed(error);
      this.failAll(error);
    };
    worker.on('message', (message: FromPromptThread) => {
      if (message.type === 'ready') markReady();
      else if (message.type === 'fatal') {
        lost(new KvtError(message.error.code, `the prompt thread could not start: ${message.error.message}`));
        void worker.terminate();
      } else {
        const waiter = this.pending.get(message.id);
        this.pending.delete(message.id);
        waiter?.resolve(message);
      }
    });
    worker.on('error', (error) => lost(new KvtError('KVT_ERR_INTERNAL', `the prompt thread failed: ${error.message}`, { cause: error })));
    worker.on('exit', (code) => lost(new KvtError('KVT_ERR_INTERNAL', `the prompt thread exited (code ${code})`)));
    ready.catch(() => undefined); // observed by ask(); a thread that fails before anyone waits is not an unhandled rejection
    this.thread = thread;
    return thread;
  }

  private failAll(error: unknown): void {
    const waiters = [...this.pending.values()];
    this.pending.clear();
    for (const waiter of waiters) waiter.reject(error);
  }
}

function settled(answer: FromPromptThread): FromPromptThread {
  if (answer.type === 'failed') throw new KvtError(answer.error.code, answer.error.message, { param: answer.error.param });
  return answer;
}

/** Whether the strings under `value` hold more than `limit` characters; stops as soon as they do (iterative: client JSON). */
function charsExceed(value: unknown, limit: number): boolean {
  let chars = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const item = stack.pop();
    if (typeof item === 'string') chars += item.length;
    else if (item !== null && typeof item === 'object') {
      for (const [key, child] of Object.entries(item)) {
        chars += key.length;
        stack.push(child);
      }
    }
    if (chars > limit) return true;
  }
  return false;
}
