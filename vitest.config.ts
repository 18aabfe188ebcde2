import { defineConfig } from 'vitest/config';

// Two cores here and in CI: keep two forks so native kernels and spawned
// services (redis-server, radosgw, chromium) do not starve each other.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    reporters: ['default'],
  },
});
