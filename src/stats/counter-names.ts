/**
 * The counter vocabulary shared by the recorder, the stores and the overview.
 * Flat names so Redis can HINCRBYFLOAT them one by one.
 */
export const C = {
  requests: 'requests',
  /** Requests whose prompt had at least one cached token. */
  requestsWithHit: 'requestsWithHit',
  promptTokens: 'promptTokens',
  hitTokens: 'hitTokens',
  missTokens: 'missTokens',
  outputTokens: 'outputTokens',
  /** Worker time spent on requests (lookup, load, prefill, decode). */
  engineBusyMs: 'engineBusyMs',
  /** Wall time engines were up (what a rented GPU is billed for). */
  engineUpMs: 'engineUpMs',
  gcRuns: 'tier:gcRuns',
  expiredBlocks: 'tier:expiredBlocks',
  expiredBytes: 'tier:expiredBytes',
  evictedBlocks: 'tier:evictedBlocks',
  evictedBytes: 'tier:evictedBytes',
  bytesRead: 'tier:bytesRead',
  bytesWritten: 'tier:bytesWritten',
  blocksWritten: 'tier:blocksWritten',
  tierErrors: 'tier:errors',
  purgedBlocks: 'admin:purgedBlocks',
  purgedBytes: 'admin:purgedBytes',
} as const;

export const TENANT_FIELDS = ['requests', 'hitTokens', 'missTokens', 'outputTokens'] as const;
export type TenantField = (typeof TENANT_FIELDS)[number];

export function tenantCounter(tenant: string, field: TenantField): string {
  return `tenant:${tenant}:${field}`;
}

/** `tenant:acme:hitTokens` → ["acme", "hitTokens"]; tenant ids may contain ':'. */
export function parseTenantCounter(name: string): [string, string] | null {
  if (!name.startsWith('tenant:')) return null;
  const last = name.lastIndexOf(':');
  if (last <= 'tenant:'.length) return null;
  return [name.slice('tenant:'.length, last), name.slice(last + 1)];
}

/** Gauges: stored bytes / blocks per index scope tag ("g", "c:chat", "t:acme"). */
export function bytesGauge(scopeTag: string): string {
  return `${scopeTag}|bytes`;
}
export function blocksGauge(scopeTag: string): string {
  return `${scopeTag}|blocks`;
}

/**
 * The reuse-gap histogram (src/kvtier/reuse-gaps.ts), one counter per class,
 * bucket and figure, summed over the cluster: `gap:<class>:<upper edge ms |
 * inf>:<tokens|blocks|ms>` (hit tokens, hit blocks, sum of their gaps in ms).
 */
export type GapField = 'tokens' | 'blocks' | 'ms';

export function gapCounter(trafficClass: string, upperEdgeMs: number | null, field: GapField): string {
  return `gap:${trafficClass}:${upperEdgeMs === null ? 'inf' : upperEdgeMs}:${field}`;
}

/** `gap:chat:300000:tokens` → { class: chat, upperEdgeMs: 300000, field: tokens }; classes may contain ':'. */
export function parseGapCounter(name: string): { trafficClass: string; upperEdgeMs: number | null; field: GapField } | null {
  const match = /^gap:(.+):(\d+|inf):(tokens|blocks|ms)$/.exec(name);
  if (!match) return null;
  return { trafficClass: match[1], upperEdgeMs: match[2] === 'inf' ? null : Number(match[2]), field: match[3] as GapField };
}
