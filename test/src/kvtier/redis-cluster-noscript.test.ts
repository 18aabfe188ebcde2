/**
 * Why a failover run can count a failed script call with no key of another slot anywhere
 * (failover-api: `crossslot_errors` 1 in one run of 19, bench/RESULTS.md).
 *
 * ioredis sends a defined script (the plane's, the stats') as EVAL the first time on a socket and
 * marks the socket as holding it when it writes the command, not when the server ran it. A command
 * the server rejects before running it (CLUSTERDOWN while a primary is down, TRYAGAIN) is retried on
 * the same socket, now as EVALSHA: the server never loaded the script, answers NOSCRIPT (counted in
 * `cmdstat_evalsha` failed_calls and `errorstat_NOSCRIPT`), and ioredis falls back to EVAL, which
 * runs. The caller sees one successful call. The cluster fixture's crossSlotErrors() counted it as a
 * failed script call; it now leaves NOSCRIPT out (a script that touches another slot's key fails
 * with ERR, not NOSCRIPT).
 *
 * Made deterministic here: a cluster without replicas, one primary killed (every node answers
 * CLUSTERDOWN), the script sent to another primary, then the killed one restarted.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';

import { createRedisClient, type RedisClient } from '../../../src/kvtier/index.ts';
import { keySlot, startRedisCluster, type RedisClusterFixture } from '../../helpers/redis-cluster.ts';

let cluster: RedisClusterFixture;
let client: RedisClient;

beforeAll(async () => {
  cluster = await startRedisCluster({ primaries: 3, replicas: 0 });
  client = createRedisClient(cluster.address, { maxRetriesPerRequest: 2 });
}, 120_000);

afterAll(async () => {
  client?.disconnect();
  await cluster?.stop();
});

const stat = (port: number, section: string, pattern: RegExp): number => Number(pattern.exec(cluster.cli(port, 'INFO', section))?.[1] ?? 0);

it('an EVAL rejected with CLUSTERDOWN is retried as EVALSHA and answered NOSCRIPT: a failed script call, no CROSSSLOT', async () => {
  const [target, victim] = cluster.topology().map((shard) => shard.primary);
  let key = 'noscript-probe';
  for (let i = 0; cluster.primaryOfSlot(keySlot(key)) !== target; i++) key = `noscript-probe-${i}`;
  client.defineCommand('kvtProbeSet', { numberOfKeys: 1, lua: "return redis.call('SET', KEYS[1], ARGV[1])" });
  const probe = client as unknown as { kvtProbeSet(key: string, value: string): Promise<string> };
  await client.get(key); // the socket to the target is open and the client ready
  const before = cluster.crossSlotErrors();

  await cluster.kill(victim);
  await vitestUntil(() => cluster.cli(target, 'CLUSTER', 'INFO').includes('cluster_state:fail'));
  const call = probe.kvtProbeSet(key, 'v');
  await vitestUntil(() => stat(target, 'errorstats', /errorstat_CLUSTERDOWN:count=(\d+)/) > 0);
  await cluster.restart(victim);

  expect(await call).toBe('OK');
  expect(await client.get(key)).toBe('v');
  expect(stat(target, 'errorstats', /errorstat_NOSCRIPT:count=(\d+)/)).toBeGreaterThan(0);
  expect(stat(target, 'commandstats', /cmdstat_evalsha:.*failed_calls=(\d+)/)).toBeGreaterThan(0);
  expect(cluster.errorCount('CROSSSLOT')).toBe(0);
  expect(cluster.crossSlotErrors() - before).toBe(0);
}, 120_000);

async function vitestUntil(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 20));
}
