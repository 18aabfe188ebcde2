/**
 * `kvtier replay --url` against a real kvtier server (the in-process test
 * server: synthetic:tiny, fs + LMDB), and `--engine` on a synthetic model:
 *
 *   - a slice of the conversation trace (its first block ids, 64-token
 *     blocks so the prompts fit the tiny model's context) gives, request by
 *     request, the same hit blocks over HTTP as through the embedded tier
 *     and as the definition; the command's --json total agrees;
 *   - --engine reports a prefill rate measured by running the model;
 *   - bad input (no server, wrong key, flags that cannot go together) is
 *     one line naming what to do, and a non-zero exit.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { runReplayCommand } from '../../../src/cli/commands/replay-command.ts';
import { HttpTarget, readTrace, runReplay, TierTarget, type ReplayReport } from '../../../src/replay/index.ts';
import { KEYS, startTestServer, type TestServer } from '../serve/server-fixture.ts';
import { CONVERSATION, definitionHits, rawTrace } from './trace-fixtures.ts';

const BLOCK = 64;
const sum = (xs: ArrayLike<number>) => Array.from(xs).reduce((a, b) => a + b, 0);

/** The first 60 conversation requests, each cut to its first 6 block ids (384 tokens), in the generic form. */
function writeSlice(): { path: string; requests: Array<{ at: number; blocks: number[] }> } {
  const picked = rawTrace(CONVERSATION)
    .slice(0, 60)
    .map((r) => ({ at: r.timestamp, blocks: r.hash_ids.slice(0, Math.min(6, Math.floor(r.input_length / 512))) }));
  const path = join(mkdtempSync(join(tmpdir(), 'kvtier-replay-http-')), 'slice.jsonl');
  writeFileSync(path, picked.map((r) => JSON.stringify({ t_ms: r.at, blocks: r.blocks, output_tokens: 1 })).join('\n') + '\n');
  return { path, requests: picked };
}

function captureIo(env: NodeJS.ProcessEnv = {}) {
  const out: string[] = [];
  const err: string[] = [];
  return { out, err, io: { out: (t: string) => void out.push(t), err: (t: string) => void err.push(t), env, interactive: false } };
}

describe('kvtier replay --url (a running server)', () => {
  let server: TestServer;
  const slice = writeSlice();
  beforeAll(async () => {
    server = await startTestServer();
  }, 120_000);
  afterAll(async () => {
    await server?.close();
  });

  it('a trace slice gives the same hit blocks over HTTP as through the embedded tier and the definition', async () => {
    const expected = definitionHits(slice.requests);
    expect(sum(expected)).toBeGreaterThan(10);

    const trace = readTrace(slice.path, { blockTokens: BLOCK });
    const dataDir = mkdtempSync(join(tmpdir(), 'kvtier-replay-http-embedded-'));
    const embedded = await TierTarget.open({ dataDir, blockTokens: BLOCK, ttlMs: 3650 * 86_400_000, classes: ['chat'] });
    let embeddedHits: number[];
    try {
      embeddedHits = Array.from((await runReplay(trace, embedded, { sampleEveryMs: 0 })).hitBlocks);
    } finally {
      await embedded.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
    expect(embeddedHits).toEqual(expected);

    const http = await HttpTarget.open({ url: server.url, apiKey: KEYS.alice, blockTokens: BLOCK });
    // The server's vocabulary bounds the synthesised tokens.
    expect(http.vocab).toBe(512); // synthetic:tiny's vocabulary, from GET /v1/models
    const overHttp = await runReplay(trace, http, { sampleEveryMs: 0 });
    expect(Array.from(overHttp.hitBlocks)).toEqual(expected);
  }, 300_000);

  it('the command over --url: --json totals equal the definition; stored bytes come from the admin API with --token', async () => {
    const { out, err, io } = captureIo({ KVTIER_API_KEY: KEYS.bob });
    const code = await runReplayCommand([slice.path, '--url', server.url, '--block-tokens', String(BLOCK), '--token', 'admin-secret', '--json'], io);
    expect(code, err.join('')).toBe(0);
    const report = JSON.parse(out.join('')) as ReplayReport;
    // bob is another tenant: none of alice's blocks are his, so his replay sees the definition from scratch.
    expect(report.total.hitTokens).toBe(sum(definitionHits(slice.requests)) * BLOCK);
    expect(report.total.hitTokens).toBe(report.total.idealHitTokens);
    expect(report.target).toContain(server.url);
    expect(report.stored.peakBytes).toBeGreaterThan(0);
  }, 300_000);

  it('bad input: one line saying what to do, non-zero exit', async () => {
    const cases: Array<{ args: string[]; env?: NodeJS.ProcessEnv; code: number; says: RegExp }> = [
      // Nothing listens on port 9 of loopback (discard, never run here).
      { args: ['--url', 'http://127.0.0.1:9'], code: 1, says: /cannot reach http:\/\/127\.0\.0\.1:9\/v1\/models.*is the server running.*KVT_ERR_REPLAY_SERVER/ },
      { args: ['--url', 'not a url'], code: 1, says: /is not a URL.*KVT_ERR_REPLAY_SERVER/ },
      { args: ['--url', server.url, '--api-key', 'sk-wrong'], code: 1, says: /answered 401.*--api-key.*KVT_ERR_REPLAY_SERVER/ },
      { args: ['--url', server.url, '--ttl', '5m'], code: 2, says: /--ttl is for the embedded tier/ },
      { args: ['--api-key', KEYS.alice], code: 2, says: /--api-key goes with --url/ },
      { args: ['--engine', 'synthetic:tiny', '--prefill-tokens-per-s', '100'], code: 2, says: /--engine.*or --prefill-tokens-per-s.*not both/ },
      { args: ['--engine-sample', '3'], code: 2, says: /--engine-sample goes with --engine/ },
    ];
    for (const c of cases) {
      const { out, err, io } = captureIo(c.env);
      const code = await runReplayCommand([slice.path, '--block-tokens', String(BLOCK), ...c.args], io);
      expect(code, `${c.args.join(' ')}: ${err.join('')}`).toBe(c.code);
      expect(out.join('')).toBe('');
      const lines = err.join('').trim().split('\n');
      expect(lines, c.args.join(' ')).toHaveLength(1);
      expect(lines[0]).toMatch(c.says);
    }
  }, 300_000);
});

describe('kvtier replay --engine (a measured prefill rate)', () => {
  it('runs the synthetic model on a sample and reports GPU-seconds saved at the measured rate', async () => {
    const slice = writeSlice();
    const dataDir = mkdtempSync(join(tmpdir(), 'kvtier-replay-engine-'));
    const { out, err, io } = captureIo();
    let code: number;
    try {
      code = await runReplayCommand([slice.path, '--block-tokens', String(BLOCK), '--data-dir', dataDir, '--engine', 'synthetic:tiny', '--engine-sample', '3', '--json'], io);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
    expect(code, err.join('')).toBe(0);
    const report = JSON.parse(out.join('')) as ReplayReport;
    expect(report.prefill.source).toMatch(/^measured: synthetic:tiny, 3 requests, \d+ tokens in /);
    expect(report.prefill.tokensPerS).toBeGreaterThan(0);
    expect(report.total.hitTokens).toBeGreaterThan(0);
    expect(report.total.gpuSecondsSaved).toBeCloseTo(report.total.hitTokens / report.prefill.tokensPerS, 9);
  }, 300_000);
});
