/**
 * `kvtier replay TRACE`: a trace (Mooncake JSONL or the generic form, gz or
 * plain; src/replay/README.md) through the real tier with simulated prefill,
 * time compressed by default. Prints hit tokens per class next to the ideal,
 * stored bytes, dollars against no cache, GPU-seconds saved and a per-hour
 * table, or `--json`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { boolFlag, helpText, parseArgs, stringFlag, type CommandSpec } from './args.ts';
import { CliError } from './cli-error.ts';
import { errorLine } from './index.ts';
import { json, progressReporter, type CliIo } from './output.ts';
import { parseDuration } from './units.ts';

export const REPLAY: CommandSpec = {
  name: 'replay',
  summary: 'replay a request trace through the cache and report hits, bytes and dollars',
  usage: 'kvtier replay TRACE.jsonl[.gz] [--ttl 1h|none] [--speed 0|1|N] [--limit N] [--json]',
  positionals: [1, 1],
  positionalName: 'TRACE',
  details:
    'Replays each request in arrival order: a lookup of its blocks (tokens synthesised per block id), then a store of what missed;\n' +
    'prefill is simulated (GPU-seconds at --prefill-tokens-per-s). The ideal is an infinite cache with the same block rule.\n' +
    'Without --data-dir the tier lives in a temporary directory, removed afterwards.',
  flags: [
    { name: 'ttl', kind: 'string', value: 'DURATION', help: 'TTL for every class (5m, 1h, 3d, none); default the policy in force in --data-dir (chat 7d, agent 3d)' },
    { name: 'speed', kind: 'string', value: 'N', help: '0 = as fast as it goes, clock jumps to each arrival (default); 1 = the trace\'s timing; N = N times faster' },
    { name: 'limit', kind: 'string', value: 'N', help: 'replay only the first N requests' },
    { name: 'block-tokens', kind: 'string', value: 'N', help: 'tokens per block id (default 512, the Mooncake traces\')' },
    { name: 'class', kind: 'string', value: 'NAME', help: 'traffic class of requests that name none (default chat)' },
    { name: 'tenant', kind: 'string', value: 'ID', help: 'tenant of requests that name none (default replay)' },
    { name: 'storage', kind: 'string', value: 'URL', help: 'block storage: fs:DIR or s3://bucket/prefix?endpoint=… (default fs under the data dir)' },
    { name: 'prefill-tokens-per-s', kind: 'string', value: 'N', help: 'prefill rate for GPU-seconds saved (default 10000, an assumption; measure your engine\'s)' },
    { name: 'kv-bytes-per-token', kind: 'string', value: 'N', help: 'KV bytes per token to scale stored bytes to (default 70272: DeepSeek-V3 MLA, f16)' },
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
    if (stringFlag(args, 'url') !== undefined) throw new CliError('KVT_ERR_CLI_USAGE', 'kvtier replay: --url (replaying against a running server) is not supported yet; replay through the embedded tier (--data-dir, --storage, --redis-url)');
    const ttlRaw = stringFlag(args, 'ttl');
    const ttlMs = ttlRaw === undefined ? undefined : ttlRaw === 'none' ? 3650 * 86_400_000 : parseDuration(ttlRaw, '--ttl');
    const speed = positiveNumber(stringFlag(args, 'speed'), 'speed', 0, true);
    const limit = positiveInt(stringFlag(args, 'limit'), 'limit');
    const blockTokens = positiveInt(stringFlag(args, 'block-tokens'), 'block-tokens') ?? 512;
    const prefillTokensPerS = positiveNumber(stringFlag(args, 'prefill-tokens-per-s'), 'prefill-tokens-per-s', 10_000);
    const kvBytesPerToken = positiveNumber(stringFlag(args, 'kv-bytes-per-token'), 'kv-bytes-per-token', 70_272);
    const { readTrace, TierTarget, runReplay, buildReport, formatReport } = await import('../../replay/index.ts');
    const { loadPricing, openStatsStore, StatsRecorder } = await import('../../stats/index.ts');
    const pricing = loadPricing(io.env);
    const path = args.positionals[0];
    const trace = readTrace(path, { blockTokens, limit, defaultClass: stringFlag(args, 'class'), defaultTenant: stringFlag(args, 'tenant') });
    let dataDir = stringFlag(args, 'data-dir');
    if (dataDir === undefined) {
      const made = mkdtempSync(join(tmpdir(), 'kvtier-replay-'));
      dataDir = made;
      cleanup = () => rmSync(made, { recursive: true, force: true });
    }
    const storage = stringFlag(args, 'storage');
    const redisUrl = stringFlag(args, 'redis-url') ?? (io.env.REDIS_URL || undefined);
    const classes = [...new Set(trace.requests.map((r) => r.trafficClass))];
    const target = await TierTarget.open({ dataDir, storage, redisUrl, blockTokens, ttlMs, classes });
    // The data dir's stats store gets the replay's requests and the tier's counters (the what-if's histogram among them):
    // `kvtier stats [--what-if] --data-dir DIR` reads them as it reads a server's.
    const statsStore = await openStatsStore({ dataDir, redisUrl });
    const recorder = new StatsRecorder({ store: statsStore, sampleTier: async () => ({ cache: target.tier.stats(), usage: target.tier.usage() }) });
    try {
      const showProgress = boolFlag(args, 'progress') || io.interactive;
      const progress = showProgress ? progressReporter(io, 'replay') : undefined;
      const started = Date.now();
      const outcome = await runReplay(trace, target, {
        speed,
        onServed: (request, hit) =>
          recorder.record({ tenant: request.tenant, trafficClass: request.trafficClass, promptTokens: request.inputTokens, cachedTokens: hit * blockTokens, completionTokens: request.outputTokens, workerMs: 0 }),
        onProgress: progress
          ? (done, total) => {
              const width = 30;
              const filled = Math.round((done / total) * width);
              const rate = done / Math.max(0.001, (Date.now() - started) / 1000);
              progress.update(`[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total} requests, ${Math.round(rate)}/s`);
            }
          : undefined,
      });
      progress?.done();
      await recorder.flush();
      const storedBytesPerToken = (target.layout.layers * target.layout.headDim * 2 * blockTokens + blockTokens * 4) / blockTokens;
      const report = buildReport(trace, outcome, {
        path,
        target: `${storage ?? 'fs'} + ${redisUrl ? 'Redis' : 'LMDB'} (embedded tier, simulated prefill${speed === 0 ? ', time compressed' : `, ${speed}x trace timing`})`,
        ttlMsByClass: Object.fromEntries(classes.map((c) => [c, target.ttlByClass()[c]])),
        pricing,
        prefillTokensPerS,
        prefillSource: stringFlag(args, 'prefill-tokens-per-s') === undefined ? 'assumed; --prefill-tokens-per-s sets it' : '--prefill-tokens-per-s',
        kvBytesPerToken,
        storedBytesPerToken,
      });
      io.out(boolFlag(args, 'json') ? json(report) : formatReport(report));
    } finally {
      await recorder.close().catch((error: unknown) => io.err(`kvtier replay: writing the stats failed: ${(error as Error).message}\n`));
      await statsStore.close();
      await target.close();
    }
    return 0;
  } catch (error) {
    const { line, exitCode } = errorLine(error);
    io.err(line + '\n');
    return exitCode;
  } finally {
    cleanup?.();
  }
}
