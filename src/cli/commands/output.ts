/** Plain-text tables and progress lines for the admin commands. */
import { formatBytes } from './units.ts';

export interface CliIo {
  out(text: string): void;
  err(text: string): void;
  env: NodeJS.ProcessEnv;
  /** stderr is a terminal: progress redraws one line. */
  interactive: boolean;
}

export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]))).join('  ').trimEnd();
  return [line(header), ...rows.map(line)].join('\n') + '\n';
}

export function json(value: unknown): string {
  return JSON.stringify(value, null, 2) + '\n';
}

/** Progress on stderr: redrawn in place on a terminal, else one line at most every 250 ms (and the last). */
export function progressReporter(io: CliIo, label: string): { update(text: string): void; done(): void } {
  let lastAt = 0;
  let pending: string | null = null;
  let drawn = false;
  return {
    update(text) {
      const now = Date.now();
      if (now - lastAt < 250) {
        pending = text;
        return;
      }
      lastAt = now;
      pending = null;
      if (io.interactive) {
        io.err(`\r\x1b[2K${label}: ${text}`);
        drawn = true;
      } else io.err(`${label}: ${text}\n`);
    },
    done() {
      if (pending !== null) {
        if (io.interactive) io.err(`\r\x1b[2K${label}: ${pending}`);
        else io.err(`${label}: ${pending}\n`);
        drawn = io.interactive;
      }
      if (drawn) io.err('\n');
    },
  };
}

export function ago(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

export function bytesOrDash(bytes: number | undefined): string {
  return bytes === undefined ? '–' : formatBytes(bytes);
}
