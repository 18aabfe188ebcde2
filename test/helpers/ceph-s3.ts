/**
 * A real, throwaway Ceph cluster with an S3 endpoint, on loopback, for tests
 * and benchmarks:
 *
 *   const s3 = await startCephS3();
 *   // s3.endpoint = 'http://127.0.0.1:<port>', s3.accessKeyId, s3.secretAccessKey
 *   await s3.stop();   // kills every daemon and removes the temp dir
 *
 * One monitor, one OSD on memstore (RAM only, nothing to format), one radosgw
 * (beast frontend), each its own child process in the foreground, all under a
 * fresh temp dir with its own fsid, ceph.conf and keyrings, so several
 * clusters (one per test file, in parallel forks) never meet. Nothing is
 * cached across runs. No mgr: the mon creates pools itself, and nothing here
 * needs mgr modules.
 *
 * Needs the Debian packages ceph-mon, ceph-osd, radosgw, ceph-common
 * (`npm test`'s pretest installs them).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promises as fsp, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { S3BlobStore, type S3BlobStoreOptions } from '../../storage-adapters/index.ts';
import { daemonLogTails, freePorts, waitForHttp, waitForPort } from './ceph-s3-start.ts';

export interface CephS3 {
  /** `http://127.0.0.1:<port>` — the radosgw S3 endpoint (path-style addressing). */
  endpoint: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** Any region works with RGW; this is the one to sign with. */
  region: string;
  /** The cluster's temp dir (ceph.conf, keyrings, daemon logs); gone after stop(). */
  dir: string;
  /** Kills the daemons and removes the dir. Idempotent. */
  stop(): Promise<void>;
}

/** S3BlobStore options for `prefix` in `bucket` on an RGW (or any S3 endpoint with static keys), path-style. */
export function s3StoreOptions(s3: Pick<CephS3, 'endpoint' | 'region' | 'accessKeyId' | 'secretAccessKey'>, bucket: string, prefix: string): S3BlobStoreOptions {
  return {
    endpoint: s3.endpoint,
    bucket,
    region: s3.region,
    prefix,
    credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
    forcePathStyle: true,
  };
}

/** Deletes every object under `options`' prefix (the caller's own namespace only). */
export async function wipeS3Prefix(options: S3BlobStoreOptions): Promise<void> {
  const store = new S3BlobStore(options);
  const keys: string[] = [];
  for await (const key of store.list()) keys.push(key);
  await store.delete(keys);
  await store.close();
}

export interface StartCephS3Options {
  /** Give up (and clean up) if the cluster is not serving S3 by then. Default 60 s. */
  timeoutMs?: number;
  /** memstore capacity; the OSD keeps every object in RAM. Default 4 GiB. */
  memstoreBytes?: number;
  /** Progress lines (default: silent). */
  log?: (line: string) => void;
  /** The mon's and radosgw's ports for the first try (a test of the retry); default: free ones. */
  ports?: [number, number];
}

const live = new Set<ChildProcess>();
const liveDirs = new Set<string>();
let exitHookInstalled = false;

/**
 * The mon's and radosgw's ports were free when freePorts() checked them; another process can bind
 * one before the daemon does, which then exits. Such a start is made again on fresh ports (each try
 * with the whole timeout); any other failure is thrown at once.
 */
export async function startCephS3(options: StartCephS3Options = {}): Promise<CephS3> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startCephS3Once(attempt === 1 ? options : { ...options, ports: undefined });
    } catch (error) {
      if (attempt >= 3 || !/Address already in use|\(98\)|not as radosgw/i.test((error as Error).message)) throw error;
      (options.log ?? (() => undefined))(`ceph: a port was taken before its daemon bound it; starting again on fresh ports`);
    }
  }
}

async function startCephS3Once(options: StartCephS3Options): Promise<CephS3> {
  const timeoutMs = options.timeoutMs ?? 60_000;
  const log = options.log ?? (() => undefined);
  const deadline = Date.now() + timeoutMs;
  const dir = await fsp.mkdtemp(join(tmpdir(), 'kvtier-ceph-'));
  liveDirs.add(dir);
  const daemons: ChildProcess[] = [];
  let stopped = false;

  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    await Promise.all(daemons.map((daemon) => terminate(daemon)));
    await fsp.rm(dir, { recursive: true, force: true });
    liveDirs.delete(dir);
  };

  try {
    installExitHook();
    const [monPort, rgwPort] = options.ports ?? (await freePorts(2));
    const fsid = randomUUID();
    const conf = join(dir, 'ceph.conf');
    await fsp.writeFile(conf, cephConf({ dir, fsid, monPort, rgwPort, memstoreBytes: options.memstoreBytes ?? 4 * 1024 ** 3 }));
    const run = (command: string, args: string[]) => runTool(command, ['-c', conf, ...args], deadline, dir);

    // keyrings: the mon's (mon. + admin + rgw, imported at mkfs) and the one every client reads
    const monKeyring = join(dir, 'mon.keyring');
    const keyring = join(dir, 'keyring');
    await runTool('ceph-authtool', ['--create-keyring', monKeyring, '--gen-key', '-n', 'mon.', '--cap', 'mon', 'allow *'], deadline, dir);
    await runTool(
      'ceph-authtool',
      ['--create-keyring', keyring, '--gen-key', '-n', 'client.admin', '--cap', 'mon', 'allow *', '--cap', 'osd', 'allow *', '--cap', 'mgr', 'allow *'],
      deadline,
      dir,
    );
    await runTool('ceph-authtool', [keyring, '--gen-key', '-n', 'client.rgw.a', '--cap', 'mon', 'allow rw', '--cap', 'osd', 'allow rwx'], deadline, dir);
    await runTool('ceph-authtool', [monKeyring, '--import-keyring', keyring], deadline, dir);
    const monmap = join(dir, 'monmap');
    await runTool('monmaptool', ['--create', '--addv', 'a', `[v1:127.0.0.1:${monPort}]`, '--fsid', fsid, monmap], deadline, dir);

    log('ceph: mon');
    await run('ceph-mon', ['--mkfs', '-i', 'a', '--monmap', monmap, '--keyring', monKeyring]);
    daemons.push(startDaemon('ceph-mon', ['-c', conf, '-f', '-i', 'a'], dir));
    await waitForPort(monPort, deadline, daemons, dir);

    log('ceph: osd');
    const osdUuid = randomUUID();
    const osdKey = (await runTool('ceph-authtool', ['--gen-print-key'], deadline, dir)).trim();
    const secrets = join(dir, 'osd-secrets.json');
    await fsp.writeFile(secrets, JSON.stringify({ cephx_secret: osdKey }));
    const osdId = (await run('ceph', ['--connect-timeout', '20', 'osd', 'new', osdUuid, '-i', secrets])).trim();
    const osdData = join(dir, `osd.${osdId}`);
    await fsp.mkdir(osdData, { recursive: true });
    const osdKeyring = join(osdData, 'keyring');
    await fsp.writeFile(osdKeyring, `[osd.${osdId}]\n\tkey = ${osdKey}\n`);
    await run('ceph-osd', ['-i', osdId, '--mkfs', '--osd-uuid', osdUuid, '--keyring', osdKeyring]);
    daemons.push(startDaemon('ceph-osd', ['-c', conf, '-f', '-i', osdId, '--keyring', osdKeyring], dir));

    log('ceph: radosgw');
    await fsp.mkdir(join(dir, 'rgw'), { recursive: true });
    daemons.push(startDaemon('radosgw', ['-c', conf, '-f', '-n', 'client.rgw.a'], dir));
    const endpoint = `http://127.0.0.1:${rgwPort}`;
    await waitForHttp(endpoint, deadline, daemons, dir);

    log('ceph: s3 user');
    const accessKeyId = `KVT${randomUUID().replaceAll('-', '').slice(0, 17).toUpperCase()}`;
    const secretAccessKey = randomUUID().replaceAll('-', '') + randomUUID().replaceAll('-', '').slice(0, 8);
    await run('radosgw-admin', [
      'user', 'create', '--uid=kvtier-test', '--display-name=kvtier test',
      `--access-key=${accessKeyId}`, `--secret-key=${secretAccessKey}`,
    ]);
    log(`ceph: ready at ${endpoint}`);
    return { endpoint, accessKeyId, secretAccessKey, region: 'us-east-1', dir, stop };
  } catch (error) {
    const logs = await daemonLogTails(dir);
    if (process.env.KVTIER_CEPH_KEEP_FAILED === '1') {
      // leave the dir for a post-mortem; the daemons still go
      stopped = true;
      await Promise.all(daemons.map((daemon) => terminate(daemon)));
    } else {
      await stop();
    }
    throw new Error(`could not start a Ceph S3 test cluster: ${(error as Error).message}\n${logs}`, { cause: error });
  }
}

function cephConf(o: { dir: string; fsid: string; monPort: number; rgwPort: number; memstoreBytes: number }): string {
  const d = o.dir;
  return `[global]
fsid = ${o.fsid}
mon host = v1:127.0.0.1:${o.monPort}
public addr = 127.0.0.1
ms bind msgr2 = false
ms bind ipv6 = false
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
keyring = ${d}/keyring
log file = ${d}/$name.log
admin socket = ${d}/$name.asok
run dir = ${d}
mon data = ${d}/mon.$id
osd data = ${d}/osd.$id
osd objectstore = memstore
memstore device bytes = ${o.memstoreBytes}
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
# The mon refuses to start (exit 28, ENOSPC) when the disk under its few-MB store has <= 5 % free:
# a CI or dev box with a nearly full disk then failed every S3 test with a 20 s "osd new" time-out.
mon data avail crit = 0
mon data avail warn = 0
mon allow pool delete = true
mon max pg per osd = 1000
mon warn on pool no redundancy = false
paxos propose interval = 0.1
osd max object name len = 460
osd max object namespace len = 64
# quiet and lean: this cluster lives on loopback for one test file
debug ms = 0/0
debug rgw = 0/0
debug osd = 0/0
debug memstore = 0/0
debug objclass = 0/0
debug auth = 0/0
ms crc data = false
rgw enable ops log = false
rgw enable usage log = false
[client.rgw.a]
rgw frontends = beast endpoint=127.0.0.1:${o.rgwPort}
rgw data = ${d}/rgw
rgw thread pool size = 64
`;
}

function startDaemon(command: string, args: string[], dir: string): ChildProcess {
  // stdio ignored: each daemon logs to <dir>/<name>.log
  const child = spawn(command, args, { cwd: dir, stdio: 'ignore' });
  live.add(child);
  child.once('exit', () => live.delete(child));
  child.once('error', () => live.delete(child));
  return child;
}

/** SIGKILL: the cluster is disposable, and a SIGTERM'd memstore OSD would first dump every object to disk. */
async function terminate(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGKILL');
  await exited;
}

/** A crashing test process must not leave daemons behind. */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const child of live) child.kill('SIGKILL');
    for (const dir of liveDirs) rmSync(dir, { recursive: true, force: true });
  });
}

function runTool(command: string, args: string[], deadline: number, cwd: string): Promise<string> {
  const timeout = Math.max(1000, deadline - Date.now());
  return new Promise((resolve, reject) => {
    execFile(command, args, { cwd, timeout, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${command} ${args.join(' ')} failed: ${error.message}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

/**
 * Until `ready()` answers true, failing at once, with its exit code, if a daemon exited (a mon refusing
 * to start would otherwise show only as the next step's time-out), and at the deadline.
 */
