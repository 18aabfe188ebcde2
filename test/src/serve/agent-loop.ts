/**
 * A client's agent loop against the chat completions route, for the tests
 * that show a tool loop hits its history: every step after the first must
 * find at least the whole blocks of the previous step's prompt and reply in
 * the cache. The agent echoes the assistant turn exactly as returned, then a
 * result for each tool call it made (a result answering no call is a 400, as
 * the reference APIs answer: bad-input-tools.test.ts), then the next user turn.
 */
import type OpenAI from 'openai';
import { expect } from 'vitest';

type Message = OpenAI.Chat.Completions.ChatCompletionMessageParam;

export interface AgentLoop {
  client: OpenAI;
  model: string;
  tools: OpenAI.Chat.Completions.ChatCompletionTool[];
  messages: Message[];
  steps: number;
  maxTokens: number;
  /** The tokens of the cache's whole blocks in a prefix of this many tokens. */
  floorBlocks: (tokens: number) => number;
}

/** What the agent sends back after step `step`. */
export interface AgentTurns {
  toolResult: (step: number) => string;
  nextUser: (step: number) => string;
}

export async function runAgentLoop(o: AgentLoop, turns: AgentTurns): Promise<void> {
  const { messages } = o;
  let previousTotal = 0;
  for (let step = 1; step <= o.steps; step++) {
    const response = await o.client.chat.completions.create({ model: o.model, messages, tools: o.tools, max_tokens: o.maxTokens, temperature: 0 });
    const usage = response.usage!;
    if (step > 1) expect(usage.prompt_tokens_details!.cached_tokens).toBeGreaterThanOrEqual(o.floorBlocks(previousTotal));
    previousTotal = usage.prompt_tokens + usage.completion_tokens;
    const reply = response.choices[0].message;
    const assistant: OpenAI.Chat.Completions.ChatCompletionAssistantMessageParam = { role: 'assistant', content: reply.content ?? '' };
    if (reply.tool_calls) assistant.tool_calls = reply.tool_calls;
    messages.push(assistant);
    for (const call of reply.tool_calls ?? []) messages.push({ role: 'tool', tool_call_id: call.id, content: turns.toolResult(step) });
    messages.push({ role: 'user', content: turns.nextUser(step) });
  }
}
