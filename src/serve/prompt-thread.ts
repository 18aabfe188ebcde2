/**
 * The prompt thread: renders and tokenizes large prompts off the API's event
 * loop (a 10,000-message transcript is ~130 ms of template and tokenizer
 * work). It holds its own codec, read from the model file's metadata. Protocol
 * in prompt-service.ts.
 */
import { parentPort, workerData } from 'node:worker_threads';

import { describeError } from '../errors.ts';
import { draftChatPrompt, encodeCompletionPrompt, promptCodecFromGgufFile, type ChatMessage } from '../recipe/index.ts';
import type { FromPromptThread, PromptThreadInit, ToPromptThread } from './prompt-service.ts';

const port = parentPort;
if (!port) throw new Error('prompt-thread.ts runs as a worker thread (new Worker(...)), not as a script');
const init = workerData as PromptThreadInit;
const send = (message: FromPromptThread, transfer: ArrayBuffer[] = []) => port.postMessage(message, transfer);

try {
  const codec = promptCodecFromGgufFile(init.modelPath);
  const parts = new Map<number, ChatMessage[]>();
  port.on('message', (request: ToPromptThread) => {
    if (request.op === 'chat-part') {
      const held = parts.get(request.id) ?? [];
      for (const message of request.messages) held.push(message);
      parts.set(request.id, held);
      return;
    }
    try {
      const limits = { contextLength: request.contextLength, param: request.param };
      if (request.op === 'chat') {
        const held = parts.get(request.id) ?? [];
        parts.delete(request.id);
        for (const message of request.messages) held.push(message);
        const draft = draftChatPrompt(codec, held, request.tools, limits, request.templateKwargs);
        // The ids' own buffer moves to the API thread (no copy; nothing here keeps it).
        const tokens = draft.tokens;
        send({ type: 'chat', id: request.id, tokens, messageStarts: draft.messageStarts, prefixStable: draft.prefixStable, replies: draft.replies }, [tokens.buffer as ArrayBuffer]);
      } else {
        const tokens = encodeCompletionPrompt(codec, request.prompt, limits);
        send({ type: 'completion', id: request.id, tokens }, [tokens.buffer as ArrayBuffer]);
      }
    } catch (error) {
      const described = describeError(error);
      send({ type: 'failed', id: request.id, error: { code: described.code, message: described.message, param: described.param } });
    }
  });
  send({ type: 'ready' });
} catch (error) {
  const described = describeError(error);
  send({ type: 'fatal', error: { code: described.code, message: described.message, param: null } });
}
