/**
 * The reference twin of chat-prompt.ts: the same prompt by its definition,
 * rendering every prefix m[0..i] of the transcript (O(n²) in messages; tests
 * only). chat-prompt.ts must give the same tokens. It shares only the BOS
 * rule and the end-of-turn probe with it; the segmentation is its own.
 *
 * Chat transcript → prompt tokens, prefix-stable.
 *
 * The cache only helps if turn n+1's prompt begins with exactly the tokens of
 * turn n's prompt and reply. Tokenizing the whole rendered transcript at once
 * does not guarantee that (a merge can straddle a message boundary, and a
 * re-encoded reply need not equal the sampled ids). So the transcript is
 * tokenized segment by segment:
 *
 *   render(m[0..i]) = render(m[0..i-1]) + segment_i          (checked)
 *   tokens          = enc(segment_0) ‖ enc(segment_1) ‖ … ‖ enc(generation prompt)
 *
 * and an assistant segment is split as
 *
 *   segment = generation prompt of m[0..i-1] ‖ reply body ‖ end of turn
 *
 * with the reply body's ids taken from the ReplyMemory (the ids the model
 * sampled) when this server generated it. Then, for a reply R to prompt P:
 *
 *   prompt(m + [R] + more) starts with P ‖ ids(R) ‖ enc(end of turn)
 *
 * Templates that re-render earlier turns differently once later ones exist
 * (the prefix check fails) fall back to whole-transcript encoding for the
 * rest; the answer is the same, only fewer tokens hit.
 */
import { TokenIds } from '../../inference-core/index.ts';

import type { ReplyMemory } from './reply-memory.ts';
import { encodeWithBos, learnEndOfTurn, type ChatPrompt } from './chat-prompt.ts';
import type { ChatMessage, PromptCodec, ToolSpec } from './types.ts';

export class ChatPromptBuilderReference {
  constructor(
    private readonly codec: PromptCodec,
    private readonly memory: ReplyMemory | null,
  ) {}

  build(messages: readonly ChatMessage[], tools: readonly ToolSpec[] | undefined, tenantScope: string): ChatPrompt {
    const options = tools && tools.length > 0 ? { tools } : {};
    const tokens = new TokenIds();
    const messageStarts: number[] = [];
    let renderedSoFar = this.codec.renderChat([], { ...options, addGenerationPrompt: false });
    let stable = true;
    // The empty render (BOS text, a tools system block) is its own first segment; an empty one adds no lone BOS.
    if (renderedSoFar !== '') this.pushText(tokens, renderedSoFar, true);
    for (let i = 0; i < messages.length; i++) {
      const upTo = messages.slice(0, i + 1);
      const rendered = this.codec.renderChat(upTo, { ...options, addGenerationPrompt: false });
      if (i === 0 && !rendered.startsWith(renderedSoFar)) {
        // The empty render (e.g. a tools block) changes once a system message exists: start from nothing.
        tokens.truncate(0);
        renderedSoFar = '';
      }
      if (!rendered.startsWith(renderedSoFar)) {
        // Not prefix-stable from here on: the rest is encoded from the full render at once.
        stable = false;
        break;
      }
      const segment = rendered.slice(renderedSoFar.length);
      messageStarts.push(tokens.length);
      const message = messages[i];
      if (message.role === 'assistant') {
        const generationPrompt = this.codec.renderChat(messages.slice(0, i), { ...options, addGenerationPrompt: true }).slice(renderedSoFar.length);
        this.pushAssistantSegment(tokens, segment, generationPrompt, message, tenantScope);
      } else {
        this.pushText(tokens, segment, tokens.length === 0);
      }
      renderedSoFar = rendered;
    }
    const full = this.codec.renderChat(messages, { ...options, addGenerationPrompt: true });
    if (full.startsWith(renderedSoFar)) {
      this.pushText(tokens, full.slice(renderedSoFar.length), tokens.length === 0);
      return { tokens: tokens.view, messageStarts, prefixStable: stable };
    }
    // The generation prompt re-rendered earlier text: nothing but the whole render is trustworthy.
    return { tokens: encodeWithBos(this.codec, full), messageStarts: [], prefixStable: false };
  }

  private pushText(tokens: TokenIds, text: string, atStart: boolean): void {
    if (atStart) {
      tokens.append(encodeWithBos(this.codec, text));
      return;
    }
    if (text !== '') tokens.append(this.codec.encode(text));
  }

  private pushAssistantSegment(tokens: TokenIds, segment: string, generationPrompt: string, message: ChatMessage, tenantScope: string): void {
    if (tokens.length === 0 || !segment.startsWith(generationPrompt)) {
      this.pushText(tokens, segment, tokens.length === 0);
      return;
    }
    tokens.append(this.codec.encode(generationPrompt));
    const rest = segment.slice(generationPrompt.length);
    const endOfTurn = learnEndOfTurn(this.codec);
    const body = endOfTurn !== null && endOfTurn !== '' && rest.endsWith(endOfTurn) ? rest.slice(0, rest.length - endOfTurn.length) : rest;
    const tail = rest.slice(body.length);
    const remembered = this.memory && message.content !== undefined ? this.memory.recall(tenantScope, body) : undefined;
    tokens.append(remembered ?? (body === '' ? [] : this.codec.encode(body)));
    if (tail !== '') tokens.append(this.codec.encode(tail));
  }
}
