/**
 * The admin subcommands of `kvtier`: policy, stats, ls, inspect, purge, gc.
 *
 * Each talks to a running server's admin API (--url, token from --token or
 * KVTIER_ADMIN_TOKEN) or, without --url, to a data directory (--data-dir,
 * default KVTIER_DATA_DIR or ./data). Every value is checked before anything
 * is opened or sent; a mistake is one line on stderr and a non-zero exit:
 * 2 bad usage, 3 server unreachable or token refused, 1 the operation failed.
 */
import { clusterAddress } from '../../kvtier/index.ts';
import type { AdminApi } from '../../admin/index.ts';
import { HttpAdminClient } from '../admin-client.ts';
import { LocalAdmin } from '../local-admin.ts';
import { helpText, parseArgs, stringFlag, type CommandSpec, type ParsedArgs } from './args.ts';
import { inspect, INSPECT, ls, LS, lsOptions, purge, PURGE, purgeFilter } from './blocks-commands.ts';
import { CliError } from './cli-error.ts';
import { gc, GC } from './gc-command.ts';
import type { CliIo } from './output.ts';
import { POLICY_RESET, POLICY_SET, POLICY_SHOW, policyResetEdit, policySet, policySetEdit, policyShow } from './policy-command.ts';
import { STATS, stats } from './stats-command.ts';

export { CliError } from './cli-error.ts';
export { formatBytes, formatDuration, parseDuration, parseSize } from './units.ts';
export type { CliIo } from './output.ts';

export const ADMIN_COMMANDS = ['policy', 'stats', 'ls', 'inspect', 'purge', 'gc'] as const;

export const ADMIN_USAGE = `admin:  kvtier policy show [--json]
        kvtier policy set --class NAME --ttl DURATION [--quota SIZE] | --tenant ID [--class NAME] --ttl/--quota … | --global-quota SIZE
        kvtier policy reset [--tenant ID]
        kvtier stats [--what-if] [--json]
        kvtier ls [--class NAME] [--tenant ID] [--older-than DURATION] [--limit N]
        kvtier inspect KEY
        kvtier purge (--tenant ID | --class NAME | --older-than DURATION | --all) --yes
        kvtier gc [--dry-run]
        each takes --url URL [--token T] (a running server) or --data-dir DIR (default $KVTIER_DATA_DIR or ./data); --help on each`;

export function isAdminCommand(command: string | undefined): boolean {
  return (ADMIN_COMMANDS as readonly string[]).includes(command ?? '');
}

/** Runs one prepared command; `prepare` checks every flag before a connection is opened. */
interface Prepared {
  spec: CommandSpec;
  args: ParsedArgs;
  run?: (api: AdminApi) => Promise<void>;
}

function prepare(argv: readonly string[], io: CliIo): Prepared {
  const [command, ...rest] = argv;
  if (command === 'policy') {
    const [sub, ...subRest] = rest;
    const specs: Record<string, CommandSpec> = { show: POLICY_SHOW, set: POLICY_SET, reset: POLICY_RESET };
    if (sub === undefined || sub === '--help' || sub === '-h') {
      const spec: CommandSpec = { name: 'policy', summary: 'show or change the retention policy', usage: 'kvtier policy <show|set|reset> … (kvtier policy set --help)', flags: [] };
      return { spec, args: { flags: new Map([['help', true]]), positionals: [] } };
    }
    const spec = specs[sub];
    if (!spec) throw new CliError('KVT_ERR_CLI_UNKNOWN_COMMAND', `kvtier policy: unknown subcommand "${sub}"; use show, set or reset`);
    const args = parseArgs(spec, subRest);
    if (args.flags.has('help')) return { spec, args };
    if (sub === 'show') return { spec, args, run: (api) => policyShow(api, args, io) };
    const edit = sub === 'set' ? policySetEdit(args) : policyResetEdit(args);
    return { spec, args, run: (api) => policySet(api, args, io, edit) };
  }
  const specs: Record<string, CommandSpec> = { stats: STATS, ls: LS, inspect: INSPECT, purge: PURGE, gc: GC };
  const spec = specs[command];
  if (!spec) throw new CliError('KVT_ERR_CLI_UNKNOWN_COMMAND', `unknown command "${command}"; commands: serve, worker, model, ${ADMIN_COMMANDS.join(', ')} (kvtier --help)`);
  const args = parseArgs(spec, rest);
  if (args.flags.has('help')) return { spec, args };
  switch (command) {
    case 'stats':
      return { spec, args, run: (api) => stats(api, args, io) };
    case 'ls': {
      const options = lsOptions(args);
      return { spec, args, run: (api) => ls(api, args, io, options) };
    }
    case 'inspect':
      return { spec, args, run: (api) => inspect(api, args, io, args.positionals[0]) };
    case 'purge': {
      const filter = purgeFilter(args);
      return { spec, args, run: (api) => purge(api, args, io, filter) };
    }
    default:
      return { spec, args, run: (api) => gc(api, args, io) };
  }
}

async function connect(args: ParsedArgs, env: NodeJS.ProcessEnv): Promise<AdminApi> {
  const url = stringFlag(args, 'url');
  const dataDir = stringFlag(args, 'data-dir');
  if (url !== undefined) {
    if (dataDir !== undefined) throw new CliError('KVT_ERR_CLI_USAGE', 'give either --url (a running server) or --data-dir (no server), not both');
    const token = stringFlag(args, 'token') ?? env.KVTIER_ADMIN_TOKEN;
    if (!token) throw new CliError('KVT_ERR_CLI_AUTH', `no admin token for ${url}: pass --token TOKEN or set KVTIER_ADMIN_TOKEN (the server's)`);
    return new HttpAdminClient(url, token);
  }
  if (stringFlag(args, 'token') !== undefined) throw new CliError('KVT_ERR_CLI_USAGE', '--token goes with --url; a data directory needs no token');
  return LocalAdmin.open({
    dataDir: dataDir ?? env.KVTIER_DATA_DIR ?? './data',
    storage: env.KVTIER_STORAGE || undefined,
    // KVTIER_REDIS_CLUSTER (host:port,…) as the server reads it: the cluster address form.
    redisUrl: stringFlag(args, 'redis-url') ?? (env.REDIS_URL || (env.KVTIER_REDIS_CLUSTER ? clusterAddress(env.KVTIER_REDIS_CLUSTER) : null)),
  });
}

/** One line for any failure: ours, a typed error of a lower layer (code kept), or an unexpected one. */
export function errorLine(error: unknown): { line: string; exitCode: number } {
  if (error instanceof CliError) return { line: error.message.startsWith('kvtier ') ? error.message : `kvtier: ${error.message}`, exitCode: error.exitCode };
  const code = (error as { code?: unknown })?.code;
  const message = ((error as Error)?.message ?? String(error)).split('\n')[0];
  if (typeof code === 'string' && code.startsWith('KVT_ERR_')) return { line: `kvtier: ${message} [${code}]`, exitCode: 1 };
  return { line: `kvtier: unexpected failure: ${message}`, exitCode: 1 };
}

/** Writes the failure's one line to stderr; returns its exit code. */
export function reportFailure(error: unknown, io: CliIo): number {
  const { line, exitCode } = errorLine(error);
  io.err(line + '\n');
  return exitCode;
}

/** Runs `kvtier <admin command> …`; returns the exit code. */
export async function runAdminCommand(argv: readonly string[], io: CliIo): Promise<number> {
  let api: AdminApi | undefined;
  try {
    const prepared = prepare(argv, io);
    if (!prepared.run) {
      io.out(helpText(prepared.spec));
      return 0;
    }
    api = await connect(prepared.args, io.env);
    await prepared.run(api);
    return 0;
  } catch (error) {
    return reportFailure(error, io);
  } finally {
    await api?.close().catch((error: unknown) => io.err(`kvtier: closing ${api?.target} failed: ${(error as Error).message}\n`));
  }
}

export function processIo(): CliIo {
  return {
    out: (text) => void process.stdout.write(text),
    err: (text) => void process.stderr.write(text),
    env: process.env,
    interactive: process.stderr.isTTY === true,
  };
}
