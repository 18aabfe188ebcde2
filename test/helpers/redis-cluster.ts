/**
 * A real Redis Cluster on 127.0.0.1 for tests: `primaries` redis-server processes in cluster mode
 * plus `replicas` per primary, created with `redis-cli --cluster create … --cluster-replicas N`.
 *
 *   const cluster = await startRedisCluster();          // 3 primaries, 1 replica each
 *   cluster.spec                                        // "127.0.0.1:p1,127.0.0.1:p2,…" (KVTIER_REDIS_CLUSTER)
 *   cluster.address                                     // "redis-cluster://127.0.0.1:p1,…" (config.redisUrl form)
 *   await cluster.kill(port);                           // kill -9 one node
 *   await cluster.waitHealthy();                        // every slot served by a primary that answers
 *   await cluster.stop();
 *
 * Every wait is on an observed state (PING answered, CLUSTER INFO / CLUSTER NODES / INFO replication
 * as wanted), polled on loopback, with a deadline; nothing sleeps a fixed time.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { ping, serverPid } from './redis-server.ts';

export interface ClusterNode {
  port: number;
  child: ChildProcess;
}

export interface RedisClusterFixture {
  /** `host:port,…` of every node (the KVTIER_REDIS_CLUSTER form). */
  spec: string;
  /** `redis-cluster://host:port,…` (the internal address form, config.redisUrl). */
  address: string;
  ports: number[];
  /** Runs one command on one node (redis-cli), returns its stdout. */
  cli(port: number, ...args: string[]): string;
  /** Port of the primary serving `slot`. */
  primaryOfSlot(slot: number): number;
  /** Ports of the primaries now, and each one's replicas. */
  topology(): { primary: number; replicas: number[]; slots: [number, number][] }[];
  /** kill -9 one node. */
  kill(port: number): Promise<void>;
  /** Starts a killed node again with its own config (it rejoins; with AOF it reloads its data). */
  restart(port: number): Promise<void>;
  /** Waits until every slot is served by a reachable primary and `cluster_state:ok` on every live node. */
  waitHealthy(timeoutMs?: number): Promise<void>;
  /** Waits until `port` reports `role` (e.g. a killed primary rejoined as a replica, a replica promoted). */
  waitRole(port: number, role: 'master' | 'slave', timeoutMs?: number): Promise<void>;
  /** Sum of `errorstat_<name>` over live nodes (INFO errorstats), e.g. CROSSSLOT. */
  errorCount(name: string): number;
  /**
   * CROSSSLOT replies plus failed script calls (EVAL/EVALSHA/FCALL: a script touching a key of another
   * slot fails with an ERR, counted there) over live nodes, less the NOSCRIPT answers (an EVALSHA that
   * ioredis retries as EVAL: in a failover an EVAL rejected with CLUSTERDOWN is retried as EVALSHA on
   * a node that never loaded the script; test/src/kvtier/redis-cluster-noscript.test.ts).
   * errorstat_ERR alone is no measure: ioredis sends CLIENT SETINFO on connect, which a 7.0 server
   * answers with ERR.
   */
  crossSlotErrors(): number;
  /** What crossSlotErrors() counts, per live node: its errorstats and its script commands with failed calls (for a failure's message). */
  errorReport(): string;
  stop(): Promise<void>;
}

export interface RedisClusterOptions {
  primaries?: number;
  replicas?: number;
  /** appendonly yes, appendfsync always (durability tests); default off. */
  aof?: boolean;
  /** cluster-node-timeout (ms): how soon a dead primary is failed over; default 1500. */
  nodeTimeoutMs?: number;
  startTimeoutMs?: number;
  /** Ports to try first (a test of the start's recovery); a node that cannot bind one moves to a fresh port. */
  ports?: number[];
}

async function portPairFree(port: number): Promise<boolean> {
  const tryListen = (p: number) =>
    new Promise<boolean>((resolve) => {
      const server = createServer();
      server.once('error', () => resolve(false));
      server.listen(p, '127.0.0.1', () => server.close(() => resolve(true)));
    });
  return (await tryListen(port)) && (await tryListen(port + 10_000));
}

/**
 * A port whose cluster bus port (+10000) is free too, both below the kernel's ephemeral range: a port
 * in that range can be taken between this check and redis-server's bind by any outgoing connection
 * or `listen(0)` on the machine (CI saw a node never answer PING). Another fixture picking the same
 * port at once is still possible; startRedisCluster moves a node that exits before answering.
 */
async function clusterPort(taken: Set<number>): Promise<number> {
  const ephemeralLow = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || 32_768;
  const high = Math.max(11_000, ephemeralLow - 10_001);
  for (;;) {
    const port = 10_000 + Math.floor(Math.random() * (high - 10_000));
    if (!taken.has(port) && (await portPairFree(port))) {
      taken.add(port);
      return port;
    }
  }
}

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`redis cluster: ${what} did not happen within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisClusterFixture> {
  const primaries = options.primaries ?? 3;
  const replicas = options.replicas ?? 1;
  const timeoutMs = options.startTimeoutMs ?? 30_000;
  const dir = mkdtempSync(join(tmpdir(), 'kvtier-rcluster-'));
  const taken = new Set<number>(options.ports);
  const ports: number[] = [...(options.ports ?? [])];
  while (ports.length < primaries * (1 + replicas)) ports.push(await clusterPort(taken));
  const nodes = new Map<number, ClusterNode>();
  const logs = new Map<number, string[]>();
  const dead = new Set<number>();

  const launch = (port: number): ClusterNode => {
    const args = [
      '--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '',
      '--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`,
      '--cluster-node-timeout', String(options.nodeTimeoutMs ?? 1500),
      '--appendonly', options.aof ? 'yes' : 'no', '--appendfilename', `aof-${port}.aof`, '--appenddirname', `aof-${port}`,
      '--appendfsync', 'always', '--dbfilename', `dump-${port}.rdb`,
    ];
    const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const log: string[] = [];
    const keep = (chunk: Buffer) => {
      log.push(chunk.toString());
      if (log.length > 20) log.shift();
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    child.once('error', () => dead.add(port));
    logs.set(port, log);
    const node = { port, child };
    nodes.set(port, node);
    dead.delete(port);
    return node;
  };

  const cli = (port: number, ...args: string[]): string => {
    const result = spawnSync('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { encoding: 'utf8', timeout: 10_000 });
    if (result.status !== 0) throw new Error(`redis-cli -p ${port} ${args.join(' ')} failed: ${result.stderr}${result.stdout}`);
    return result.stdout;
  };
  const tryCli = (port: number, ...args: string[]): string | null => {
    try {
      return cli(port, ...args);
    } catch {
      return null;
    }
  };

  const parseNodes = (port: number) => {
    const text = tryCli(port, 'CLUSTER', 'NODES') ?? '';
    return text
      .trim()
      .split('\n')
      .filter((line) => line.length > 0)
      .map((line) => {
        const parts = line.split(' ');
        return { id: parts[0], port: Number(parts[1].split(':')[1].split('@')[0]), flags: parts[2].split(','), master: parts[3], slots: parts.slice(8) };
      });
  };
  const live = () => ports.filter((port) => !dead.has(port));

  const topology = () => {
    const view = parseNodes(live()[0]);
    const out: { primary: number; replicas: number[]; slots: [number, number][] }[] = [];
    for (const node of view) {
      if (!node.flags.includes('master') || node.flags.includes('fail')) continue;
      const slots = node.slots.filter((s) => !s.startsWith('[')).map((s) => s.split('-').map(Number) as number[]).map(([a, b]) => [a, b ?? a] as [number, number]);
      if (slots.length === 0) continue;
      out.push({ primary: node.port, replicas: view.filter((r) => r.master === node.id && !r.flags.includes('fail')).map((r) => r.port), slots });
    }
    return out;
  };

  const waitHealthy = async (wait = timeoutMs) => {
    await until(
      'cluster_state:ok on every live node with every slot on a reachable primary',
      async () => {
        for (const port of live()) if (!/cluster_state:ok/.test(tryCli(port, 'CLUSTER', 'INFO') ?? '')) return false;
        const view = topology();
        let covered = 0;
        for (const { primary, slots } of view) {
          if (dead.has(primary) || !(await ping(primary))) return false;
          for (const [a, b] of slots) covered += b - a + 1;
        }
        return covered === 16_384;
      },
      wait,
    );
  };

  const waitRole = async (port: number, role: 'master' | 'slave', wait = timeoutMs) => {
    await until(`node ${port} to be ${role}`, () => {
      const info = tryCli(port, 'INFO', 'replication') ?? '';
      if (!info.includes(`role:${role}`)) return false;
      return role === 'master' || /master_link_status:up/.test(info);
    }, wait);
  };

  try {
    for (const port of ports) launch(port);
    // A node that exited before answering (its port or bus port was taken after clusterPort checked),
    // or whose port another redis-server answers on, is started again on a fresh port; the cluster is
    // only created once every port answers as the node started for it.
    const ownPid = (port: number) => nodes.get(port)!.child.pid;
    const exited = (port: number) => nodes.get(port)!.child.exitCode !== null || nodes.get(port)!.child.signalCode !== null;
    let moved = 0;
    await until(
      'every node answers PING',
      async () => {
        const pids = await Promise.all(ports.map(serverPid));
        let ready = true;
        for (let i = 0; i < ports.length; i++) {
          const foreign = pids[i] !== null && pids[i] !== ownPid(ports[i]);
          if (!exited(ports[i]) && !foreign) {
            ready &&= pids[i] !== null;
            continue;
          }
          if (++moved > 2 * ports.length) throw new Error(`redis cluster: nodes keep exiting at start; the last said:\n${(logs.get(ports[i]) ?? []).join('')}`);
          nodes.get(ports[i])!.child.kill('SIGKILL');
          nodes.delete(ports[i]);
          ports[i] = await clusterPort(taken);
          launch(ports[i]);
          ready = false;
        }
        return ready;
      },
      timeoutMs,
    );
    const create = spawnSync('redis-cli', ['--cluster', 'create', ...ports.map((port) => `127.0.0.1:${port}`), '--cluster-replicas', String(replicas), '--cluster-yes'], {
      encoding: 'utf8',
      timeout: timeoutMs,
    });
    if (create.status !== 0) throw new Error(`redis-cli --cluster create failed:\n${create.stdout}\n${create.stderr}`);
    await waitHealthy();
    // Every replica attached and in sync, so a failover has a replica with the data.
    await until('every replica in sync', () => topology().every(({ replicas: r }) => r.length === replicas && r.every((port) => /master_link_status:up/.test(tryCli(port, 'INFO', 'replication') ?? ''))), timeoutMs);
  } catch (error) {
    for (const node of nodes.values()) node.child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }

  const stopNode = (node: ClusterNode, signal: NodeJS.Signals) =>
    new Promise<void>((resolve) => {
      if (node.child.exitCode !== null || node.child.signalCode !== null) return resolve();
      node.child.once('exit', () => resolve());
      node.child.kill(signal);
    });

  return {
    spec: ports.map((port) => `127.0.0.1:${port}`).join(','),
    address: `redis-cluster://${ports.map((port) => `127.0.0.1:${port}`).join(',')}`,
    ports,
    cli,
    primaryOfSlot(slot) {
      for (const { primary, slots } of topology()) if (slots.some(([a, b]) => slot >= a && slot <= b)) return primary;
      throw new Error(`no primary serves slot ${slot}`);
    },
    topology,
    async kill(port) {
      dead.add(port);
      await stopNode(nodes.get(port)!, 'SIGKILL');
    },
    async restart(port) {
      const node = launch(port);
      // The restarted process itself, not whatever else may have bound the killed node's port meanwhile.
      await until(`node ${port} answers PING`, async () => (await serverPid(port)) === node.child.pid, timeoutMs);
    },
    waitHealthy,
    waitRole,
    errorCount(name) {
      let sum = 0;
      for (const port of live()) {
        const match = new RegExp(`errorstat_${name}:count=(\\d+)`).exec(tryCli(port, 'INFO', 'errorstats') ?? '');
        if (match) sum += Number(match[1]);
      }
      return sum;
    },
    crossSlotErrors() {
      let sum = 0;
      for (const port of live()) {
        const errors = tryCli(port, 'INFO', 'errorstats') ?? '';
        const match = /errorstat_CROSSSLOT:count=(\d+)/.exec(errors);
        if (match) sum += Number(match[1]);
        let failedScripts = 0;
        for (const line of (tryCli(port, 'INFO', 'commandstats') ?? '').split('\n')) {
          const failed = /^cmdstat_(eval|evalsha|eval_ro|evalsha_ro|fcall|fcall_ro):.*failed_calls=(\d+)/.exec(line);
          if (failed) failedScripts += Number(failed[2]);
        }
        // An EVALSHA answered NOSCRIPT failed too, but touched no key (test/src/kvtier/redis-cluster-noscript.test.ts).
        const noscript = Number(/errorstat_NOSCRIPT:count=(\d+)/.exec(errors)?.[1] ?? 0);
        sum += Math.max(0, failedScripts - noscript);
      }
      return sum;
    },
    errorReport() {
      return live()
        .map((port) => {
          const errors = (tryCli(port, 'INFO', 'errorstats') ?? '').split('\n').filter((line) => line.startsWith('errorstat_'));
          const scripts = (tryCli(port, 'INFO', 'commandstats') ?? '').split('\n').filter((line) => /^cmdstat_(eval|evalsha|eval_ro|evalsha_ro|fcall|fcall_ro):.*failed_calls=[1-9]/.test(line));
          return `${port}: ${[...errors, ...scripts].map((line) => line.trim()).join(' ')}`;
        })
        .join('\n');
    },
    async stop() {
      await Promise.all([...nodes.values()].map((node) => stopNode(node, 'SIGKILL')));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Redis Cluster's slot of a key (CRC16-XMODEM of the first non-empty `{…}`, else the key). */
export function keySlot(key: string): number {
  const bytes = Buffer.from(key, 'latin1');
  const open = bytes.indexOf('{');
  let hashed = bytes;
  if (open >= 0) {
    const close = bytes.indexOf('}', open + 1);
    if (close > open + 1) hashed = bytes.subarray(open + 1, close);
  }
  let crc = 0;
  for (const byte of hashed) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % 16_384;
}
