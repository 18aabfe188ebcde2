/**
 * Flag parsing for the admin subcommands: every command declares its flags,
 * anything else is an error that lists the known ones. `--name value` and
 * `--name=value` both work; boolean flags take no value.
 */
import { CliError } from './cli-error.ts';

export interface FlagSpec {
  /** Without the leading dashes. */
  name: string;
  kind: 'string' | 'boolean';
  help: string;
  /** Shown in help as `--name VALUE`. */
  value?: string;
}

export interface CommandSpec {
  /** e.g. "policy set". */
  name: string;
  summary: string;
  usage: string;
  flags: FlagSpec[];
  /** Positional arguments: [min, max]. */
  positionals?: [number, number];
  positionalName?: string;
  details?: string;
}

export interface ParsedArgs {
  flags: Map<string, string | true>;
  positionals: string[];
}

/** Flags every admin command takes. */
export const CONNECTION_FLAGS: FlagSpec[] = [
  { name: 'url', kind: 'string', value: 'URL', help: "a running server's base URL (e.g. http://127.0.0.1:8080); without it the command works on --data-dir" },
  { name: 'token', kind: 'string', value: 'TOKEN', help: 'admin token for --url (default: $KVTIER_ADMIN_TOKEN)' },
  { name: 'data-dir', kind: 'string', value: 'DIR', help: 'local data directory when no --url is given (default: $KVTIER_DATA_DIR or ./data)' },
  { name: 'redis-url', kind: 'string', value: 'URL', help: 'with --data-dir: the Redis holding the shared policy and stats (default: $REDIS_URL)' },
  { name: 'help', kind: 'boolean', help: 'show this help' },
];

export function parseArgs(spec: CommandSpec, argv: readonly string[]): ParsedArgs {
  const known = [...spec.flags, ...CONNECTION_FLAGS];
  const flags = new Map<string, string | true>();
  const positionals: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '-h') {
      flags.set('help', true);
      continue;
    }
    if (!arg.startsWith('--') || arg === '--') {
      if (arg.startsWith('-') && arg !== '-' && !/^-\d/.test(arg)) {
        throw new CliError('KVT_ERR_CLI_UNKNOWN_FLAG', `kvtier ${spec.name}: unknown flag ${arg}; see kvtier ${spec.name} --help`);
      }
      positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq === -1 ? undefined : eq);
    const flag = known.find((f) => f.name === name);
    if (!flag) {
      const names = known.map((f) => `--${f.name}`).join(' ');
      throw new CliError('KVT_ERR_CLI_UNKNOWN_FLAG', `kvtier ${spec.name}: unknown flag --${name}; known: ${names}`);
    }
    if (flag.kind === 'boolean') {
      if (eq !== -1) throw new CliError('KVT_ERR_CLI_USAGE', `kvtier ${spec.name}: --${name} takes no value`);
      flags.set(name, true);
      continue;
    }
    let value: string | undefined;
    if (eq !== -1) value = arg.slice(eq + 1);
    else {
      value = argv[i + 1];
      // A value may be negative (e.g. "--quota -5"): let it through so the value check says what is wrong with it.
      if (value === undefined || (value.startsWith('--') && value.length > 2)) {
        throw new CliError('KVT_ERR_CLI_USAGE', `kvtier ${spec.name}: --${name} needs a value (--${name} ${flag.value ?? 'VALUE'})`);
      }
      i++;
    }
    if (flags.has(name)) throw new CliError('KVT_ERR_CLI_USAGE', `kvtier ${spec.name}: --${name} given twice`);
    flags.set(name, value);
  }
  if (flags.has('help')) return { flags, positionals };
  const [min, max] = spec.positionals ?? [0, 0];
  if (positionals.length < min) {
    throw new CliError('KVT_ERR_CLI_USAGE', `kvtier ${spec.name}: missing ${spec.positionalName ?? 'argument'}; usage: ${spec.usage}`);
  }
  if (positionals.length > max) {
    throw new CliError('KVT_ERR_CLI_USAGE', `kvtier ${spec.name}: unexpected argument "${positionals[max]}"; usage: ${spec.usage}`);
  }
  return { flags, positionals };
}

export function stringFlag(args: ParsedArgs, name: string): string | undefined {
  const value = args.flags.get(name);
  return typeof value === 'string' ? value : undefined;
}

export function boolFlag(args: ParsedArgs, name: string): boolean {
  return args.flags.get(name) === true;
}

export function helpText(spec: CommandSpec): string {
  const rows = [...spec.flags, ...CONNECTION_FLAGS].map((f) => [`--${f.name}${f.kind === 'string' ? ` ${f.value ?? 'VALUE'}` : ''}`, f.help]);
  const width = Math.max(...rows.map(([left]) => left.length));
  const lines = [`kvtier ${spec.name} — ${spec.summary}`, '', `usage: ${spec.usage}`, ''];
  if (spec.details) lines.push(spec.details, '');
  lines.push('flags:');
  for (const [left, right] of rows) lines.push(`  ${left.padEnd(width)}  ${right}`);
  return lines.join('\n') + '\n';
}
