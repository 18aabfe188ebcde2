/**
 * docker-compose.yml's `cluster` profile (6 Redis Cluster nodes, the init job that makes them one
 * cluster, an API and workers on it), checked without a Docker engine: the kvtier services'
 * environment through the real loadConfig(), and the nodes' own redis-server command lines plus the
 * init job's shell command run for real on loopback — each node on its own 127.0.1.N at the port
 * the file gives (its cluster bus dialling from that address too, as a container's does), the service names resolved to those addresses by a `getent` / `redis-cli` shim —
 * so a node flag redis-server refuses or an init job that does not make 3 primaries + 3 replicas
 * fails here, not at `up`.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { loadConfig } from '../../src/config.ts';
import { ROOT, envNamesReadBySrc, envOf, loadCompose, type Service } from './compose-file.ts';

const compose = loadCompose();
const services = compose.services;
const NODES = [1, 2, 3, 4, 5, 6].map((n) => `redis-node-${n}`);
const CLUSTER_SERVICES = [...NODES, 'redis-cluster-init', 'api-cluster', 'worker-cluster'];
const commandOf = (service: Service) => [service.command ?? []].flat();

describe('docker-compose.yml cluster profile: topology', () => {
  it('has 6 cluster nodes, the init job, an API and workers, all only under --profile cluster', () => {
    const profiled = Object.entries(services).filter(([, service]) => service.profiles?.includes('cluster'));
    expect(profiled.map(([name]) => name).sort()).toEqual([...CLUSTER_SERVICES].sort());
    for (const [name, service] of profiled) expect(service.profiles, name).toEqual(['cluster']);
    expect(services['api-cluster'].command).toEqual(['serve']);
    expect(services['worker-cluster'].command).toEqual(['worker']);
    expect(Number(services['worker-cluster'].deploy?.replicas)).toBeGreaterThanOrEqual(2);
    expect(services['api-cluster'].ports).toEqual(['8081:8080']);
  });

  it('every node: cluster mode, AOF, its own volume, a health check, its service name announced', () => {
    const declared = new Set(Object.keys(compose.volumes ?? {}));
    for (const name of NODES) {
      const service = services[name];
      const command = commandOf(service);
      expect(service.image).toMatch(/^redis:7/);
      const flag = (option: string) => command[command.indexOf(option) + 1];
      expect(flag('--cluster-enabled'), name).toBe('yes');
      expect(flag('--appendonly'), name).toBe('yes');
      expect(flag('--appendfsync'), name).toBe('everysec');
      expect(flag('--cluster-announce-hostname'), name).toBe(name);
      expect(flag('--port'), name).toBe('6379');
      const [volume, path] = service.volumes![0].split(':');
      expect(path).toBe('/data');
      expect(declared.has(volume), `${volume} declared`).toBe(true);
      expect(service.healthcheck!.test).toEqual(['CMD', 'redis-cli', 'ping']);
    }
    // One volume per node: a node's nodes.conf and AOF are its own.
    expect(new Set(NODES.map((name) => services[name].volumes![0])).size).toBe(6);
  });

  it('the init job waits for every node healthy and runs once; the API and workers wait for it', () => {
    const init = services['redis-cluster-init'];
    expect(init.restart).toBe('no');
    expect(Object.keys(init.depends_on ?? {}).sort()).toEqual([...NODES].sort());
    for (const node of NODES) expect(init.depends_on![node].condition).toBe('service_healthy');
    expect(commandOf(init).join(' ')).toMatch(/redis-cli --cluster create .* --cluster-replicas 1 --cluster-yes/);
    for (const name of ['api-cluster', 'worker-cluster']) {
      expect(services[name].depends_on?.['redis-cluster-init'].condition).toBe('service_completed_successfully');
      expect(services[name].depends_on?.['minio-init'].condition).toBe('service_completed_successfully');
      expect(services[name].healthcheck!.retries).toBeGreaterThan(0);
    }
    const prefix = /WORKER_STATS_PREFIX = '([^']+)'/.exec(readFileSync(join(ROOT, 'src/workers/bullmq-protocol.ts'), 'utf8'))?.[1];
    expect(services['worker-cluster'].healthcheck!.test.join(' ')).toContain(`'${prefix}'`);
    expect(services['worker-cluster'].healthcheck!.test.join(' ')).toContain('KVTIER_REDIS_CLUSTER');
  });
});

describe('docker-compose.yml cluster profile: environment', () => {
  const known = envNamesReadBySrc();

  it.each(['api-cluster', 'worker-cluster'])('%s: passes loadConfig on the Redis Cluster of the 6 node services, no REDIS_URL', (name) => {
    const env = envOf(services[name]);
    expect(env.REDIS_URL).toBeUndefined();
    expect(Object.keys(env).filter((k) => k.startsWith('KVTIER_') && !known.has(k))).toEqual([]);
    const config = loadConfig(env);
    expect(config.redisUrl).toBe(`redis-cluster://${NODES.map((node) => `${node}:6379`).join(',')}`);
    expect(config.planeShards).toBe(4);
  });

  it('the cluster API and workers agree with each other and share the one-Redis services’ store and model', () => {
    const api = loadConfig(envOf(services['api-cluster']));
    const worker = loadConfig(envOf(services['worker-cluster']));
    const plain = loadConfig(envOf(services.api));
    for (const key of ['model', 'storage', 'redisUrl', 'blockTokens', 'planeShards'] as const) expect(worker[key], key).toBe(api[key]);
    for (const key of ['model', 'storage', 'blockTokens'] as const) expect(api[key], key).toBe(plain[key]);
    // S is fixed per deployment but chosen at the first `up`, for both at once.
    const other = loadCompose({ KVTIER_PLANE_SHARDS: '16' }).services;
    expect(loadConfig(envOf(other['api-cluster'])).planeShards).toBe(16);
    expect(loadConfig(envOf(other['worker-cluster'])).planeShards).toBe(16);
  });
});

describe('docker-compose.yml cluster profile: the nodes and the init job, run', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvtier-compose-cluster-'));
  const children: ChildProcess[] = [];
  const addressOf = (node: string) => `127.0.1.${node.slice('redis-node-'.length)}`;
  afterAll(() => {
    for (const child of children) child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  /** Runs the init job's command as its container would, the service names resolving to the nodes' loopback addresses. */
  const runInit = () => {
    const shims = join(dir, 'bin');
    mkdirSync(shims, { recursive: true });
    writeFileSync(join(shims, 'getent'), '#!/bin/sh\n[ "$1" = hosts ] || exit 2\ncase "$2" in redis-node-*) echo "127.0.1.${2#redis-node-} $2";; *) exit 2;; esac\n');
    writeFileSync(join(shims, 'redis-cli'), `#!/bin/bash\nargs=()\nfor a in "$@"; do case "$a" in redis-node-*) a="127.0.1.\${a#redis-node-}";; esac; args+=("$a"); done\nexec ${spawnSync('which', ['redis-cli'], { encoding: 'utf8' }).stdout.trim()} "\${args[@]}"\n`);
    for (const shim of ['getent', 'redis-cli']) chmodSync(join(shims, shim), 0o755);
    const init = services['redis-cluster-init'];
    const entrypoint = [init.entrypoint ?? []].flat();
    expect(entrypoint).toEqual(['/bin/sh', '-c']);
    return spawnSync('/bin/sh', ['-c', commandOf(init).join(' ')], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, PATH: `${shims}:${process.env.PATH}` } });
  };
  const cli = (node: string, ...args: string[]) => spawnSync('redis-cli', ['-h', addressOf(node), '-p', '6379', ...args], { encoding: 'utf8' }).stdout;

  it('the 6 nodes start with the file’s flags; the init job makes 3 primaries with a replica each, and a second run changes nothing', async () => {
    for (const node of NODES) {
      const [binary, ...args] = commandOf(services[node]);
      mkdirSync(join(dir, node));
      const child = spawn(binary, [...args, '--bind', addressOf(node), '--bind-source-addr', addressOf(node), '--dir', join(dir, node)], { stdio: ['ignore', 'ignore', 'pipe'] });
      children.push(child);
    }
    // The job's own wait (depends_on: service_healthy) is the node's health check: PING answered.
    for (const node of NODES) {
      await new Promise<void>((resolve, reject) => {
        const poll = () => (cli(node, 'PING').trim() === 'PONG' ? resolve() : children.some((c) => c.exitCode !== null) ? reject(new Error(`a node exited`)) : setTimeout(poll, 50));
        poll();
      });
    }
    const first = runInit();
    expect(first.status, `${first.stdout}\n${first.stderr}`).toBe(0);
    const info = cli('redis-node-1', 'CLUSTER', 'INFO');
    expect(info).toMatch(/cluster_state:ok/);
    expect(info).toMatch(/cluster_size:3/);
    expect(info).toMatch(/cluster_known_nodes:6/);
    const roles = NODES.map((node) => /role:(\w+)/.exec(cli(node, 'INFO', 'replication'))![1]);
    expect(roles.filter((role) => role === 'master')).toHaveLength(3);
    expect(roles.filter((role) => role === 'slave')).toHaveLength(3);
    // Each node announces its service name (what clients in the compose network connect to).
    expect(cli('redis-node-1', 'CLUSTER', 'SHARDS')).toContain('redis-node-');
    // A second run (the job after a restart of the stack) finds the cluster made and leaves it: same nodes, same roles.
    // Id and address only: the ',hostname' suffix of a node's address reaches node 1 by gossip and
    // can arrive between the two reads (1 run in 10 under load), which is not a change by the job.
    const members = () => cli('redis-node-1', 'CLUSTER', 'NODES').split('\n').map((line) => line.split(' ').slice(0, 2).join(' ').split(',')[0]).sort();
    const membersBefore = members();
    const second = runInit();
    expect(second.status, second.stderr).toBe(0);
    expect(second.stdout).toBe('');
    expect(members()).toEqual(membersBefore);
    expect(NODES.map((node) => /role:(\w+)/.exec(cli(node, 'INFO', 'replication'))![1])).toEqual(roles);
  }, 90_000);
});
