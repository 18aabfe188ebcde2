/** kvtier stats [--json]: the figures of GET /admin/stats/overview (the dashboard's source). */
import type { AdminApi } from '../../admin/index.ts';
import type { Overview, WhatIf } from '../../stats/index.ts';
import { boolFlag, type CommandSpec, type ParsedArgs } from './args.ts';
import { json, table, type CliIo } from './output.ts';
import { formatBytes } from './units.ts';

export const STATS: CommandSpec = {
  name: 'stats',
  summary: 'hit rate, tokens, cost at the price list vs. no cache, storage, GC and engine economics (summed over every process)',
  usage: 'kvtier stats [--what-if] [--json] [--url URL | --data-dir DIR]',
  flags: [
    { name: 'json', kind: 'boolean', help: 'print the overview as JSON (the same object the dashboard shows)' },
    { name: 'what-if', kind: 'boolean', help: 'the retention what-if: per class, hits, dollars and storage at TTLs 5m, 1h, 24h, 3d, 7d and the policy in force, on the traffic served' },
  ],
};

const ttlText = (ms: number | null): string => (ms === null ? '–' : ms % 86_400_000 === 0 ? `${ms / 86_400_000}d` : ms % 3_600_000 === 0 ? `${ms / 3_600_000}h` : ms % 60_000 === 0 ? `${ms / 60_000}m` : `${ms / 1000}s`);

export function formatWhatIf(w: WhatIf, target: string): string {
  let text = `kvtier at ${target}: retention what-if on the traffic served (storage at $${w.storageUsdPerGbMonth}/GB-month, KVTIER_STORAGE_USD_PER_GB_MONTH)\n`;
  text += 'exact for TTLs up to the class\'s TTL in force; "≥" marks a lower bound (a longer TTL would also have kept what expired)\n';
  for (const c of w.classes) {
    text += `\nclass ${c.trafficClass} (TTL in force ${ttlText(c.currentTtlMs)})\n`;
    text += table(
      ['ttl', 'hit tokens', 'saved', 'storage byte-days', 'storage', 'net'],
      c.rows.map((r) => {
        const bound = r.exact ? '' : '≥ ';
        return [r.ttl === 'current' ? `current (${ttlText(r.ttlMs)})` : r.ttl, bound + int(r.hitTokens), bound + usd(r.savedUsd), int(r.storageByteDays), usd(r.storageUsd), usd(r.netUsd)];
      }),
    );
  }
  if (w.classes.length === 0) text += '\nno hits recorded yet\n';
  return text;
}

const pct = (v: number | null) => (v === null ? '–' : `${(v * 100).toFixed(1)}%`);
const usd = (v: number) => (v === 0 ? '$0' : Math.abs(v) >= 1 ? `$${v.toFixed(2)}` : `$${v.toPrecision(3)}`);
const int = (v: number) => Math.round(v).toLocaleString('en-US');

export function formatOverview(o: Overview, target: string): string {
  const lines = [
    `kvtier at ${target}`,
    '',
    `requests        ${int(o.requests)} (${int(o.requestsWithHit)} with a cache hit)`,
    `hit rate        ${pct(o.hitRate.byTokens)} of prompt tokens, ${pct(o.hitRate.byRequests)} of requests`,
    `tokens          hit ${int(o.tokens.hit)} · miss ${int(o.tokens.miss)} · output ${int(o.tokens.output)}`,
    `cost            ${usd(o.cost.usd)} billed · ${usd(o.cost.withoutCacheUsd)} with no cache · saved ${usd(o.cost.savedUsd)} (${pct(o.cost.savedFraction)})`,
    `stored          ${formatBytes(o.storage.bytes)} in ${int(o.storage.blocks)} blocks`,
    `gc              ${int(o.gc.runs)} runs · expired ${int(o.gc.expired.blocks)} blocks (${formatBytes(o.gc.expired.bytes)}) · evicted ${int(o.gc.evicted.blocks)} (${formatBytes(o.gc.evicted.bytes)}) · purged ${int(o.gc.purged.blocks)}`,
    `engine          ${o.engine.upHours.toFixed(3)} engine-hours up (${pct(o.engine.utilization)} busy) · revenue ${usd(o.engine.revenuePerEngineHourUsd)}/engine-hour · GPU ${usd(o.engine.gpuHourUsd)}/GPU-hour · margin ${pct(o.engine.grossMargin)}`,
    `prices          ${o.pricing.source}: hit $${o.pricing.hitPerMillion}, miss $${o.pricing.missPerMillion}, output $${o.pricing.outputPerMillion} per 1M tokens`,
  ];
  let text = lines.join('\n') + '\n';
  const classes = Object.entries(o.storage.byClass);
  if (classes.length > 0) text += '\n' + table(['class', 'blocks', 'bytes'], classes.map(([name, c]) => [name, int(c.blocks), formatBytes(c.bytes)]));
  if (o.tenants.length > 0) {
    text +=
      '\n' +
      table(
        ['tenant', 'requests', 'hit rate', 'hit', 'miss', 'output', 'billed', 'stored'],
        o.tenants.map((t) => [t.tenant, int(t.requests), pct(t.hitRate), int(t.hitTokens), int(t.missTokens), int(t.outputTokens), usd(t.costUsd), formatBytes(t.storedBytes)]),
      );
  }
  return text;
}

export async function stats(api: AdminApi, args: ParsedArgs, io: CliIo): Promise<void> {
  const response = await api.overview();
  if (boolFlag(args, 'what-if')) {
    io.out(boolFlag(args, 'json') ? json(response.whatIf) : formatWhatIf(response.whatIf, api.target));
    return;
  }
  io.out(boolFlag(args, 'json') ? json(response) : formatOverview(response.overview, api.target));
}
