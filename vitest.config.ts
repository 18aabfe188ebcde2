import { defineConfig } from 'vitest/config';

import { SLOW } from './test/suites.ts';

// Two cores here and in CI: keep two forks so native kernels and spawned
// services (redis-server, radosgw, chromium) do not starve each other.
// Two projects split the files (test/suites.ts): `npm test` runs 'fast',
// `npm run test:all` runs both.
export default defineConfig({
  test: {
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    reporters: ['default'],
    projects: [
      { extends: true, test: { name: 'fast', include: ['test/**/*.test.ts'], exclude: SLOW } },
      { extends: true, test: { name: 'slow', include: SLOW } },
    ],
  },
});
