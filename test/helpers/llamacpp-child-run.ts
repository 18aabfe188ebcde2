/**
 * Runs one of the llama.cpp helper scripts (llamacpp-child.mjs's frame) on
 * several requests in one process: llama.cpp's start (~3 s of CPU) is paid
 * once, each request's model loaded and freed in turn. Answers in request order.
 */
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const HELPERS = path.dirname(fileURLToPath(import.meta.url));

export function runLlamaChild<T>(script: string, requests: readonly object[], timeoutPerRequestMs: number): T[] {
  const r = spawnSync(process.execPath, [path.join(HELPERS, script)], {
    input: JSON.stringify({ many: requests }),
    encoding: 'utf8',
    maxBuffer: 1 << 30,
    timeout: timeoutPerRequestMs * requests.length,
  });
  let res: { error?: string; many?: T[] };
  try {
    res = JSON.parse(r.stdout);
  } catch {
    throw new Error(`llama.cpp helper ${script} failed (status ${r.status}): ${r.stderr || r.stdout}`);
  }
  if (res.error) throw new Error(`llama.cpp: ${res.error}`);
  return res.many!;
}
