/**
 * docker-compose.yml as Compose reads it, without a Docker engine (test/deploy/compose*.test.ts):
 * parsed with the `yaml` package (merge keys on, as Compose does) and `${VAR:-default}`
 * interpolated the way Compose does it with the given environment.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

import { parse } from 'yaml';

export const ROOT = new URL('../../', import.meta.url).pathname;

export interface Service {
  image?: string;
  build?: unknown;
  command?: string[] | string;
  entrypoint?: string[] | string;
  environment?: Record<string, string | number | boolean | null>;
  volumes?: string[];
  ports?: string[];
  healthcheck?: { test: string[]; interval?: string; retries?: number };
  depends_on?: Record<string, { condition: string }>;
  deploy?: { replicas?: number | string };
  restart?: string;
  profiles?: string[];
}

/** Compose interpolation with no variables set: `${X:-d}` / `${X-d}` → d, `${X}` → '', `$$` → `$`. */
function interpolate(value: unknown, env: Record<string, string>): unknown {
  if (typeof value === 'string') {
    return value.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}/g, (whole, name: string | undefined, op: string | undefined, fallback: string | undefined) => {
      if (whole === '$$') return '$';
      const set = env[name!];
      if (op === ':-') return set ? set : (fallback ?? '');
      if (op === '-') return set !== undefined ? set : (fallback ?? '');
      return set ?? '';
    });
  }
  if (Array.isArray(value)) return value.map((v) => interpolate(v, env));
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, interpolate(v, env)]));
  return value;
}

export function loadCompose(env: Record<string, string> = {}): { services: Record<string, Service>; volumes: Record<string, unknown> } {
  const raw = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as Record<string, unknown>;
  return interpolate(raw, env) as { services: Record<string, Service>; volumes: Record<string, unknown> };
}

export function envOf(service: Service): Record<string, string> {
  return Object.fromEntries(Object.entries(service.environment ?? {}).map(([k, v]) => [k, v === null ? '' : String(v)]));
}

/** Every env name src/ reads: config.ts's FIELDS table plus direct `process.env.X` reads elsewhere. */
export function envNamesReadBySrc(): Set<string> {
  const names = new Set<string>();
  const config = readFileSync(join(ROOT, 'src/config.ts'), 'utf8');
  for (const match of config.matchAll(/\benv: '([A-Z0-9_]+)'/g)) names.add(match[1]);
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir)) {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) walk(path);
      else if (path.endsWith('.ts')) for (const m of readFileSync(path, 'utf8').matchAll(/process\.env\.([A-Z0-9_]+)/g)) names.add(m[1]);
    }
  };
  walk(join(ROOT, 'src'));
  return names;
}
