/**
 * How config.ts reads values: CLI flags, and one parser per kind of value.
 * Each failure is a KVT_ERR_CONFIG_INVALID naming the variable or flag.
 */
import { describeError, KvtError } from './errors.ts';
import { clusterAddress, type SealKeyringSpec } from './kvtier/index.ts';

/** `KVTIER_DATA_DIR` → [`data-dir`, `kvtier-data-dir`]; `PORT` → [`port`]. */
export function flagNames(envName: string): string[] {
  const kebab = envName.toLowerCase().replace(/_/g, '-');
  return kebab.startsWith('kvtier-') ? [kebab.slice('kvtier-'.length), kebab] : [kebab];
}

export function parseFlags(argv: readonly string[]): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith('--')) throw new KvtError('KVT_ERR_CONFIG_INVALID', `unexpected argument "${arg}"; flags look like --port 8080`, { param: arg });
    const eq = arg.indexOf('=');
    if (eq !== -1) {
      out.push([arg.slice(2, eq), arg.slice(eq + 1)]);
      continue;
    }
    const value = argv[i + 1];
    if (value === undefined || value.startsWith('--')) throw new KvtError('KVT_ERR_CONFIG_INVALID', `flag ${arg} needs a value`, { param: arg.slice(2) });
    out.push([arg.slice(2), value]);
    i++;
  }
  return out;
}

export function intIn(raw: string, source: string, min: number, max: number): number {
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new KvtError('KVT_ERR_CONFIG_INVALID', `${source}=${raw} is not an integer in [${min}, ${max}]`, { param: source });
  }
  return value;
}

export function oneOf(raw: string, source: string, allowed: string[]): string {
  if (!allowed.includes(raw)) throw new KvtError('KVT_ERR_CONFIG_INVALID', `${source}=${raw}: use one of ${allowed.join(', ')}`, { param: source });
  return raw;
}

/** The seal keyring's own errors (too short a secret, unknown current id, bad JSON, unreadable file), named after the variable. */
export function keyring(parse: () => SealKeyringSpec, source: string): SealKeyringSpec {
  try {
    return parse();
  } catch (error) {
    throw new KvtError('KVT_ERR_CONFIG_INVALID', `${source}: ${describeError(error).message}`, { param: source });
  }
}

export function powerOfTwo(raw: string, source: string, max: number): number {
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1 || value > max || (value & (value - 1)) !== 0) {
    throw new KvtError('KVT_ERR_CONFIG_INVALID', `${source}=${raw}: use a power of two 1..${max}`, { param: source });
  }
  return value;
}

/** `host:port,host:port…` → the cluster address every component takes (`redis-cluster://…`, src/kvtier/redis-connection.ts). */
export function redisCluster(raw: string, source: string): string {
  try {
    return clusterAddress(raw);
  } catch (error) {
    throw new KvtError('KVT_ERR_CONFIG_INVALID', `${source}=${raw}: ${describeError(error).message}; use host:port,host:port,… (any nodes of the Redis Cluster)`, { param: source });
  }
}

export function redisUrl(raw: string, source: string): string {
  try {
    const url = new URL(raw);
    if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') throw new Error('scheme');
  } catch {
    throw new KvtError('KVT_ERR_CONFIG_INVALID', `${source}=${raw} is not a redis URL; use redis://host:6379[/db]`, { param: source });
  }
  return raw;
}
