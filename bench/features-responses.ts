/**
 * `responses_hit_ratio_of_ideal` for `npm run bench -- features`: one Responses
 * conversation of 5 turns chained by previous_response_id against the real
 * server (embedded, synthetic:small, fs storage), greedy.
 *
 *   ideal_t  = the tokens turn t-1 ran through the model: its input + its output − 1
 *              (the last sampled token was never fed back), all of which turn t re-sends first
 *   ratio    = Σ_t≥2 min(cached_t, ideal_t) / Σ_t≥2 ideal_t
 *
 * The block-granular bound (whole 64-token blocks of ideal_t) is reported beside it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { loadConfig } from '../src/config.ts';
import { buildApp } from '../src/serve/index.ts';

const MODEL = 'synthetic:small';
const TURNS = 5;
const BLOCK = 64;
const INSTRUCTIONS = 'You are kvtier, a terse assistant for cache-aware inference. ' + 'Answer in one short line and cite the cache tier that served you. '.repeat(16);

const say = (s: string): void => void process.stderr.write(`[features/responses] ${s}\n`);

interface Usage {
  input_tokens: number;
  output_tokens: number;
  input_tokens_details: { cached_tokens: number };
}

export async function responsesHitRatio(): Promise<Record<string, number | string>> {
  const dataDir = mkdtempSync(join(tmpdir(), 'kvtier-bench-responses-'));
  const config = loadConfig({}, [], { host: '127.0.0.1', port: 0, dataDir, model: MODEL, logLevel: 'warn', storage: `fs:${join(dataDir, 'blocks')}` });
  const built = await buildApp(config, { logger: false });
  try {
    const url = await built.app.listen({ host: '127.0.0.1', port: 0 });
    let previous: { id: string; usage: Usage } | null = null;
    let cachedSum = 0;
    let idealSum = 0;
    let blockIdealSum = 0;
    for (let turn = 1; turn <= TURNS; turn++) {
      const res = await fetch(`${url}/v1/responses`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, instructions: INSTRUCTIONS, input: `Turn ${turn}: what did the cache do this time?`, max_output_tokens: 32, temperature: 0, ...(previous ? { previous_response_id: previous.id } : {}) }),
      });
      if (res.status !== 200) throw new Error(`turn ${turn}: HTTP ${res.status} ${await res.text()}`);
      const body = (await res.json()) as { id: string; usage: Usage };
      if (previous) {
        const ideal = previous.usage.input_tokens + previous.usage.output_tokens - 1;
        const cached = body.usage.input_tokens_details.cached_tokens;
        cachedSum += Math.min(cached, ideal);
        idealSum += ideal;
        blockIdealSum += Math.floor(ideal / BLOCK) * BLOCK;
        say(`turn ${turn}: input ${body.usage.input_tokens}, cached ${cached}, ideal ${ideal}`);
      }
      previous = body;
    }
    return {
      responses_turns: TURNS,
      responses_hit_ratio_of_ideal: Number((cachedSum / idealSum).toFixed(4)),
      responses_hit_ratio_of_block_ideal: Number((cachedSum / blockIdealSum).toFixed(4)),
    };
  } finally {
    await built.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
