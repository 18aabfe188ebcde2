#!/usr/bin/env node
// The `kvtier` command: runs the TypeScript CLI through tsx so no build step is needed.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const require = createRequire(import.meta.url);
const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const tsxCli = require.resolve('tsx/cli');
const result = spawnSync(process.execPath, [tsxCli, path.join(root, 'src/cli/main.ts'), ...process.argv.slice(2)], {
  stdio: 'inherit',
});
process.exit(result.status ?? 1);
