/**
 * A real kvtier API server on a free loopback port for tests: the embedded
 * default (engine thread, fs storage, LMDB index) on synthetic:tiny, or the
 * BullMQ runner when `redisUrl` is given.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { loadConfig, type Config } from '../../../src/config.ts';
import { fixtureDir } from '../../helpers/fixture-dirs.ts';
import { buildApp, type BuildAppOptions, type BuiltApp } from '../../../src/serve/index.ts';

export interface TestServer {
  url: string;
  built: BuiltApp;
  config: Config;
  dataDir: string;
  close(): Promise<void>;
}

export const KEYS = { alice: 'sk-alice', bob: 'sk-bob', sharedOne: 'sk-shared-1', sharedTwo: 'sk-shared-2' } as const;
export const ADMIN_TOKEN = 'admin-secret';

export interface TestServerOptions extends Pick<BuildAppOptions, 'now'> {
  /** KVTIER_STATS_STEP_MS while the server starts (the admin stats read their step from the environment then). */
  statsStepMs?: number;
}

export async function startTestServer(overrides: Partial<Config> = {}, options: TestServerOptions = {}): Promise<TestServer> {
  const { statsStepMs, ...appOptions } = options;
  if (statsStepMs === undefined) return await start(overrides, appOptions);
  process.env.KVTIER_STATS_STEP_MS = String(statsStepMs);
  try {
    return await start(overrides, appOptions);
  } finally {
    delete process.env.KVTIER_STATS_STEP_MS;
  }
}

async function start(overrides: Partial<Config>, options: Pick<BuildAppOptions, 'now'>): Promise<TestServer> {
  const dataDir = overrides.dataDir ?? fixtureDir('kvtier-serve-');
  const keysFile = join(dataDir, 'keys.txt');
  writeFileSync(keysFile, `# test keys\n${KEYS.alice} alice\n${KEYS.bob} bob\n${KEYS.sharedOne} team-one shared\n${KEYS.sharedTwo} team-two shared\n`);
  const config = loadConfig({}, [], {
    host: '127.0.0.1',
    port: 0,
    dataDir,
    model: 'synthetic:tiny',
    apiKeysFile: keysFile,
    adminToken: ADMIN_TOKEN,
    threads: 1,
    // The tiny test model prefills a block faster than a loaded machine reads one, so the default
    // fetch-or-recompute would (rightly) recompute hits; these tests claim loads. prefill-scheduler.test covers auto.
    fetchPolicy: 'load',
    logLevel: 'silent',
    storage: `fs:${join(dataDir, 'blocks')}`,
    ...overrides,
  });
  const built = await buildApp(config, { logger: false, ...options });
  const address = await built.app.listen({ host: '127.0.0.1', port: 0 });
  return { url: address, built, config, dataDir, close: () => built.close() };
}
