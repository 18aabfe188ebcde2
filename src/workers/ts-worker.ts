import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';

import { compiledModule } from '../compiled-js.mjs';

/**
 * A worker thread running a .ts entry of this checkout. Threads do not inherit
 * a loader: the entry's JavaScript build runs on plain node when there is one
 * (src/compiled-js.mjs; an engine thread starts on a third of tsx's CPU);
 * otherwise a tiny eval'd bootstrap registers tsx's ESM hooks in the thread,
 * then imports the .ts entry.
 */
export function tsWorker(entry: URL, workerData: unknown): Worker {
  const built = entry.pathname.endsWith('.js') ? entry : compiledModule(entry);
  if (built) return new Worker(built, { workerData });
  const require = createRequire(import.meta.url);
  const tsxApi = pathToFileURL(join(dirname(require.resolve('tsx/package.json')), 'dist/esm/api/index.mjs')).href;
  const code = `import(${JSON.stringify(tsxApi)}).then((m) => { m.register(); return import(${JSON.stringify(entry.href)}); })
    .catch((error) => { require('node:worker_threads').parentPort.postMessage({ type: 'fatal', error: { code: 'KVT_ERR_INTERNAL', message: String(error && error.stack || error) } }); });`;
  return new Worker(code, { eval: true, workerData });
}
