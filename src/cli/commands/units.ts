/**
 * Durations and byte sizes as an operator types them.
 *
 *   durations: 90s, 90m, 72h, 3d, 1w (one integer or decimal number + one unit)
 *   sizes:     500GiB, 10MB, 4096, 1.5TiB (SI units are powers of 1000, IEC of 1024)
 *
 * A bad value is a CliError that names the flag and shows what is accepted.
 */
import { CliError } from './cli-error.ts';

const DURATION_UNITS: Record<string, number> = {
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 7 * 86_400_000,
};

const SIZE_UNITS: Record<string, number> = {
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  pb: 1e15,
  kib: 2 ** 10,
  mib: 2 ** 20,
  gib: 2 ** 30,
  tib: 2 ** 40,
  pib: 2 ** 50,
};

const NUMBER_THEN_UNIT = /^(\d+(?:\.\d+)?)\s*([a-zA-Z]*)$/;

/** `72h` → 259200000 ms. */
export function parseDuration(raw: string, flag: string): number {
  const text = raw.trim();
  const match = NUMBER_THEN_UNIT.exec(text);
  const unit = match?.[2].toLowerCase() ?? '';
  if (text.startsWith('-')) throw new CliError('KVT_ERR_CLI_BAD_VALUE', `${flag} ${raw}: a duration cannot be negative; use e.g. 90m, 72h, 3d, 1w`);
  if (!match || !Object.hasOwn(DURATION_UNITS, unit)) {
    throw new CliError('KVT_ERR_CLI_BAD_VALUE', `${flag} ${raw} is not a duration; use a number and one of s, m, h, d, w (e.g. 90m, 72h, 3d, 1w)`);
  }
  const ms = Math.round(Number(match[1]) * DURATION_UNITS[unit]);
  if (ms <= 0) throw new CliError('KVT_ERR_CLI_BAD_VALUE', `${flag} ${raw}: a duration must be longer than zero`);
  return ms;
}

/** `500GiB` → 536870912000 bytes; a bare number is bytes. */
export function parseSize(raw: string, flag: string): number {
  const text = raw.trim();
  if (text.startsWith('-')) throw new CliError('KVT_ERR_CLI_BAD_VALUE', `${flag} ${raw}: a size cannot be negative; use e.g. 500GiB, 10MB or 0`);
  const match = NUMBER_THEN_UNIT.exec(text);
  const unit = (match?.[2] ?? '').toLowerCase() || 'b';
  if (!match || !Object.hasOwn(SIZE_UNITS, unit)) {
    throw new CliError('KVT_ERR_CLI_BAD_VALUE', `${flag} ${raw} is not a size; use a number and one of B, KB, MB, GB, TB, KiB, MiB, GiB, TiB (e.g. 500GiB, 10MB)`);
  }
  const bytes = Math.round(Number(match[1]) * SIZE_UNITS[unit]);
  if (!Number.isSafeInteger(bytes)) throw new CliError('KVT_ERR_CLI_BAD_VALUE', `${flag} ${raw} is too large`);
  return bytes;
}

/** 259200000 → "3d"; 5400000 → "1h 30m". Exact to the second. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return String(ms);
  if (ms < 1000) return `${Math.round(ms)}ms`;
  let rest = Math.round(ms / 1000);
  const parts: string[] = [];
  for (const [unit, seconds] of [
    ['w', 604800],
    ['d', 86400],
    ['h', 3600],
    ['m', 60],
    ['s', 1],
  ] as const) {
    if (rest >= seconds) {
      parts.push(`${Math.floor(rest / seconds)}${unit}`);
      rest %= seconds;
    }
  }
  return parts.slice(0, 2).join(' ');
}

/** 536870912000 → "500 GiB". */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes)) return String(bytes);
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${value} B` : `${value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value.toFixed(2)} ${units[unit]}`;
}
