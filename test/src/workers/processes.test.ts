/**
 * The tests' Redis process: a port taken between freePort() and redis-server's bind (another test's
 * process got it) moves the first start to a fresh port instead of failing the test; a restart keeps
 * its port, since clients hold the URL.
 */
import { createServer, type Server } from 'node:net';

import { afterAll, describe, expect, it } from 'vitest';

import { ping } from '../../helpers/redis-server.ts';
import { freePort, RedisProcess } from './processes.ts';

describe('RedisProcess', () => {
  const holder: Server = createServer();
  let redis: RedisProcess | undefined;
  afterAll(async () => {
    await redis?.stop();
    await new Promise((resolve) => holder.close(resolve));
  });

  it('moves its first start off a taken port, and a restart stays on its port', async () => {
    const taken = await freePort();
    await new Promise<void>((resolve) => holder.listen(taken, '127.0.0.1', resolve));
    redis = new RedisProcess(taken);
    await redis.start();
    expect(redis.port).not.toBe(taken);
    expect(redis.url).toBe(`redis://127.0.0.1:${redis.port}`);
    expect(await ping(redis.port)).toBe(true);

    const port = redis.port;
    await redis.stop();
    await redis.start();
    expect(redis.port).toBe(port);
    expect(await ping(port)).toBe(true);
  });
});
