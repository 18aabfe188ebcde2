/**
 * The linear prompt builder (one segmented render) against its reference twin
 * (a render of every prefix): the same tokens on templates whose output for a
 * message does not change once later messages exist, the same text on the
 * rest, and a constant number of template renders however long the transcript.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { beforeAll, describe, expect, it } from 'vitest';

import { ChatTemplate, CHATML_TEMPLATE, ensureSyntheticModel, readGguf, Tokenizer } from '../../../inference-core/index.ts';
import { ChatPromptBuilder, ChatPromptBuilderReference, promptCodecFrom, ReplyMemory, type ChatMessage, type PromptCodec, type ToolSpec } from '../../../src/recipe/index.ts';

let tokenizer: Tokenizer;

beforeAll(() => {
  const path = ensureSyntheticModel('tiny', { dataDir: mkdtempSync(join(tmpdir(), 'kvt-linear-')), progress: null });
  const gguf = readGguf(path, { rejectUnsupportedTypes: false });
  tokenizer = Tokenizer.fromGguf(gguf);
  gguf.close();
});

/** Llama 3.1's shape: system hoisted into a header that always renders, then `messages[1:]`. */
const LLAMA3_LIKE = [
  '{{- bos_token }}',
  "{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content']|trim %}{%- set messages = messages[1:] %}{%- else %}{%- set system_message = '' %}{%- endif %}",
  "{{- '<|start_header_id|>system<|end_header_id|>\\n\\nCutting Knowledge Date: December 2023\\n\\n' }}{{- system_message }}{{- '<|eot_id|>' }}",
  '{%- for message in messages %}',
  "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}",
  '{%- endfor %}',
  "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}",
].join('');

/** Mistral's shape: `loop_messages`, the system text folded into the first user turn, no generation prompt. */
const MISTRAL_LIKE = [
  "{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content'] %}{%- set loop_messages = messages[1:] %}{%- else %}{%- set loop_messages = messages %}{%- endif %}",
  '{{- bos_token }}',
  '{%- for message in loop_messages %}',
  "{%- if message['role'] == 'user' %}{%- if loop.first and system_message is defined %}{{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}{%- else %}{{- ' [INST] ' + message['content'] + ' [/INST]' }}{%- endif %}",
  "{%- elif message['role'] == 'assistant' %}{{- ' ' + message['content'] + eos_token }}",
  '{%- endif %}',
  '{%- endfor %}',
].join('');

/** Qwen3's shape: a reverse scan for the last user query, earlier replies rendered without their reasoning. Not prefix-stable. */
const QWEN3_LIKE = [
  '{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}',
  '{%- for message in messages[::-1] %}{%- set index = (messages|length - 1) - loop.index0 %}',
  "{%- if ns.multi_step_tool and message.role == 'user' %}{%- set ns.multi_step_tool = false %}{%- set ns.last_query_index = index %}{%- endif %}",
  '{%- endfor %}',
  '{%- for message in messages %}',
  "{%- if message.role == 'user' or message.role == 'system' %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}",
  "{%- elif message.role == 'assistant' %}",
  "{%- if loop.index0 > ns.last_query_index %}{{- '<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n' + message.content }}{%- else %}{{- '<|im_start|>assistant\\n' + message.content }}{%- endif %}",
  "{{- '<|im_end|>\\n' }}",
  '{%- endif %}',
  '{%- endfor %}',
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}",
].join('');

/** A separator only between messages (`loop.last`): each prefix render is a prefix of the next, but not message-aligned. */
const LOOP_LAST = "{%- for message in messages %}{{ '<|' + message.role + '|>' + message.content }}{%- if not loop.last %}{{ '\\n' }}{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{ '\\n<|assistant|>' }}{%- endif %}";

/** No loop at all: nothing to segment. */
const NO_LOOP = "{{ messages[0].content }}|{{ messages[-1].content }}{% if add_generation_prompt %}>{% endif %}";

const TOOLS: ToolSpec[] = [{ type: 'function', function: { name: 'read_file', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } } } } }];

function codecOf(source: string): PromptCodec {
  return promptCodecFrom(tokenizer, new ChatTemplate(source, { bosToken: '<s>', eosToken: '</s>' }));
}

/** Deterministic transcripts: system or not, user/assistant turns, tool calls and results, unicode, whitespace at the edges. */
function transcript(seed: number, length: number, withTools: boolean): ChatMessage[] {
  let x = seed + 1;
  const next = () => ((x = (Math.imul(x, 1103515245) + 12345) >>> 0) >>> 8) % 1000;
  const words = ['cache', 'block', ' prefix', 'héllo', '✓', '\n', '  spaced  ', 'tokens', '{"a": 1}', '64'];
  const text = () => Array.from({ length: 1 + (next() % 12) }, () => words[next() % words.length]).join(' ');
  const messages: ChatMessage[] = [];
  if (seed % 2 === 0) messages.push({ role: 'system', content: `You are terse. ${text()}` });
  while (messages.length < length) {
    messages.push({ role: 'user', content: text() });
    if (withTools && next() % 3 === 0) {
      const id = `call_${messages.length}`;
      messages.push({ role: 'assistant', content: '', tool_calls: [{ id, type: 'function', function: { name: 'read_file', arguments: { path: `f${next()}.ts` } } }] });
      messages.push({ role: 'tool', content: text(), tool_call_id: id });
    }
    messages.push({ role: 'assistant', content: text() });
  }
  return messages;
}

/** Remember every assistant reply as sampled ids that differ from its re-encoding, as the server would. */
function rememberReplies(codec: PromptCodec, memory: ReplyMemory, messages: ChatMessage[]): void {
  for (const message of messages) {
    if (message.role === 'assistant' && typeof message.content === 'string' && message.content !== '' && !message.tool_calls) memory.remember('t', message.content, [...codec.encode(message.content), 1]);
  }
}

describe('linear chat prompts against the reference twin', () => {
  const appendOnly: Array<[string, string, boolean]> = [
    ['chatml', CHATML_TEMPLATE, false],
    ['chatml with tools', CHATML_TEMPLATE, true],
    ['llama3-like', LLAMA3_LIKE, false],
    ['mistral-like', MISTRAL_LIKE, false],
  ];
  for (const [name, source, withTools] of appendOnly) {
    it(`${name}: the same tokens, message starts and stability as rendering every prefix`, () => {
      const codec = codecOf(source);
      for (let seed = 0; seed < 12; seed++) {
        for (const length of [1, 2, 3, 7, 20]) {
          const messages = transcript(seed, length, withTools);
          const tools = withTools ? TOOLS : undefined;
          const memory = new ReplyMemory();
          rememberReplies(codec, memory, messages);
          const fast = new ChatPromptBuilder(codec, memory).build(messages, tools, 't');
          const reference = new ChatPromptBuilderReference(codec, memory).build(messages, tools, 't');
          expect(fast.tokens, `${name} seed ${seed} length ${length}`).toEqual(reference.tokens);
          expect(fast.messageStarts).toEqual(reference.messageStarts);
          expect(fast.prefixStable).toBe(reference.prefixStable);
        }
      }
    });
  }

  for (const [name, source] of [
    ['qwen3-like', QWEN3_LIKE],
    ['loop.last separator', LOOP_LAST],
    ['no loop', NO_LOOP],
  ] as const) {
    it(`${name}: the same text as the template's whole render, reported not prefix-stable`, () => {
      const codec = codecOf(source);
      for (let seed = 0; seed < 6; seed++) {
        const messages = transcript(seed, 9, false);
        const fast = new ChatPromptBuilder(codec, null).build(messages, undefined, 't');
        const whole = codec.renderChat(messages, { addGenerationPrompt: true });
        expect(codec.decode(fast.tokens)).toBe(codec.decode(codec.encode(whole)));
        expect(fast.prefixStable).toBe(false);
      }
    });
  }

  it('a transcript holding the segment marker characters is encoded whole, text intact', () => {
    const codec = codecOf(CHATML_TEMPLATE);
    const messages: ChatMessage[] = [
      { role: 'user', content: 'a \uFDD00:1\uFDD1 b' },
      { role: 'assistant', content: 'ok' },
      { role: 'user', content: 'c' },
    ];
    const prompt = new ChatPromptBuilder(codec, null).build(messages, undefined, 't');
    expect(prompt.tokens).toEqual(codec.encode(codec.renderChat(messages, { addGenerationPrompt: true })));
    expect(prompt.prefixStable).toBe(false);
  });

  it('renders the template a constant number of times, however many messages', () => {
    const base = codecOf(CHATML_TEMPLATE);
    let renders = 0;
    const counting: PromptCodec = {
      ...base,
      renderChat: (m, o) => (renders++, base.renderChat(m, o)),
      renderChatSegmented: (m, o) => (renders++, base.renderChatSegmented(m, o)),
    };
    new ChatPromptBuilder(counting, null).build(transcript(2, 3, true), TOOLS, 't'); // learns the end-of-turn text once per codec
    const counts = [10, 100, 1000].map((length) => {
      renders = 0;
      const prompt = new ChatPromptBuilder(counting, null).build(transcript(2, length, true), TOOLS, 't');
      expect(prompt.prefixStable).toBe(true);
      return renders;
    });
    expect(counts[2]).toBe(counts[0]);
    expect(counts[2]).toBeLessThanOrEqual(5);
    expect(counts[1]).toBe(counts[0]);
  });
});
