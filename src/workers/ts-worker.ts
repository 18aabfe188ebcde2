import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';

/**
 * Worker threads do not inherit tsx's loader: the thread starts from a tiny
 * eval'd bootstrap that registers tsx's ESM hooks, then imports the .ts entry.
 */
export function tsWorker(entry: URL, workerData: unknown): Worker {
  const require = createRequire(import.meta.url);
  const tsxApi = pathToFileURL(join(dirname(require.resolve('tsx/package.json')), 'dist/esm/api/index.mjs')).href;
  const code = `import(${JSON.stringify(tsxApi)}).then((m) => { m.register(); return import(${JSON.stringify(entry.href)}); })
    .catch((error) => { require('node:worker_threads').parentPort.postMessage({ type: 'fatal', error: { code: 'KVT_ERR_INTERNAL', message: String(error && error.stack || error) } }); });`;
  return new Worker(code, { eval: true, workerData });
}
