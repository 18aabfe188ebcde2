/** Runs `node bin/kvtier.js …` as a child process, the way an operator does. */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function kvtier(args: string[], env: Record<string, string | undefined> = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['bin/kvtier.js', ...args], {
      cwd: ROOT,
      env: { ...process.env, KVTIER_ADMIN_TOKEN: undefined, KVTIER_DATA_DIR: undefined, REDIS_URL: undefined, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A mistake: exactly one line on stderr, starting with "kvtier", and a non-zero exit. */
export function expectOneLineError(result: CliResult, pattern: RegExp, exitCode?: number): void {
  const lines = result.stderr.trimEnd().split('\n');
  if (lines.length !== 1 || !lines[0].startsWith('kvtier') || !pattern.test(lines[0]) || result.code === 0 || (exitCode !== undefined && result.code !== exitCode)) {
    throw new Error(`expected one error line matching ${pattern} and exit ${exitCode ?? '≠0'}, got exit ${result.code}, stderr:\n${result.stderr}\nstdout:\n${result.stdout}`);
  }
}
