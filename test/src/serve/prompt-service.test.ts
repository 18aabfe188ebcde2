/**
 * The prompt thread gives exactly the prompt the API thread would build
 * (reply memory included), and its errors arrive typed.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ensureSyntheticModel } from '../../../inference-core/index.ts';
import { ChatPromptBuilder, encodeCompletionPrompt, promptCodecFromGgufFile, ReplyMemory, type ChatMessage, type PromptCodec } from '../../../src/recipe/index.ts';
import { INLINE_MAX_CHARS, INLINE_MAX_MESSAGES, PromptService } from '../../../src/serve/prompt-service.ts';

let codec: PromptCodec;
let modelPath: string;
let service: PromptService;
const memory = new ReplyMemory();

beforeAll(() => {
  modelPath = ensureSyntheticModel('tiny', { dataDir: mkdtempSync(join(tmpdir(), 'kvt-prompt-svc-')), progress: null });
  codec = promptCodecFromGgufFile(modelPath);
  service = new PromptService({ codec, memory, modelPath, contextLength: 1_000_000_000 });
});
afterAll(async () => {
  await service?.close();
});

function transcript(length: number): ChatMessage[] {
  return Array.from({ length }, (_, i): ChatMessage => ({ role: i === 0 ? 'system' : i % 2 ? 'user' : 'assistant', content: `message ${i} ✓ with some words` }));
}

describe('prompt thread', () => {
  it('builds the same tokens as the API thread for transcripts past the inline limits, remembered replies included', async () => {
    const long = transcript(INLINE_MAX_MESSAGES * 5 + 3); // several slices of 256 messages
    memory.remember('scope-a', long[2].content!, [7, 7, 7]);
    const threaded = await service.chat(long, undefined, 'scope-a', 'messages');
    const inline = new ChatPromptBuilder(codec, memory).build(long, undefined, 'scope-a');
    expect(threaded.tokens).toEqual(inline.tokens);
    expect(threaded.messageStarts).toEqual(inline.messageStarts);
    expect(threaded.tokens.slice(inline.messageStarts[2], inline.messageStarts[3]).join(',')).toContain('7,7,7');
    // Another tenant does not get scope-a's remembered ids.
    const other = await service.chat(long, undefined, 'scope-b', 'messages');
    expect(other.tokens.join(',')).not.toContain('7,7,7');
  });

  it('encodes a completion prompt past the inline limit like the API thread', async () => {
    const text = 'a long completion prompt, ✓ '.repeat(Math.ceil((INLINE_MAX_CHARS * 2) / 28));
    expect(await service.completion(text, 'prompt')).toEqual(encodeCompletionPrompt(codec, text));
  });

  it('a prompt too long for the context is refused in the thread with the typed error', async () => {
    const small = new PromptService({ codec, memory: null, modelPath, contextLength: 100 });
    try {
      await expect(small.chat(transcript(200), undefined, 's', 'messages')).rejects.toMatchObject({ code: 'KVT_ERR_REQUEST_CONTEXT_OVERFLOW', param: 'messages', status: 400 });
      await expect(small.completion('x'.repeat(INLINE_MAX_CHARS + 1), 'prompt')).rejects.toMatchObject({ code: 'KVT_ERR_REQUEST_CONTEXT_OVERFLOW', param: 'prompt' });
    } finally {
      await small.close();
    }
  });

  it('after close, requests fail with KVT_ERR_SERVER_SHUTTING_DOWN instead of hanging', async () => {
    const closing = new PromptService({ codec, memory: null, modelPath, contextLength: 1000 });
    await closing.close();
    await expect(closing.chat(transcript(500), undefined, 's', 'messages')).rejects.toMatchObject({ code: 'KVT_ERR_SERVER_SHUTTING_DOWN' });
  });
});
