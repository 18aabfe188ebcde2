/**
 * `kvtier replay TRACE`: a trace (Mooncake JSONL or the generic form, gz or
 * plain; src/replay/README.md) through the real tier with simulated prefill,
 * time compressed by default. Prints hit tokens per class next to the ideal,
 * stored bytes, dollars against no cache, GPU-seconds saved and a per-hour
 * table, or `--json`. `--url` replays against a running server instead
 * (src/replay/http-target.ts); `--engine MODEL` measures the prefill rate by
 * running the model on a sample of the trace (src/replay/engine-rate.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { boolFlag, helpText, parseArgs, stringFlag, type CommandSpec } from './args.ts';
import { CliError } from './cli-error.ts';
import { reportFailure } from './index.ts';
import { json, progressReporter, type CliIo } from './output.ts';
import { parseDuration } from './units.ts';

export const REPLAY: CommandSpec = {
  name: 'replay',
  summary: 'replay a request trace through the cache and report hits, bytes and dollars',
  usage: 'kvtier replay TRACE.jsonl[.gz] [--ttl 1h|none] [--speed 0|1|N] [--limit N] [--url URL [--api-key KEY]] [--engine MODEL] [--json]',
  positionals: [1, 1],
  positionalName: 'TRACE',
  details:
    'Replays each request in arrival order: a lookup of its blocks (tokens synthesised per block id), then a store of what missed;\n' +
    'prefill is simulated (GPU-seconds at --prefill-tokens-per-s). The ideal is an infinite cache with the same block rule.\n' +
    'Without --data-dir the tier lives in a temporary directory, removed afterwards.\n' +
    'With --url the requests go to a running kvtier server (POST /v1/completions, prompt = the synthesised token ids below the\n' +
    'vocab_size of its GET /v1/models, hits = usage cached_tokens); its own clock and retention policy apply, stored bytes are\n' +
    'read with --token (GET /admin/stats). --engine runs MODEL for real on --engine-sample requests to measure the prefill rate.',
  flags: [
    { name: 'ttl', kind: 'string', value: 'DURATION', help: 'TTL for every class (5m, 1h, 3d, none); default the policy in force in --data-dir (chat 7d, agent 3d)' },
    { name: 'speed', kind: 'string', value: 'N', help: '0 = as fast as it goes, clock jumps to each arrival (default); 1 = the trace\'s timing; N = N times faster' },
    { name: 'limit', kind: 'string', value: 'N', help: 'replay only the first N requests' },
    { name: 'block-tokens', kind: 'string', value: 'N', help: 'tokens per block id (default 512, the Mooncake traces\')' },
    { name: 'class', kind: 'string', value: 'NAME', help: 'traffic class of requests that name none (default chat)' },
    { name: 'tenant', kind: 'string', value: 'ID', help: 'tenant of requests that name none (default replay)' },
    { name: 'storage', kind: 'string', value: 'URL', help: 'block storage: fs:DIR or s3://bucket/prefix?endpoint=… (default fs under the data dir)' },
    { name: 'node-index', kind: 'string', value: 'lmdb|plane', help: 'the tier\'s node index: plane = the embedded plane\'s records (default without --redis-url); lmdb = its own LMDB index beside the plane (the only one with --redis-url)' },
    { name: 'prefill-tokens-per-s', kind: 'string', value: 'N', help: 'prefill rate for GPU-seconds saved (default 10000, an assumption; measure your engine\'s)' },
    { name: 'kv-bytes-per-token', kind: 'string', value: 'N', help: 'KV bytes per token to scale stored bytes to (default 70272: DeepSeek-V3 MLA, f16)' },
    { name: 'api-key', kind: 'string', value: 'KEY', help: 'with --url: the API key requests are sent with (default $KVTIER_API_KEY); one key = one tenant, so the trace must have one' },
    { name: 'engine', kind: 'string', value: 'MODEL', help: 'measure the prefill rate by running MODEL (GGUF path, synthetic:tiny, …) on a sample of the trace; instead of --prefill-tokens-per-s' },
    { name: 'engine-sample', kind: 'string', value: 'N', help: 'requests --engine prefills, spread over the trace (default 8)' },
    { name: 'json', kind: 'boolean', help: 'print the report as JSON' },
    { name: 'progress', kind: 'boolean', help: 'a progress bar on stderr (default when stderr is a terminal)' },
  ],
};

function positiveNumber(raw: string | undefined, flag: string, fallback: number, allowZero = false): number {
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0 || (!allowZero && value === 0)) throw new CliError('KVT_ERR_CLI_BAD_VALUE', `kvtier replay: --${flag} ${raw} is not a ${allowZero ? 'non-negative' : 'positive'} number`);
  return value;
}

function positiveInt(raw: string | undefined, flag: string): number | undefined {
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) throw new CliError('KVT_ERR_CLI_BAD_VALUE', `kvtier replay: --${flag} ${raw} is not a positive integer`);
  return value;
}

/** Runs `kvtier replay …`; returns the exit code. */
export async function runReplayCommand(argv: readonly string[], io: CliIo): Promise<number> {
  let cleanup: (() => void) | undefined;
  try {
    const args = parseArgs(REPLAY, argv);
    if (args.flags.has('help')) {
      io.out(helpText(REPLAY));
      return 0;
    }
    const url = stringFlag(args, 'url');
    if (url !== undefined) {
      for (const flag of ['ttl', 'storage', 'redis-url', 'data-dir']) {
        if (stringFlag(args, flag) !== undefined) throw new CliError('KVT_ERR_CLI_USAGE', `kvtier replay: --${flag} is for the embedded tier; with --url the server's storage and policy apply (kvtier policy --url sets its TTLs)`);
      }
    } else if (stringFlag(args, 'api-key') !== undefined) throw new CliError('KVT_ERR_CLI_USAGE', 'kvtier replay: --api-key goes with --url');
    const engineModel = stringFlag(args, 'engine');
    if (engineModel !== undefined && stringFlag(args, 'prefill-tokens-per-s') !== undefined) throw new CliError('KVT_ERR_CLI_USAGE', 'kvtier replay: give --engine (measure the prefill rate) or --prefill-tokens-per-s (assume one), not both');
    if (engineModel === undefined && stringFlag(args, 'engine-sample') !== undefined) throw new CliError('KVT_ERR_CLI_USAGE', 'kvtier replay: --engine-sample goes with --engine');
    const engineSample = positiveInt(stringFlag(args, 'engine-sample'), 'engine-sample') ?? 8;
    const ttlRaw = stringFlag(args, 'ttl');
    const ttlMs = ttlRaw === undefined ? undefined : ttlRaw === 'none' ? 3650 * 86_400_000 : parseDuration(ttlRaw, '--ttl');
    const speed = positiveNumber(stringFlag(args, 'speed'), 'speed', 0, true);
    const limit = positiveInt(stringFlag(args, 'limit'), 'limit');
    const blockTokens = positiveInt(stringFlag(args, 'block-tokens'), 'block-tokens') ?? 512;
    let prefillTokensPerS = positiveNumber(stringFlag(args, 'prefill-tokens-per-s'), 'prefill-tokens-per-s', 10_000);
    let prefillSource = stringFlag(args, 'prefill-tokens-per-s') === undefined ? 'assumed; --prefill-tokens-per-s sets it, --engine measures it' : '--prefill-tokens-per-s';
    const kvBytesPerToken = positiveNumber(stringFlag(args, 'kv-bytes-per-token'), 'kv-bytes-per-token', 70_272);
    const { readTrace, TierTarget, HttpTarget, runReplay, buildReport, formatReport, measurePrefillRate } = await import('../../replay/index.ts');
    const { loadPricing, openStatsStore, StatsRecorder } = await import('../../stats/index.ts');
    const pricing = loadPricing(io.env);
    const path = args.positionals[0];
    const trace = readTrace(path, { blockTokens, limit, defaultClass: stringFlag(args, 'class'), defaultTenant: stringFlag(args, 'tenant') });
    const classes = [...new Set(trace.requests.map((r) => r.trafficClass))];
    const tenants = new Set(trace.requests.map((r) => r.tenant));
    if (url !== undefined && tenants.size > 1) throw new CliError('KVT_ERR_CLI_USAGE', `kvtier replay: the trace has ${tenants.size} tenants; with --url every request goes with one API key (one tenant), so replay one tenant's requests at a time`);
    let dataDir = stringFlag(args, 'data-dir');
    if (dataDir === undefined) {
      const made = mkdtempSync(join(tmpdir(), 'kvtier-replay-'));
      dataDir = made;
      cleanup = () => rmSync(made, { recursive: true, force: true });
    }
    if (engineModel !== undefined) {
      const { loadEngine } = await import('../../../inference-core/index.ts');
      const engine = await loadEngine(engineModel, { dataDir });
      try {
        const rate = measurePrefillRate(engine, trace, { sample: engineSample });
        prefillTokensPerS = rate.tokensPerS;
        prefillSource = `measured: ${engineModel}, ${rate.requests} requests, ${rate.tokens} tokens in ${rate.seconds.toFixed(2)} s${rate.truncated ? ', prompts cut to its context' : ''}`;
      } finally {
        engine.destroy();
      }
    }
    const showProgress = boolFlag(args, 'progress') || io.interactive;
    const progress = showProgress ? progressReporter(io, 'replay') : undefined;
    const started = Date.now();
    const onProgress = progress
      ? (done: number, total: number) => {
          const width = 30;
          const filled = Math.round((done / total) * width);
          const rate = done / Math.max(0.001, (Date.now() - started) / 1000);
          progress.update(`[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total} requests, ${Math.round(rate)}/s`);
        }
      : undefined;
    const reportFor = (outcome: Parameters<typeof buildReport>[1], target: string, ttlMsByClass: Record<string, number>, storedBytesPerToken: number) =>
      buildReport(trace, outcome, { path, target, ttlMsByClass, pricing, prefillTokensPerS, prefillSource, kvBytesPerToken, storedBytesPerToken });
    const print = (report: ReturnType<typeof buildReport>) => io.out(boolFlag(args, 'json') ? json(report) : formatReport(report));

    if (url !== undefined) {
      const target = await HttpTarget.open({ url, apiKey: stringFlag(args, 'api-key') ?? (io.env.KVTIER_API_KEY || undefined), adminToken: stringFlag(args, 'token') ?? (io.env.KVTIER_ADMIN_TOKEN || undefined), blockTokens });
      const outcome = await runReplay(trace, target, { speed, onProgress });
      progress?.done();
      // The server's policy is its own; the report names the server, and its stored bytes are the served model's (no scaling).
      print(reportFor(outcome, `${target.base} (${target.model.id}, the server's policy and clock${speed === 0 ? ', requests sent as fast as answered' : `, ${speed}x trace timing`})`, {}, kvBytesPerToken));
      return 0;
    }

    const storage = stringFlag(args, 'storage');
    const redisUrl = stringFlag(args, 'redis-url') ?? (io.env.REDIS_URL || undefined);
    const nodeIndex = stringFlag(args, 'node-index') ?? (redisUrl === undefined ? 'plane' : 'lmdb');
    if (nodeIndex !== 'lmdb' && nodeIndex !== 'plane') throw new CliError('KVT_ERR_CLI_BAD_VALUE', `kvtier replay: --node-index ${nodeIndex} is not lmdb or plane`);
    if (nodeIndex === 'plane' && redisUrl !== undefined) throw new CliError('KVT_ERR_CLI_BAD_VALUE', 'kvtier replay: --node-index plane reads the embedded plane; with --redis-url use --node-index lmdb');
    const target = await TierTarget.open({ dataDir, storage, redisUrl, blockTokens, ttlMs, classes, nodeIndex });
    // The data dir's stats store gets the replay's requests and the tier's counters (the what-if's histogram among them):
    // `kvtier stats [--what-if] --data-dir DIR` reads them as it reads a server's.
    const statsStore = await openStatsStore({ dataDir, redisUrl });
    const recorder = new StatsRecorder({ store: statsStore, sampleTier: async () => ({ cache: target.tier.stats(), usage: target.tier.usage() }) });
    try {
      const outcome = await runReplay(trace, target, {
        speed,
        onServed: (request, hit) =>
          recorder.record({ tenant: request.tenant, trafficClass: request.trafficClass, promptTokens: request.inputTokens, cachedTokens: hit * blockTokens, completionTokens: request.outputTokens, workerMs: 0 }),
        onProgress,
      });
      progress?.done();
      await recorder.flush();
      const storedBytesPerToken = (target.layout.layers * target.layout.headDim * 2 * blockTokens + blockTokens * 4) / blockTokens;
      const label = `${storage ?? 'fs'} + ${redisUrl ? 'Redis' : 'LMDB'} (embedded tier, simulated prefill${speed === 0 ? ', time compressed' : `, ${speed}x trace timing`})`;
      print(reportFor(outcome, label, Object.fromEntries(classes.map((c) => [c, target.ttlByClass()[c]])), storedBytesPerToken));
    } finally {
      await recorder.close().catch((error: unknown) => io.err(`kvtier replay: writing the stats failed: ${(error as Error).message}\n`));
      await statsStore.close();
      await target.close();
    }
    return 0;
  } catch (error) {
    return reportFailure(error, io);
  } finally {
    cleanup?.();
  }
}
