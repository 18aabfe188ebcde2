/** kvtier gc [--dry-run] */
import type { AdminApi } from '../../admin/index.ts';
import { boolFlag, type CommandSpec, type ParsedArgs } from './args.ts';
import { CliError } from './cli-error.ts';
import { json, progressReporter, type CliIo } from './output.ts';
import { formatBytes } from './units.ts';

export const GC: CommandSpec = {
  name: 'gc',
  summary: 'expire blocks past their TTL and evict least recently used blocks over a quota, under the current policy',
  usage: 'kvtier gc [--dry-run] [--json]',
  flags: [
    { name: 'dry-run', kind: 'boolean', help: 'report what would be removed; change nothing' },
    { name: 'json', kind: 'boolean', help: 'print the GC report as JSON' },
  ],
};

export async function gc(api: AdminApi, args: ParsedArgs, io: CliIo): Promise<void> {
  const dryRun = boolFlag(args, 'dry-run');
  const progress = progressReporter(io, dryRun ? 'gc (dry run)' : 'gc');
  const report = await api.gc({ dryRun }, (p) =>
    progress.update(`${p.phase} · scanned ${p.scannedBlocks} · ${dryRun ? 'removable' : 'removed'} ${p.removedBlocks} blocks (${formatBytes(p.removedBytes)})${p.elapsedMs === undefined ? '' : ` · ${(p.elapsedMs / 1000).toFixed(1)} s`}`),
  );
  progress.done();
  if (boolFlag(args, 'json')) return io.out(json(report));
  const verb = report.dryRun ? 'would remove' : 'removed';
  io.out(
    `gc ${verb}: expired ${report.removed.expired.blocks} blocks (${formatBytes(report.removed.expired.bytes)}), ` +
      `evicted ${report.removed.evicted.blocks} blocks (${formatBytes(report.removed.evicted.bytes)}); ` +
      `${report.remaining.blocks} blocks (${formatBytes(report.remaining.bytes)}) remain · policy v${report.policyVersion}` +
      `${report.rebasedEntries > 0 ? ` · ${report.rebasedEntries} expiries recomputed` : ''}${report.aborted ? ' · ABORTED' : ''}\n`,
  );
  if (report.errors.length > 0) throw new CliError('KVT_ERR_CLI_SERVER', `gc hit ${report.errors.length} errors (kept for the next run): ${report.errors[0].message} [${report.errors[0].code}]`, 1);
}
