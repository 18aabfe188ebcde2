import os from 'node:os';
import path from 'node:path';

import { defineConfig } from 'vitest/config';

import { SLOW } from './test/suites.ts';

// Two cores here and in CI, three forks: a third of the suite's wall time is
// spent waiting on spawned services (redis-server, radosgw, chromium, worker
// processes), so a third fork fills the idle cores (full suite 686 s → 546 s,
// CPU 145 % → 158 %; bench/RESULTS.md, suite time) without starving them.
// isolate: false — each fork keeps its module cache from one test file to the
// next, so the heavy imports (fastify, bullmq, the AWS SDK, node-llama-cpp,
// src/) load once per fork instead of once per file (bench/RESULTS.md, suite
// time: the fast set in 0.81 of the time). Test files therefore restore what
// they change in process-wide state (process.env, timers).
// KVTIER_SYNTHETIC_CACHE: every test server has its own dataDir; synthetic
// models are generated once into this cache (keyed by the generator sources)
// and copied into each (inference-core/engine/synthetic-model-cache.ts).
// Two projects split the files (test/suites.ts): `npm test` runs 'fast',
// `npm run test:all` runs both.
export default defineConfig({
  test: {
    pool: 'forks',
    maxWorkers: 3,
    isolate: false,
    testTimeout: 60_000,
    // A test file that leaves an ioredis client open fails (with isolate: false it would reconnect
    // for the rest of its fork): test/helpers/open-redis-clients.ts.
    // The fixtures' data dirs go with their test file: test/helpers/fixture-dirs.ts.
    setupFiles: ['test/helpers/open-redis-clients.ts', 'test/helpers/fixture-dirs-setup.ts'],
    hookTimeout: 120_000,
    env: {
      KVTIER_SYNTHETIC_CACHE: process.env.KVTIER_SYNTHETIC_CACHE ?? path.join(os.tmpdir(), 'kvtier-test-synthetic'),
    },
    reporters: ['default'],
    projects: [
      { extends: true, test: { name: 'fast', include: ['test/**/*.test.ts'], exclude: SLOW } },
      { extends: true, test: { name: 'slow', include: SLOW } },
    ],
  },
});
