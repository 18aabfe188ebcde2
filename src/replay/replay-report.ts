/**
 * A replay's answer in figures: per class and in total the hit tokens and
 * ratio next to the ideal, stored bytes, dollars billed at the configured
 * prices against the same traffic with no cache, GPU-seconds of prefill
 * saved at the prefill rate, and one row per trace hour. `--json` prints
 * this object; the table is the same figures for people.
 */
import type { Pricing } from '../stats/index.ts';
import type { ReplayOutcome, Tally } from './replay-run.ts';
import type { Trace } from './trace.ts';

export interface Figures {
  requests: number;
  inputTokens: number;
  outputTokens: number;
  hitTokens: number;
  hitRatio: number;
  idealHitTokens: number;
  idealHitRatio: number;
  /** USD billed with the cache (hit tokens at the hit price) and for the same traffic with none. */
  usd: number;
  usdNoCache: number;
  gpuSecondsSaved: number;
}

export interface ReplayReport {
  trace: { path: string; format: string; requests: number; spanMs: number; blockTokens: number; distinctBlocks: number };
  target: string;
  ttlMsByClass: Record<string, number>;
  pricing: { hitPerMillion: number; missPerMillion: number; outputPerMillion: number; source: string };
  prefill: { tokensPerS: number; source: string };
  total: Figures;
  byClass: Record<string, Figures>;
  byHour: Array<Figures & { hour: number }>;
  stored: { peakBytes: number; avgBytes: number; peakBlocks: number; modelPeakBytes: number; modelAvgBytes: number; kvBytesPerToken: number };
  wallMs: number;
  requestsPerS: number;
}

export interface ReportContext {
  path: string;
  target: string;
  ttlMsByClass: Record<string, number>;
  pricing: Pricing;
  prefillTokensPerS: number;
  prefillSource: string;
  /** KV bytes per token of the model the stored bytes are scaled to. */
  kvBytesPerToken: number;
  /** Bytes per token the replay actually stored (its payload layout). */
  storedBytesPerToken: number;
}

export function figuresOf(t: Tally, pricing: Pricing, prefillTokensPerS: number): Figures {
  const miss = t.inputTokens - t.hitTokens;
  const usd = (t.hitTokens * pricing.hitPerMillion + miss * pricing.missPerMillion + t.outputTokens * pricing.outputPerMillion) / 1e6;
  const usdNoCache = (t.inputTokens * pricing.missPerMillion + t.outputTokens * pricing.outputPerMillion) / 1e6;
  return {
    requests: t.requests,
    inputTokens: t.inputTokens,
    outputTokens: t.outputTokens,
    hitTokens: t.hitTokens,
    hitRatio: t.inputTokens > 0 ? t.hitTokens / t.inputTokens : 0,
    idealHitTokens: t.idealHitTokens,
    idealHitRatio: t.inputTokens > 0 ? t.idealHitTokens / t.inputTokens : 0,
    usd,
    usdNoCache,
    gpuSecondsSaved: prefillTokensPerS > 0 ? t.hitTokens / prefillTokensPerS : 0,
  };
}

export function buildReport(trace: Trace, outcome: ReplayOutcome, ctx: ReportContext): ReplayReport {
  const f = (t: Tally) => figuresOf(t, ctx.pricing, ctx.prefillTokensPerS);
  const scale = ctx.storedBytesPerToken > 0 ? ctx.kvBytesPerToken / ctx.storedBytesPerToken : 0;
  return {
    trace: { path: ctx.path, format: trace.format, requests: trace.requests.length, spanMs: trace.spanMs, blockTokens: trace.blockTokens, distinctBlocks: trace.distinctBlocks },
    target: ctx.target,
    ttlMsByClass: ctx.ttlMsByClass,
    pricing: { hitPerMillion: ctx.pricing.hitPerMillion, missPerMillion: ctx.pricing.missPerMillion, outputPerMillion: ctx.pricing.outputPerMillion, source: ctx.pricing.source },
    prefill: { tokensPerS: ctx.prefillTokensPerS, source: ctx.prefillSource },
    total: f(outcome.total),
    byClass: Object.fromEntries(Object.entries(outcome.byClass).sort(([a], [b]) => a.localeCompare(b)).map(([name, t]) => [name, f(t)])),
    byHour: outcome.byHour.map((t, hour) => ({ hour, ...f(t) })),
    stored: {
      peakBytes: outcome.stored.peakBytes,
      avgBytes: Math.round(outcome.stored.avgBytes),
      peakBlocks: outcome.stored.peakBlocks,
      modelPeakBytes: Math.round(outcome.stored.peakBytes * scale),
      modelAvgBytes: Math.round(outcome.stored.avgBytes * scale),
      kvBytesPerToken: ctx.kvBytesPerToken,
    },
    wallMs: Math.round(outcome.wallMs),
    requestsPerS: outcome.wallMs > 0 ? Math.round((outcome.total.requests / outcome.wallMs) * 1000) : 0,
  };
}

const int = (n: number) => Math.round(n).toLocaleString('en-US');
const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
const usd = (x: number) => `$${x.toFixed(x < 10 ? 4 : 2)}`;
function bytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}
function duration(ms: number): string {
  if (ms >= 365 * 86_400_000) return 'none';
  if (ms % 86_400_000 === 0) return `${ms / 86_400_000}d`;
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0) return `${ms / 60_000}m`;
  return `${ms / 1000}s`;
}

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [line(header), ...rows.map(line)].join('\n');
}

export function formatReport(report: ReplayReport): string {
  const head = ['', 'requests', 'input tok', 'hit tok', 'hit', 'ideal hit', 'ideal', 'USD', 'USD no cache', 'GPU-s saved'];
  const row = (name: string, x: Figures) => [name, int(x.requests), int(x.inputTokens), int(x.hitTokens), pct(x.hitRatio), int(x.idealHitTokens), pct(x.idealHitRatio), usd(x.usd), usd(x.usdNoCache), x.gpuSecondsSaved.toFixed(1)];
  const ttl = Object.entries(report.ttlMsByClass).map(([c, ms]) => `${c} ${duration(ms)}`).join(', ');
  const lines = [
    `kvtier replay ${report.trace.path}: ${int(report.trace.requests)} requests (${report.trace.format}) over ${(report.trace.spanMs / 60_000).toFixed(1)} min, ${report.trace.blockTokens}-token blocks, ${int(report.trace.distinctBlocks)} distinct`,
    `through ${report.target}; TTL ${ttl}; ideal = an infinite cache, same block rule`,
    '',
    table(head, [...Object.entries(report.byClass).map(([name, x]) => row(name, x)), row('total', report.total)]),
    '',
    `stored: peak ${bytes(report.stored.peakBytes)} (${int(report.stored.peakBlocks)} blocks), average ${bytes(report.stored.avgBytes)} as replayed; at ${int(report.stored.kvBytesPerToken)} B of KV per token: peak ${bytes(report.stored.modelPeakBytes)}, average ${bytes(report.stored.modelAvgBytes)}`,
    `saved: ${usd(report.total.usdNoCache - report.total.usd)} of ${usd(report.total.usdNoCache)} (${report.pricing.source}); ${report.total.gpuSecondsSaved.toFixed(1)} GPU-s of prefill at ${int(report.prefill.tokensPerS)} tokens/s (${report.prefill.source})`,
    '',
    'per hour of the trace:',
    table(['hour', 'requests', 'input tok', 'hit tok', 'hit', 'ideal', 'USD', 'USD no cache'], report.byHour.map((h) => [String(h.hour), int(h.requests), int(h.inputTokens), int(h.hitTokens), pct(h.hitRatio), pct(h.idealHitRatio), usd(h.usd), usd(h.usdNoCache)])),
    '',
    `replayed in ${(report.wallMs / 1000).toFixed(1)} s (${int(report.requestsPerS)} requests/s)`,
  ];
  return lines.join('\n') + '\n';
}
