/**
 * Prompt building and the event loop (issue: one request must not stall
 * everyone).
 *
 * Figures:
 *   prompt_build_ms_{reference,linear}_{n}   chat prompt of n messages (ChatML, synthetic:small vocabulary),
 *                                             the reference twin renders every prefix, the linear builder once
 *   prompt_linear_ms_per_message_{1k,10k}     linear cost per message at 1,000 and 10,000 messages
 *                                             (equal when the builder is linear); ratio prompt_linear_scaling_10k_over_1k
 *   prompt_inline_ms_e2e                      a typical agent turn (~2k-token system prompt with tools, 10 turns), built
 *                                             on the event loop as the API does for small prompts
 *   healthz_max_ms_idle / healthz_max_ms_4000 the slowest /healthz answer of a server idle, and while it handles three
 *                                             4,000-message chat requests (the server's own event loop, same process)
 *   loop_delay_max_ms_4000                     the event loop's worst delay over that time (perf_hooks histogram)
 *   too_many_messages_ms                       client time until the 400 for a 100,000-message request (3 MB body)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';

import { ensureSyntheticModel } from '../inference-core/index.ts';
import { loadConfig } from '../src/config.ts';
import { ChatPromptBuilder, ChatPromptBuilderReference, promptCodecFromGgufFile, type ChatMessage, type ToolSpec } from '../src/recipe/index.ts';
import { buildApp } from '../src/serve/index.ts';
import { middleSample } from './sample-stats.ts';

const say = (line: string) => process.stderr.write(`[bench prompt] ${line}\n`);

function transcript(length: number): ChatMessage[] {
  return Array.from({ length }, (_, i): ChatMessage => ({ role: i % 2 ? 'assistant' : 'user', content: `turn ${i}: ${'some words of the conversation '.repeat(3)}` }));
}

function timeIt(runs: number, fn: () => void): number {
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    fn();
    samples.push(performance.now() - start);
  }
  return middleSample(samples);
}

async function healthzMax(url: string, during: () => Promise<void>): Promise<{ healthz: number; loop: number }> {
  const histogram = monitorEventLoopDelay({ resolution: 5 });
  histogram.enable();
  let done = false;
  let worst = 0;
  const probe = (async () => {
    while (!done) {
      const start = performance.now();
      await (await fetch(`${url}/healthz`)).arrayBuffer();
      worst = Math.max(worst, performance.now() - start);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  })();
  await during();
  done = true;
  await probe;
  histogram.disable();
  return { healthz: worst, loop: histogram.max / 1e6 };
}

export async function run(): Promise<Record<string, number>> {
  const dataDir = mkdtempSync(join(tmpdir(), 'kvt-bench-prompt-'));
  const codec = promptCodecFromGgufFile(ensureSyntheticModel('small', { dataDir, progress: null }));
  const linear = new ChatPromptBuilder(codec, null);
  const reference = new ChatPromptBuilderReference(codec, null);
  const out: Record<string, number> = {};
  for (const n of [250, 1000]) {
    const messages = transcript(n);
    out[`prompt_build_ms_reference_${n}`] = timeIt(n > 500 ? 1 : 3, () => reference.build(messages, undefined, 's'));
    out[`prompt_build_ms_linear_${n}`] = timeIt(5, () => linear.build(messages, undefined, 's'));
    say(`${n} messages: reference ${out[`prompt_build_ms_reference_${n}`].toFixed(1)} ms, linear ${out[`prompt_build_ms_linear_${n}`].toFixed(1)} ms`);
  }
  const perMessage = (n: number) => timeIt(5, () => linear.build(transcript(n), undefined, 's')) / n;
  out.prompt_linear_ms_per_message_1k = perMessage(1000);
  out.prompt_linear_ms_per_message_10k = perMessage(10_000);
  out.prompt_linear_scaling_10k_over_1k = out.prompt_linear_ms_per_message_10k / out.prompt_linear_ms_per_message_1k;

  const tools: ToolSpec[] = Array.from({ length: 6 }, (_, i) => ({
    type: 'function',
    function: { name: `tool_${i}`, description: 'Does one thing of the agent loop, carefully. '.repeat(4), parameters: { type: 'object', properties: { path: { type: 'string' }, content: { type: 'string' } } } },
  }));
  const agent: ChatMessage[] = [{ role: 'system', content: 'You are a careful coding agent. '.repeat(200) }];
  for (let turn = 0; turn < 10; turn++) agent.push({ role: 'user', content: `step ${turn}: fix the next failing test` }, { role: 'assistant', content: `Looking at test ${turn}; the cause is a stale cache entry.` });
  out.prompt_inline_ms_e2e = timeIt(20, () => linear.build(agent, tools, 's'));
  say(`typical agent turn inline: ${out.prompt_inline_ms_e2e.toFixed(2)} ms`);

  const config = loadConfig({}, [], { host: '127.0.0.1', port: 0, dataDir, model: 'synthetic:small', threads: 1, logLevel: 'silent', storage: `fs:${join(dataDir, 'blocks')}` });
  const built = await buildApp(config, { logger: false });
  const url = await built.app.listen({ host: '127.0.0.1', port: 0 });
  try {
    const idle = await healthzMax(url, () => new Promise((resolve) => setTimeout(resolve, 500)));
    const body = JSON.stringify({ model: 'synthetic:small', max_tokens: 2, messages: transcript(4000) });
    const busy = await healthzMax(url, async () => {
      for (let i = 0; i < 3; i++) await (await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })).arrayBuffer();
    });
    const flood = JSON.stringify({ model: 'synthetic:small', max_tokens: 2, messages: Array.from({ length: 100_000 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: 'x' })) });
    const refusals: number[] = [];
    for (let i = 0; i < 5; i++) {
      const start = performance.now();
      const response = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: flood });
      await response.arrayBuffer();
      if (response.status !== 400) throw new Error(`100,000 messages answered ${response.status}, not 400`);
      refusals.push(performance.now() - start);
    }
    out.too_many_messages_ms = middleSample(refusals);
    say(`100,000 messages refused in ${out.too_many_messages_ms.toFixed(1)} ms`);
    out.healthz_max_ms_idle = idle.healthz;
    out.healthz_max_ms_4000 = busy.healthz;
    out.loop_delay_max_ms_idle = idle.loop;
    out.loop_delay_max_ms_4000 = busy.loop;
    say(`healthz worst: idle ${idle.healthz.toFixed(1)} ms, during 4,000-message requests ${busy.healthz.toFixed(1)} ms (loop delay ${busy.loop.toFixed(1)} ms)`);
  } finally {
    await built.close();
    // the synthetic model and the blocks: left behind, every run's copy stayed in /tmp
    rmSync(dataDir, { recursive: true, force: true });
  }
  return out;
}
