/** kvtier ls | inspect KEY | purge … --yes */
import type { AdminApi, PurgeFilter } from '../../admin/index.ts';
import { boolFlag, stringFlag, type CommandSpec, type FlagSpec, type ParsedArgs } from './args.ts';
import { CliError } from './cli-error.ts';
import { ago, json, progressReporter, table, type CliIo } from './output.ts';
import { formatBytes, formatDuration, parseDuration } from './units.ts';

/** The block filters of ls and purge (filterOf reads them); they combine. */
const FILTER_FLAGS: FlagSpec[] = [
  { name: 'tenant', kind: 'string', value: 'ID', help: 'only blocks of this tenant' },
  { name: 'class', kind: 'string', value: 'NAME', help: 'only blocks of this traffic class' },
  { name: 'older-than', kind: 'string', value: 'DURATION', help: 'only blocks last used longer ago than this (90m, 3d)' },
];

export const LS: CommandSpec = {
  name: 'ls',
  summary: "list cached blocks and unit tails (kind) this node's index knows, most recently used first",
  usage: 'kvtier ls [--class NAME] [--tenant ID] [--older-than DURATION] [--limit N] [--json]',
  flags: [
    ...FILTER_FLAGS,
    { name: 'limit', kind: 'string', value: 'N', help: 'at most N rows (default 50)' },
    { name: 'json', kind: 'boolean', help: 'print JSON' },
  ],
};

export const INSPECT: CommandSpec = {
  name: 'inspect',
  summary: 'show one block: index entry, expiry under the current policy, and its verified file header',
  usage: 'kvtier inspect KEY [--json]',
  positionals: [1, 1],
  positionalName: 'KEY (32 hex characters, see kvtier ls)',
  flags: [{ name: 'json', kind: 'boolean', help: 'print JSON' }],
};

export const PURGE: CommandSpec = {
  name: 'purge',
  summary: 'delete cached blocks from storage and the index (they become misses); needs --yes',
  usage: 'kvtier purge (--tenant ID | --class NAME | --older-than DURATION | --all) --yes',
  details: 'Filters combine (--tenant acme --class chat deletes acme\'s chat blocks). --all deletes every block and takes no filter.',
  flags: [
    ...FILTER_FLAGS,
    { name: 'all', kind: 'boolean', help: 'every block' },
    { name: 'yes', kind: 'boolean', help: 'really delete (required)' },
    { name: 'json', kind: 'boolean', help: 'print the report as JSON' },
  ],
};

function filterOf(args: ParsedArgs): { tenant?: string; trafficClass?: string; olderThanMs?: number } {
  const olderThan = stringFlag(args, 'older-than');
  return {
    tenant: stringFlag(args, 'tenant'),
    trafficClass: stringFlag(args, 'class'),
    olderThanMs: olderThan === undefined ? undefined : parseDuration(olderThan, '--older-than'),
  };
}

export function lsOptions(args: ParsedArgs): { tenant?: string; trafficClass?: string; olderThanMs?: number; limit: number } {
  const rawLimit = stringFlag(args, 'limit');
  const limit = rawLimit === undefined ? 50 : Number(rawLimit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw new CliError('KVT_ERR_CLI_BAD_VALUE', `--limit ${rawLimit} must be an integer from 1 to 10000`);
  return { ...filterOf(args), limit };
}

export async function ls(api: AdminApi, args: ParsedArgs, io: CliIo, options: ReturnType<typeof lsOptions>): Promise<void> {
  const listing = await api.listBlocks(options);
  if (boolFlag(args, 'json')) return io.out(json(listing));
  const now = Date.now();
  if (listing.blocks.length === 0) {
    io.out(`no blocks match (${listing.scanned} indexed at ${api.target})\n`);
    return;
  }
  io.out(
    table(
      ['key', 'kind', 'class', 'tenant', 'size', 'depth', 'hits', 'last use', 'expires in', 'client ttl'],
      listing.blocks.map((b) => [
        b.key,
        b.kind,
        b.trafficClass,
        b.tenant,
        b.sizeBytes === 0 ? '?' : formatBytes(b.sizeBytes),
        String(b.depth),
        String(b.hits),
        `${ago(now - b.lastUseAt)} ago`,
        b.expiresAt <= now ? 'expired' : ago(b.expiresAt - now),
        b.ttlCapMs ? formatDuration(b.ttlCapMs) : '–',
      ]),
    ),
  );
  if (listing.matched > listing.blocks.length) io.out(`… ${listing.matched - listing.blocks.length} more (of ${listing.matched} matching; raise --limit)\n`);
}

export async function inspect(api: AdminApi, args: ParsedArgs, io: CliIo, key: string): Promise<void> {
  const detail = await api.inspectBlock(key);
  if (boolFlag(args, 'json')) return io.out(json(detail));
  const now = Date.now();
  const e = detail.entry;
  const lines = [`${detail.storage.unit ? 'unit tail' : 'block'} ${detail.key}`];
  if (e) {
    lines.push(
      `  class       ${e.trafficClass}`,
      `  tenant      ${e.tenant}`,
      detail.storage.unit ? `  depth       ${e.depth} blocks before it` : `  depth       block ${e.depth} of its prompt`,
      `  size        ${e.sizeBytes === 0 ? 'unknown (adopted, not read yet)' : formatBytes(e.sizeBytes)}`,
      `  created     ${new Date(e.createdAt).toISOString()}`,
      `  last use    ${new Date(e.lastUseAt).toISOString()} (${ago(now - e.lastUseAt)} ago), ${e.hits} hits`,
      `  ttl         ${detail.ttlMs === null ? '–' : formatDuration(detail.ttlMs)} (current policy${e.ttlCapMs ? `, capped by the client's hint of ${formatDuration(e.ttlCapMs)}` : ''})`,
      `  expires     ${detail.expiresAt === null ? '–' : `${new Date(detail.expiresAt).toISOString()}${detail.expired ? ' (expired; the next GC removes it)' : ` (in ${ago(detail.expiresAt - now)})`}`}`,
    );
  } else lines.push('  index       not in this node\'s index (on storage only)');
  const s = detail.storage;
  if (!s.present) lines.push(`  storage     ${s.problem ? `unreadable: ${s.problem.message} [${s.problem.code}]` : 'missing (a lookup will drop the index entry)'}`);
  else {
    if (s.encryption) {
      lines.push(
        `  storage     ${formatBytes(s.fileBytes ?? 0)} file, sealed`,
        `  encryption  ${s.encryption.algorithm}, key id ${s.encryption.keyId} (header, tokens and payload open only with the tenant's key)`,
      );
    } else lines.push(`  storage     ${formatBytes(s.fileBytes ?? 0)} file, ${s.verified ? 'verified' : `FAILED verification: ${s.problem?.message} [${s.problem?.code}]`}`);
    if (s.encryption === null) lines.push('  encryption  none (plaintext block)');
    if (s.unit) {
      const u = s.unit;
      lines.push(
        `  format      tail v${u.formatVersion}, unit at ${u.position} tokens: ${u.blocks} blocks of ${u.tokensPerBlock} (chain ending at ${u.blocks > 0 ? u.blockKey : '–'}) + ${u.position - u.blocks * u.tokensPerBlock} tokens`,
        `  model       ${u.modelFingerprint}`,
        ...u.sections.map((x) => `  section     ${x.kind}, layers ${x.layers.join(',')}, ${x.kind.endsWith('-kv') ? `tokens [${x.firstToken}, ${x.firstToken + x.tokens})` : `state at ${x.firstToken}`}, ${formatBytes(x.bytes)}`),
        `  codec       ${u.codec}, ${u.dtype}, payload stored in ${formatBytes(u.storedPayloadBytes)}`,
        `  tokens      ${u.tailTokens.join(' ')}${u.position - u.blocks * u.tokensPerBlock > u.tailTokens.length ? ' …' : ''}`,
      );
    }
    if (s.header) {
      const l = s.header.layout;
      lines.push(
        `  format      v${s.header.formatVersion}, parent ${s.header.parentKey}`,
        `  model       ${s.header.modelFingerprint}`,
        `  layout      ${l.kind === 'mla' ? `mla latent, ${l.layers} layers × ${l.headDim} dims per token` : `${l.layers} layers × ${l.kvHeads} kv heads × ${l.headDim} dims`}, ${l.dtype}, ${s.header.tokenCount} tokens, payload ${formatBytes(s.header.payloadBytes)}`,
        `  codec       ${s.header.codec ?? 'none'}${s.header.codec && s.header.codec !== 'none' && s.header.storedPayloadBytes !== undefined ? `, payload stored in ${formatBytes(s.header.storedPayloadBytes)} (${(s.header.storedPayloadBytes / s.header.payloadBytes).toFixed(3)} of raw)` : ''}`,
        `  tokens      ${s.header.firstTokens.join(' ')}${s.header.tokenCount > s.header.firstTokens.length ? ' …' : ''}`,
      );
    }
  }
  io.out(lines.join('\n') + '\n');
}

export function purgeFilter(args: ParsedArgs): PurgeFilter {
  const filter: PurgeFilter = { ...filterOf(args), all: boolFlag(args, 'all') };
  const narrowed = filter.tenant !== undefined || filter.trafficClass !== undefined || filter.olderThanMs !== undefined;
  if (!narrowed && !filter.all) throw new CliError('KVT_ERR_CLI_USAGE', 'kvtier purge: say what to delete: --tenant ID, --class NAME, --older-than DURATION, or --all');
  if (narrowed && filter.all) throw new CliError('KVT_ERR_CLI_USAGE', 'kvtier purge: --all deletes everything and takes no --tenant/--class/--older-than');
  if (!boolFlag(args, 'yes')) {
    const what = filter.all ? 'every cached block' : 'the matching blocks';
    throw new CliError('KVT_ERR_CLI_NEEDS_YES', `kvtier purge deletes ${what} for good; add --yes to go ahead`);
  }
  return filter;
}

export async function purge(api: AdminApi, args: ParsedArgs, io: CliIo, filter: PurgeFilter): Promise<void> {
  const progress = progressReporter(io, 'purge');
  const report = await api.purge(filter, (p) => progress.update(`${p.removedBlocks}/${p.totalBlocks ?? '?'} blocks (${formatBytes(p.removedBytes)})`));
  progress.done();
  if (boolFlag(args, 'json')) return io.out(json(report));
  io.out(`purged ${report.removedBlocks} of ${report.matched} matching blocks (${formatBytes(report.removedBytes)}) at ${api.target}\n`);
  if (report.nodes !== undefined) {
    const confirmed = report.nodes.filter((n) => n.acknowledged);
    io.out(`${confirmed.length} ${report.nodes.length === 1 && report.nodes[0].node === 'engine' ? 'engine' : 'workers'} confirmed (every node now misses these blocks)${confirmed.length < report.nodes.length ? `; not yet: ${report.nodes.filter((n) => !n.acknowledged).map((n) => n.node).join(', ')}` : ''}\n`);
    for (const node of report.nodes) io.out(`  ${node.node}: ${node.removedBlocks} blocks (${formatBytes(node.removedBytes)}) from its index\n`);
  }
  if (report.errors.length > 0) {
    throw new CliError('KVT_ERR_CLI_SERVER', `${report.errors.length} batches failed, kept for a rerun: ${report.errors[0].message} [${report.errors[0].code}]`, 1);
  }
}
