/**
 * The Redis Cluster fixture itself: a node that cannot bind its port at start (another process took
 * it, or its bus port, after the fixture checked it was free) moves to a fresh port instead of
 * leaving the start to time out waiting for a PING that never comes (CI, stop 38).
 */
import { createServer, type Server } from 'node:net';

import { afterAll, describe, expect, it } from 'vitest';

import { startRedisCluster, type RedisClusterFixture } from './redis-cluster.ts';
import { startRedis, type RedisServer } from './redis-server.ts';

describe('startRedisCluster', () => {
  const held: Server[] = [];
  let cluster: RedisClusterFixture | undefined;
  let second: RedisClusterFixture | undefined;
  let foreign: RedisServer | undefined;
  afterAll(async () => {
    await cluster?.stop();
    await second?.stop();
    await foreign?.stop();
    await Promise.all(held.map((server) => new Promise((resolve) => server.close(resolve))));
  });

  it('moves a node whose cluster bus port is taken, and the cluster still forms', async () => {
    // A port below the ephemeral range whose bus port (+10000) another listener holds.
    let taken = 0;
    for (;;) {
      const candidate = 10_000 + Math.floor(Math.random() * 12_000);
      const server = createServer();
      const bound = await new Promise<boolean>((resolve) => {
        server.once('error', () => resolve(false));
        server.listen(candidate + 10_000, '127.0.0.1', () => resolve(true));
      });
      if (bound) {
        held.push(server);
        taken = candidate;
        break;
      }
    }
    cluster = await startRedisCluster({ primaries: 3, replicas: 0, ports: [taken], startTimeoutMs: 20_000 });
    expect(cluster.ports).toHaveLength(3);
    expect(cluster.ports).not.toContain(taken);
    expect(cluster.cli(cluster.ports[0], 'CLUSTER', 'INFO')).toMatch(/cluster_state:ok/);
  });

  it('does not take another redis-server on one of its ports for its node (it answers PING too)', async () => {
    foreign = await startRedis();
    second = await startRedisCluster({ primaries: 3, replicas: 0, ports: [foreign.port], startTimeoutMs: 20_000 });
    expect(second.ports).not.toContain(foreign.port);
    expect(second.cli(second.ports[0], 'CLUSTER', 'INFO')).toMatch(/cluster_state:ok/);
  });
});
