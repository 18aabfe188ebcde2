/**
 * Files of the llama.cpp release node-llama-cpp 3.21.1 ships as source
 * (node_modules/node-llama-cpp/llama/gitRelease.bundle), read for reference in
 * tests (e.g. the chat templates under models/templates). The bundle is cloned
 * bare once into test-artifacts/llama-cpp-release.git; a concurrent cloner's
 * finished clone is kept.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const BUNDLE = path.join(ROOT, 'node_modules', 'node-llama-cpp', 'llama', 'gitRelease.bundle');
const CLONE = path.join(ROOT, 'test-artifacts', 'llama-cpp-release.git');

export function llamaCppReleaseFile(file: string): string {
  if (!fs.existsSync(path.join(CLONE, 'HEAD'))) {
    const tmp = `${CLONE}.${process.pid}.tmp`;
    fs.rmSync(tmp, { recursive: true, force: true });
    execFileSync('git', ['clone', '--quiet', '--bare', BUNDLE, tmp], { stdio: 'pipe' });
    try {
      fs.renameSync(tmp, CLONE);
    } catch {
      fs.rmSync(tmp, { recursive: true, force: true }); // another process finished first
    }
  }
  return execFileSync('git', ['--git-dir', CLONE, 'show', `HEAD:${file}`], { encoding: 'utf8', maxBuffer: 16 << 20 });
}
