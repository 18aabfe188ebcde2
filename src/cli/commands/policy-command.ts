/** kvtier policy show | set | reset */
import { BLOCK_CODECS, isBlockCodecName, type RetentionPolicyDoc } from '../../kvtier/index.ts';
import type { AdminApi, PolicyEdit, PolicyEditResult } from '../../admin/index.ts';
import { boolFlag, stringFlag, type CommandSpec, type ParsedArgs } from './args.ts';
import { CliError } from './cli-error.ts';
import { json, table, type CliIo } from './output.ts';
import { formatBytes, formatDuration, parseDuration, parseSize } from './units.ts';

export const POLICY_SHOW: CommandSpec = {
  name: 'policy show',
  summary: 'print the retention policy (TTL and byte quota per class, per-tenant overrides)',
  usage: 'kvtier policy show [--json] [--url URL | --data-dir DIR]',
  flags: [{ name: 'json', kind: 'boolean', help: 'print the policy document as JSON' }],
};

export const POLICY_SET: CommandSpec = {
  name: 'policy set',
  summary: 'change a class TTL / quota, a per-tenant override, or the global quota; every process applies it within seconds',
  usage: 'kvtier policy set (--class NAME [--ttl DURATION] [--quota SIZE|none] [--codec NAME [--force]] [--add] | --codec NAME [--class NAME] [--force] | --tenant ID [--class NAME] [--ttl DURATION] [--quota SIZE|none] | --global-quota SIZE|none)',
  details: [
    'examples:',
    '  kvtier policy set --class agent --ttl 72h',
    '  kvtier policy set --class chat --ttl 1w --quota 500GiB',
    '  kvtier policy set --class batch --ttl 12h --add         (a new class)',
    '  kvtier policy set --tenant acme --class chat --ttl 1d   (acme keeps chat blocks 1 day)',
    '  kvtier policy set --tenant acme --quota 10GiB',
    '  kvtier policy set --global-quota 2TiB',
    '  kvtier policy set --client-ttl-max 1h                 (a client hint such as prompt_cache_retention keeps blocks ≤ 1 h)',
    '  kvtier policy set --codec int8                        (new blocks stored int8; stored blocks keep their codec)',
    '  kvtier policy set --class agent --codec fp8 --force   (past the measured quality bound, or with no engine to measure on)',
    'durations: 90s, 90m, 72h, 3d, 1w · sizes: 10MB, 500GiB (MB = 10^6, MiB = 2^20) · "none" removes a quota',
  ].join('\n'),
  flags: [
    { name: 'class', kind: 'string', value: 'NAME', help: 'traffic class to change (agent, chat, …)' },
    { name: 'tenant', kind: 'string', value: 'ID', help: 'set a per-tenant override instead of the class default' },
    { name: 'ttl', kind: 'string', value: 'DURATION', help: 'time a block lives after its last use: 90m, 72h, 3d, 1w' },
    { name: 'quota', kind: 'string', value: 'SIZE', help: 'byte quota of the class or tenant (500GiB, 10MB; none removes it)' },
    { name: 'global-quota', kind: 'string', value: 'SIZE', help: 'byte quota over all blocks (none removes it)' },
    { name: 'client-ttl-max', kind: 'string', value: 'DURATION', help: 'longest TTL a client retention hint may set (none: up to the class TTL)' },
    { name: 'codec', kind: 'string', value: 'NAME', help: `how new blocks are stored (${BLOCK_CODECS.join(', ')}): of --class NAME, else of every class without its own` },
    { name: 'force', kind: 'boolean', help: 'with --codec: set it even when its measured deviation on the served model is beyond the bound, or unmeasured' },
    { name: 'add', kind: 'boolean', help: 'create --class NAME (needs --ttl)' },
    { name: 'json', kind: 'boolean', help: 'print the resulting policy as JSON' },
  ],
};

export const POLICY_RESET: CommandSpec = {
  name: 'policy reset',
  summary: 'reset the policy to the defaults (agent 3d, chat 7d, no quotas), or drop one tenant override',
  usage: 'kvtier policy reset [--tenant ID] [--json]',
  flags: [
    { name: 'tenant', kind: 'string', value: 'ID', help: 'only remove this tenant\'s override' },
    { name: 'json', kind: 'boolean', help: 'print the resulting policy as JSON' },
  ],
};

function quotaOf(raw: string | undefined, flag: string): number | null | undefined {
  if (raw === undefined) return undefined;
  if (raw === 'none') return null;
  return parseSize(raw, flag);
}

/** The parsed flags as one policy edit; every value is checked before anything is sent. */
export function policySetEdit(args: ParsedArgs): PolicyEdit {
  const className = stringFlag(args, 'class');
  const tenant = stringFlag(args, 'tenant');
  const ttlRaw = stringFlag(args, 'ttl');
  const ttlMs = ttlRaw === undefined ? undefined : parseDuration(ttlRaw, '--ttl');
  const quotaBytes = quotaOf(stringFlag(args, 'quota'), '--quota');
  const globalQuota = quotaOf(stringFlag(args, 'global-quota'), '--global-quota');
  const clientTtlRaw = stringFlag(args, 'client-ttl-max');
  const codecRaw = stringFlag(args, 'codec');
  const force = boolFlag(args, 'force');
  if (force && codecRaw === undefined) throw new CliError('KVT_ERR_CLI_USAGE', 'kvtier policy set: --force goes with --codec NAME');
  if (codecRaw !== undefined) {
    if (!isBlockCodecName(codecRaw)) throw new CliError('KVT_ERR_CLI_USAGE', `kvtier policy set: --codec must be one of ${BLOCK_CODECS.join(', ')}, got "${codecRaw}"`);
    if (tenant !== undefined || globalQuota !== undefined || clientTtlRaw !== undefined) {
      throw new CliError('KVT_ERR_CLI_USAGE', 'kvtier policy set: --codec goes alone or with --class NAME (and its --ttl/--quota); not with --tenant, --global-quota or --client-ttl-max');
    }
    if (boolFlag(args, 'add')) throw new CliError('KVT_ERR_CLI_USAGE', 'kvtier policy set: add the class first (--add --ttl), then set its --codec');
    const forced = force ? { force: true } : {};
    if (className !== undefined && (ttlMs !== undefined || quotaBytes !== undefined)) return { op: 'setClass', name: className, ttlMs, quotaBytes, codec: codecRaw, ...forced };
    if (ttlMs !== undefined || quotaBytes !== undefined) throw new CliError('KVT_ERR_CLI_USAGE', 'kvtier policy set: --ttl and --quota need --class NAME or --tenant ID');
    return { op: 'setCodec', codec: codecRaw, ...(className !== undefined ? { trafficClass: className } : {}), ...forced };
  }
  if (clientTtlRaw !== undefined) {
    if (className !== undefined || tenant !== undefined || ttlMs !== undefined || quotaBytes !== undefined || globalQuota !== undefined) {
      throw new CliError('KVT_ERR_CLI_USAGE', 'kvtier policy set: --client-ttl-max goes alone');
    }
    return { op: 'setClientTtlMax', ttlMs: clientTtlRaw === 'none' ? null : parseDuration(clientTtlRaw, '--client-ttl-max') };
  }
  if (globalQuota !== undefined) {
    if (className !== undefined || tenant !== undefined || ttlMs !== undefined || quotaBytes !== undefined) {
      throw new CliError('KVT_ERR_CLI_USAGE', 'kvtier policy set: --global-quota goes alone (set classes and tenants in another call)');
    }
    return { op: 'setGlobalQuota', quotaBytes: globalQuota };
  }
  if (tenant !== undefined) {
    if (boolFlag(args, 'add')) throw new CliError('KVT_ERR_CLI_USAGE', 'kvtier policy set: --add creates a class; it does not go with --tenant');
    if (ttlMs === undefined && quotaBytes === undefined) throw new CliError('KVT_ERR_CLI_USAGE', 'kvtier policy set --tenant: give --ttl DURATION and/or --quota SIZE');
    return { op: 'setTenant', tenant, trafficClass: className, ttlMs, quotaBytes };
  }
  if (className === undefined) throw new CliError('KVT_ERR_CLI_USAGE', 'kvtier policy set: give --class NAME, --tenant ID or --global-quota SIZE (see kvtier policy set --help)');
  if (ttlMs === undefined && quotaBytes === undefined) throw new CliError('KVT_ERR_CLI_USAGE', `kvtier policy set --class ${className}: give --ttl DURATION and/or --quota SIZE`);
  return { op: 'setClass', name: className, ttlMs, quotaBytes, create: boolFlag(args, 'add') };
}

export function formatPolicy(doc: RetentionPolicyDoc, target: string): string {
  const when = doc.updatedAt > 0 ? new Date(doc.updatedAt).toISOString().replace('.000', '') : 'never changed';
  let text = `retention policy v${doc.version} (${when}) at ${target}\n\n`;
  text += table(
    ['class', 'ttl', 'quota', ''],
    Object.entries(doc.classes).map(([name, spec]) => [name, formatDuration(spec.ttlMs), spec.quotaBytes === undefined ? '–' : formatBytes(spec.quotaBytes), name === doc.defaultClass ? '(default)' : '']),
  );
  text += `\nglobal quota: ${doc.quotaBytes === undefined ? 'none' : formatBytes(doc.quotaBytes)}\n`;
  const classCodecs = Object.entries(doc.classes).filter(([, spec]) => spec.codec !== undefined).map(([name, spec]) => `${name}=${spec.codec}`);
  text += `block codec: ${doc.codec ?? 'none'}${classCodecs.length ? ` (classes: ${classCodecs.join(' ')})` : ''}\n`;
  text += `client TTL hints: ${doc.clientTtlMaxMs === undefined ? 'up to the class TTL' : `at most ${formatDuration(doc.clientTtlMaxMs)}`}\n`;
  const tenants = Object.entries(doc.tenants);
  if (tenants.length === 0) return text + 'tenant overrides: none\n';
  text += '\ntenant overrides:\n';
  text += table(
    ['tenant', 'ttl', 'quota'],
    tenants.map(([tenant, override]) => [
      tenant,
      Object.entries(override.ttlMs ?? {})
        .map(([name, ttl]) => `${name}=${formatDuration(ttl)}`)
        .join(' ') || '–',
      override.quotaBytes === undefined ? '–' : formatBytes(override.quotaBytes),
    ]),
  ).replace(/^/gm, '  ');
  return text;
}

function describeEdit(edit: PolicyEdit, result: PolicyEditResult): string {
  const doc = result.policy;
  const applied = result.applied ? 'applied' : 'saved; the cache tier has not read it yet';
  const quota = (q: number | null | undefined) => (q === undefined ? '' : q === null ? ', no quota' : `, quota ${formatBytes(q)}`);
  switch (edit.op) {
    case 'setClass': {
      const spec = doc.classes[edit.name];
      return `class ${edit.name}: ttl ${formatDuration(spec.ttlMs)}${spec.quotaBytes === undefined ? '' : `, quota ${formatBytes(spec.quotaBytes)}`}${spec.codec === undefined ? '' : `, codec ${spec.codec}`} (policy v${doc.version}, ${applied})\n`;
    }
    case 'setCodec':
      return `${edit.trafficClass === undefined ? 'new blocks' : `new ${edit.trafficClass} blocks`}: codec ${edit.codec}${edit.force ? ' (forced)' : ''}; stored blocks keep theirs (policy v${doc.version}, ${applied})\n`;
    case 'setTenant': {
      const override = doc.tenants[edit.tenant];
      const ttls = Object.entries(override.ttlMs ?? {}).map(([name, ttl]) => `${name}=${formatDuration(ttl)}`).join(' ');
      return `tenant ${edit.tenant}: ${ttls || 'class TTLs'}${quota(override.quotaBytes)} (policy v${doc.version}, ${applied})\n`;
    }
    case 'reset':
      return `${edit.tenant === undefined ? 'policy reset to the defaults' : `tenant ${edit.tenant}: override removed`} (policy v${doc.version}, ${applied})\n`;
    case 'setClientTtlMax':
      return `client TTL hints: ${edit.ttlMs === null ? 'up to the class TTL' : `at most ${formatDuration(edit.ttlMs)}`} (policy v${doc.version}, ${applied})\n`;
    case 'setGlobalQuota':
      return `global quota: ${edit.quotaBytes === null ? 'none' : formatBytes(edit.quotaBytes)} (policy v${doc.version}, ${applied})\n`;
  }
}

export async function policyShow(api: AdminApi, args: ParsedArgs, io: CliIo): Promise<void> {
  const doc = await api.getPolicy();
  io.out(boolFlag(args, 'json') ? json(doc) : formatPolicy(doc, api.target));
}

export async function policySet(api: AdminApi, args: ParsedArgs, io: CliIo, edit: PolicyEdit): Promise<void> {
  const result = await api.editPolicy(edit);
  io.out(boolFlag(args, 'json') ? json(result) : describeEdit(edit, result));
}

export function policyResetEdit(args: ParsedArgs): PolicyEdit {
  return { op: 'reset', tenant: stringFlag(args, 'tenant') };
}
