/**
 * docker-compose.yml, checked without a Docker engine (compose-file.ts: parsed and
 * interpolated as Compose does with an empty environment): each
 * kvtier service's environment is run through the real loadConfig() and
 * parseBlobStoreUrl() — so a typo'd variable, a bucket the init job does not
 * create, or a Redis host that is not a service fails here, not at `up`.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { loadConfig } from '../../src/config.ts';
import { parseBlobStoreUrl } from '../../storage-adapters/index.ts';
import { ROOT, envNamesReadBySrc, envOf, loadCompose } from './compose-file.ts';

const compose = loadCompose();
const services = compose.services;
const KVTIER_SERVICES = ['api', 'worker', 'prefill-worker', 'decode-worker'] as const;

describe('docker-compose.yml topology', () => {
  it('has redis, minio, a bucket-init job, the api and worker replicas', () => {
    // The cluster profile's services: compose-cluster.test.ts.
    const oneRedis = Object.entries(services).filter(([, service]) => !service.profiles?.includes('cluster'));
    expect(oneRedis.map(([name]) => name).sort()).toEqual(['api', 'decode-worker', 'minio', 'minio-init', 'prefill-worker', 'redis', 'worker']);
    // The split-role workers start only with --profile split; everything else always.
    expect(oneRedis.filter(([, service]) => service.profiles).map(([name, service]) => [name, service.profiles])).toEqual([
      ['prefill-worker', ['split']],
      ['decode-worker', ['split']],
    ]);
    expect(services.redis.image).toMatch(/^redis:/);
    expect(services.minio.image).toMatch(/^minio\/minio/);
    expect(services['minio-init'].image).toMatch(/^minio\/mc/);
    expect(services['minio-init'].restart).toBe('no');
    for (const name of KVTIER_SERVICES) expect(services[name].build, `${name} builds the kvtier image`).toBeDefined();
    expect(services.api.command).toEqual(['serve']);
    expect(services.worker.command).toEqual(['worker']);
    const replicas = Number(services.worker.deploy?.replicas);
    expect(Number.isInteger(replicas) && replicas >= 2, `worker replicas default ${services.worker.deploy?.replicas}`).toBe(true);
    // The replica count follows KVTIER_WORKERS.
    expect(Number(loadCompose({ KVTIER_WORKERS: '5' }).services.worker.deploy?.replicas)).toBe(5);
  });

  it('gives every long-running service a health check, and orders start-up on them', () => {
    for (const name of ['redis', 'minio', 'api', 'worker', 'prefill-worker', 'decode-worker']) {
      const check = services[name].healthcheck;
      expect(check, `${name} has a healthcheck`).toBeDefined();
      expect(check!.test[0]).toBe('CMD');
      expect(check!.retries).toBeGreaterThan(0);
    }
    expect(services.redis.healthcheck!.test).toContain('ping');
    expect(services.api.healthcheck!.test.join(' ')).toContain('/readyz');
    // The worker check looks for the heartbeat key bullmq-worker.ts writes.
    const workerSource = readFileSync(join(ROOT, 'src/workers/bullmq-protocol.ts'), 'utf8');
    const prefix = /WORKER_STATS_PREFIX = '([^']+)'/.exec(workerSource)?.[1];
    expect(prefix).toBeDefined();
    expect(services.worker.healthcheck!.test.join(' ')).toContain(`'${prefix}'`);
    expect(services['minio-init'].depends_on?.minio.condition).toBe('service_healthy');
    for (const name of KVTIER_SERVICES) {
      expect(services[name].depends_on?.redis.condition).toBe('service_healthy');
      expect(services[name].depends_on?.['minio-init'].condition).toBe('service_completed_successfully');
    }
  });

  it('persists redis, minio and the api data in declared volumes; workers keep their index local', () => {
    const declared = new Set(Object.keys(compose.volumes ?? {}));
    const mounts = (name: string) => (services[name].volumes ?? []).map((v) => v.split(':'));
    expect(mounts('redis')).toContainEqual([expect.any(String), '/data']);
    expect(mounts('minio')).toContainEqual([expect.any(String), '/data']);
    expect(mounts('api').map((m) => m[1])).toContain(envOf(services.api).KVTIER_DATA_DIR);
    for (const name of Object.keys(services)) {
      for (const [source] of mounts(name)) {
        if (!source.startsWith('.') && !source.startsWith('/')) expect(declared.has(source), `volume ${source} of ${name} is declared`).toBe(true);
      }
    }
    // Replicas would all share a named volume: their LMDB indexes must not.
    expect(mounts('worker').filter(([source]) => declared.has(source))).toEqual([]);
    expect(services.redis.command).toContain('--appendonly');
  });
});

describe('docker-compose.yml environment', () => {
  const known = envNamesReadBySrc();

  it.each(KVTIER_SERVICES)('%s: every KVTIER_* variable it sets is one src/ reads', (name) => {
    const unknown = Object.keys(envOf(services[name])).filter((k) => k.startsWith('KVTIER_') && !known.has(k));
    expect(unknown).toEqual([]);
  });

  it.each(KVTIER_SERVICES)('%s: its environment passes loadConfig and names the compose services', (name) => {
    const env = envOf(services[name]);
    for (const needed of ['REDIS_URL', 'KVTIER_STORAGE', 'KVTIER_MODEL', 'KVTIER_DATA_DIR', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY']) {
      expect(env[needed], `${name} sets ${needed}`).toBeTruthy();
    }
    const config = loadConfig(env);
    expect(new URL(config.redisUrl!).hostname).toBe('redis');
    const storage = parseBlobStoreUrl(config.storage);
    expect(storage.kind).toBe('s3');
    if (storage.kind !== 's3') return;
    // The bucket is the one minio-init creates, at the minio service, with MinIO's own credentials.
    const init = [services['minio-init'].command].flat().join(' ');
    expect(init).toMatch(new RegExp(`mc mb (--ignore-existing )?local/${storage.options.bucket}\\b`));
    const endpoint = new URL(storage.options.endpoint!);
    expect(endpoint.hostname).toBe('minio');
    expect(endpoint.port).toBe('9000');
    expect(storage.options.forcePathStyle).toBe(true);
    const minio = envOf(services.minio);
    expect(env.AWS_ACCESS_KEY_ID).toBe(minio.MINIO_ROOT_USER);
    expect(env.AWS_SECRET_ACCESS_KEY).toBe(minio.MINIO_ROOT_PASSWORD);
    expect(init).toContain(`${minio.MINIO_ROOT_USER} ${minio.MINIO_ROOT_PASSWORD}`);
  });

  it('api and workers agree on model, storage, redis and block size (jobs and blocks are interchangeable)', () => {
    const api = loadConfig(envOf(services.api));
    const worker = loadConfig(envOf(services.worker));
    for (const key of ['model', 'storage', 'redisUrl', 'blockTokens'] as const) expect(worker[key], key).toBe(api[key]);
    expect(api.host).toBe('0.0.0.0');
    expect(services.api.ports).toContain(`${api.port}:${api.port}`);
    // KVTIER_MODEL is overridable from the shell, for both at once.
    const other = loadCompose({ KVTIER_MODEL: 'synthetic:tiny' }).services;
    expect(envOf(other.api).KVTIER_MODEL).toBe('synthetic:tiny');
    expect(envOf(other.worker).KVTIER_MODEL).toBe('synthetic:tiny');
  });

  it('the split profile: a prefill-role and a decode-role worker like the others but for KVTIER_ROLE', () => {
    const worker = envOf(services.worker);
    for (const [name, role] of [['prefill-worker', 'prefill'], ['decode-worker', 'decode']] as const) {
      const service = services[name];
      expect(loadConfig(envOf(service)).role).toBe(role);
      expect({ ...envOf(service), KVTIER_ROLE: undefined }).toEqual({ ...worker, KVTIER_ROLE: undefined });
      expect(service.command).toEqual(['worker']);
      expect(service.healthcheck).toEqual(services.worker.healthcheck);
      expect(service.depends_on).toEqual(services.worker.depends_on);
      expect((service.volumes ?? []).length).toBe(0);
      expect(Number(service.deploy?.replicas)).toBe(1);
    }
    expect(loadConfig(worker).role).toBe('both');
    expect(loadConfig(envOf(services.api)).dispatch).toBe('aware');
  });

  it('the Dockerfile image runs bin/kvtier.js and builds the native addon', () => {
    const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
    expect(dockerfile).toMatch(/ENTRYPOINT \["node", "bin\/kvtier\.js"\]/);
    expect(dockerfile).toMatch(/RUN npm ci/);
    expect(dockerfile).toMatch(/COPY native \.\/native/);
  });
});
