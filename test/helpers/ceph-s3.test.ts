/**
 * The Ceph S3 fixture's start when a port it picked is taken first (another test's process bound it
 * between freePorts() and the daemon): a foreign listener on radosgw's port is not taken for radosgw,
 * and the start moves to fresh ports instead of handing the test an endpoint that is not S3.
 */
import { createServer, type Server } from 'node:http';

import { afterAll, describe, expect, it } from 'vitest';

import { startCephS3, type CephS3 } from './ceph-s3.ts';
import { freePort } from './free-port.ts';

describe('startCephS3', () => {
  let ceph: CephS3 | undefined;
  const foreign: Server = createServer((_request, response) => response.end('not S3'));
  afterAll(async () => {
    await ceph?.stop();
    await new Promise((resolve) => foreign.close(resolve));
  });

  it('does not take another listener on its radosgw port for radosgw, and starts on fresh ports', async () => {
    await new Promise<void>((resolve) => foreign.listen(0, '127.0.0.1', resolve));
    const taken = (foreign.address() as { port: number }).port;
    const lines: string[] = [];
    ceph = await startCephS3({ ports: [await freePort(), taken], log: (line) => lines.push(line) });
    expect(ceph.endpoint).not.toBe(`http://127.0.0.1:${taken}`);
    expect(lines.some((line) => line.includes('starting again on fresh ports'))).toBe(true);
    const answer = await fetch(ceph.endpoint);
    expect(answer.headers.has('x-amz-request-id')).toBe(true);
  });
});
