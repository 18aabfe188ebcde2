/**
 * The think-block split of a reply (recipe/reasoning.ts): the prompt opened
 * it or the reply does, markers cut anywhere between pushes, an unclosed
 * block is all reasoning, a reply without one is all content, byte for byte.
 */
import { describe, expect, it } from 'vitest';

import { promptCodecFromGgufFile } from '../../../src/recipe/index.ts';
import { contentIdsOf, promptOpensThinking, ReasoningSplitter, splitReasoning, templateKwargsOf } from '../../../src/recipe/reasoning.ts';
import { buildRealVocabGguf } from '../../helpers/real-vocab-gguf.ts';

/** Pushes `text` in pieces cut at every `step` characters and joins what comes out. */
function streamed(text: string, startsInside: boolean, step: number): { reasoning: string; content: string; opened: boolean } {
  const splitter = new ReasoningSplitter(startsInside);
  let reasoning = '';
  let content = '';
  for (let at = 0; at < text.length; at += step) {
    const out = splitter.push(text.slice(at, at + step));
    reasoning += out.reasoning;
    content += out.content;
  }
  const last = splitter.finish();
  return { reasoning: reasoning + last.reasoning, content: content + last.content, opened: splitter.opened };
}

describe('reasoning split', () => {
  const cases: Array<{ name: string; text: string; inside: boolean; reasoning: string | null; content: string }> = [
    { name: 'reply opens the block (Qwen3)', text: '<think>\nAdd them.\n</think>\n\n4', inside: false, reasoning: '\nAdd them.\n', content: '4' },
    { name: 'prompt opened the block (R1)', text: 'Add them.\n</think>\n\nThe sum is 4.', inside: true, reasoning: 'Add them.\n', content: 'The sum is 4.' },
    { name: 'leading whitespace before <think>', text: '\n <think>x</think>y', inside: false, reasoning: 'x', content: 'y' },
    { name: 'no block: all content, unchanged', text: '  Hello <think> is just text', inside: false, reasoning: null, content: '  Hello <think> is just text' },
    { name: 'unclosed block: all reasoning', text: '<think>still thinking when max tokens ran out', inside: false, reasoning: 'still thinking when max tokens ran out', content: '' },
    { name: 'empty block (enable_thinking off written by the model)', text: '<think>\n\n</think>\n\nHi', inside: false, reasoning: '\n\n', content: 'Hi' },
    { name: 'a partial marker that is not one stays content', text: '<thinking> is a tag', inside: false, reasoning: null, content: '<thinking> is a tag' },
    { name: 'a partial close inside reasoning stays reasoning', text: 'a </thin b</think>c', inside: true, reasoning: 'a </thin b', content: 'c' },
  ];
  for (const c of cases) {
    it(c.name, () => {
      expect(splitReasoning(c.text, c.inside)).toEqual({ reasoning: c.reasoning, content: c.content });
      for (const step of [1, 2, 3, 5, 7, 1000]) {
        const out = streamed(c.text, c.inside, step);
        expect({ reasoning: out.opened ? out.reasoning : null, content: out.content }).toEqual({ reasoning: c.reasoning, content: c.content });
      }
    });
  }

  it('the prompt opens thinking only when it ends in an open <think>', () => {
    expect(promptOpensThinking('<｜Assistant｜><think>\n')).toBe(true);
    expect(promptOpensThinking('<|im_start|>assistant\n<think>\n\n</think>\n\n')).toBe(false);
    expect(promptOpensThinking('<|im_start|>assistant\n')).toBe(false);
    expect(promptOpensThinking('<think>x')).toBe(false);
  });
});

describe('content ids of a reply with reasoning', () => {
  it('finds the sampled ids of the content after </think> on the Qwen3 vocabulary', () => {
    const codec = promptCodecFromGgufFile(buildRealVocabGguf('qwen3'));
    const reply = '<think>\nThe user wants a greeting.\n</think>\n\nHello, world — ünïcödé!';
    const ids = Array.from(codec.encode(reply));
    const { content } = splitReasoning(reply, false);
    const found = contentIdsOf(codec, content, ids);
    expect(found).not.toBeNull();
    expect(codec.decode(found!)).toBe(content);
    expect(ids.slice(ids.length - found!.length)).toEqual(found);
    // Whitespace glued to the first content token: no boundary there, so nothing is remembered (the text is re-encoded).
    const glued = '<think>a</think> y';
    expect(splitReasoning(glued, false).content).toBe('y');
    expect(contentIdsOf(codec, 'y', Array.from(codec.encode(glued)))).toBeNull();
    expect(contentIdsOf(codec, '', ids)).toBeNull();
  });
});

describe('template kwargs of a request', () => {
  it('chat_template_kwargs, the top-level enable_thinking and an explicit Anthropic thinking; kwargs win', () => {
    expect(templateKwargsOf({})).toBeUndefined();
    expect(templateKwargsOf({ thinking: { type: 'enabled', budget_tokens: 10 } })).toEqual({ enable_thinking: true, thinking: true });
    expect(templateKwargsOf({ enable_thinking: false })).toEqual({ enable_thinking: false, thinking: false });
    expect(templateKwargsOf({ enable_thinking: false, chat_template_kwargs: { enable_thinking: true, x: 1 } })).toEqual({ enable_thinking: true, thinking: false, x: 1 });
  });
});

describe('reasoning split off', () => {
  it("'off' passes every byte through as content", () => {
    const splitter = new ReasoningSplitter('off');
    const text = '<think>a</think>\n\nb';
    expect(splitter.push(text)).toEqual({ reasoning: '', content: text });
    expect(splitter.finish()).toEqual({ reasoning: '', content: '' });
    expect(splitter.opened).toBe(false);
  });
});
