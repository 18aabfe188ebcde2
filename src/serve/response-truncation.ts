/**
 * Responses `truncation: "auto"`: when the conversation does not fit the
 * context (prompt + max_output_tokens), drop items from its beginning — after
 * the leading system messages (instructions) — until it does, as the
 * reference describes.
 *
 * Cuts fall where the kept conversation starts at a user message (so no tool
 * result is left without its call, and templates that want a user turn first
 * still render); only when no such cut fits, any cut that does not start at a
 * tool result. The smallest fitting cut is found by bisection: dropping more
 * never makes the prompt longer, so O(log n) renders.
 */
import { KvtError } from '../errors.ts';
import type { ChatMessage, ChatPrompt } from '../recipe/index.ts';

export interface FittedPrompt {
  messages: ChatMessage[];
  prompt: ChatPrompt;
  /** Messages dropped from the beginning (after the leading system messages). */
  dropped: number;
}

/** A render that cannot fit (the codec's length pre-check) counts as too long. */
async function tryRender(render: (messages: ChatMessage[]) => Promise<ChatPrompt>, messages: ChatMessage[]): Promise<ChatPrompt | null> {
  try {
    return await render(messages);
  } catch (error) {
    if (error instanceof KvtError && error.code === 'KVT_ERR_REQUEST_CONTEXT_OVERFLOW') return null;
    throw error;
  }
}

export async function fitToContext(
  messages: ChatMessage[],
  render: (messages: ChatMessage[]) => Promise<ChatPrompt>,
  limits: { contextLength: number; maxTokens: number },
): Promise<FittedPrompt> {
  const fits = (prompt: ChatPrompt | null): prompt is ChatPrompt => prompt !== null && prompt.tokens.length < limits.contextLength && prompt.tokens.length + limits.maxTokens <= limits.contextLength;
  const whole = await tryRender(render, messages);
  if (fits(whole)) return { messages, prompt: whole, dropped: 0 };
  let lead = 0;
  while (lead < messages.length && messages[lead].role === 'system') lead++;
  const cutsAt = (accept: (message: ChatMessage) => boolean): number[] => {
    const cuts: number[] = [];
    for (let cut = lead + 1; cut < messages.length; cut++) if (accept(messages[cut])) cuts.push(cut);
    return cuts;
  };
  for (const cuts of [cutsAt((m) => m.role === 'user'), cutsAt((m) => m.role !== 'tool')]) {
    let best: FittedPrompt | null = null;
    let low = 0;
    let high = cuts.length - 1;
    while (low <= high) {
      const mid = (low + high) >> 1;
      const kept = [...messages.slice(0, lead), ...messages.slice(cuts[mid])];
      const prompt = await tryRender(render, kept);
      if (fits(prompt)) {
        best = { messages: kept, prompt, dropped: cuts[mid] - lead };
        high = mid - 1;
      } else low = mid + 1;
    }
    if (best) return best;
  }
  throw new KvtError(
    'KVT_ERR_REQUEST_CONTEXT_OVERFLOW',
    `input does not fit the context length of ${limits.contextLength} tokens with max_output_tokens ${limits.maxTokens}, even with truncation "auto" keeping only the instructions and the last input item; shorten them or lower max_output_tokens`,
    { param: 'input' },
  );
}
