#!/usr/bin/env node
// The `kvtier` command. It runs the JavaScript build of the TypeScript CLI
// (src/compiled-js.mjs: made on the first start after a change, keyed by the
// sources, so it is never stale), or the .ts through tsx's loader when there
// is no build. Either way in this process, not a wrapper, so signals
// (SIGTERM, SIGKILL) reach the process that does the work.
import { compiledModule } from '../src/compiled-js.mjs';

const cli = new URL('../src/cli/main.ts', import.meta.url);
const built = compiledModule(cli);
if (built) {
  await import(built.href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import(cli.href);
}
