/**
 * S3BlobStore against an endpoint that lies about object sizes: a loopback
 * HTTP server answering as S3 would (HEAD bucket 200) but with a GetObject
 * whose Content-Length claims a terabyte, or a body with no length that does
 * not end. This server is the attacker (a compromised or misbehaving S3
 * front), not a stand-in for radosgw; the real-server behaviour is in
 * s3.test.ts. The reader must never size a buffer from the server's word past
 * its `maxBytes`, nor collect an endless body, and must stay usable.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

import { afterAll, beforeAll, expect, it } from 'vitest';

import { S3BlobStore } from '../../storage-adapters/index.ts';

const TB = 1e12;
let server: Server;
let store: S3BlobStore;
/** Bytes the endless body has sent, so a reader that never stops shows up as a large number. */
let endlessSent = 0;

function lie(path: string, res: ServerResponse): void {
  if (path.endsWith('/huge-length')) {
    // Claims a terabyte, sends a few bytes, then hangs up.
    res.writeHead(200, { 'content-length': String(TB), 'content-type': 'application/octet-stream' });
    res.write(Buffer.alloc(16, 1));
    setTimeout(() => res.socket?.destroy(), 50);
    return;
  }
  if (path.endsWith('/endless')) {
    // No Content-Length (chunked) and no end; stops by itself at 256 MiB so a failing reader cannot take the box.
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    const chunk = Buffer.alloc(64 * 1024, 2);
    const pump = () => {
      while (endlessSent < 256 * 1024 * 1024 && !res.destroyed) {
        endlessSent += chunk.byteLength;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      res.end();
    };
    pump();
    return;
  }
  if (path.endsWith('/honest')) {
    const body = Buffer.alloc(1000, 3);
    res.writeHead(200, { 'content-length': String(body.byteLength), 'content-type': 'application/octet-stream' });
    res.end(body);
    return;
  }
  res.writeHead(404, { 'content-type': 'application/xml' });
  res.end('<?xml version="1.0"?><Error><Code>NoSuchKey</Code><Message>no</Message></Error>');
}

beforeAll(async () => {
  server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    if (req.method === 'HEAD') {
      res.writeHead(200);
      res.end();
      return;
    }
    lie(path, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  store = await S3BlobStore.open({
    endpoint: `http://127.0.0.1:${port}`,
    bucket: 'liar',
    credentials: { accessKeyId: 'x', secretAccessKey: 'y' },
    maxAttempts: 1,
    requestTimeoutMs: 10_000,
  });
});

afterAll(async () => {
  await store?.close();
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
});

it('a Content-Length of a terabyte past maxBytes: KVT_ERR_STORAGE_TOO_LARGE, allocate never asked', async () => {
  const asked: number[] = [];
  const error = await store.get('huge-length', { allocate: (size) => (asked.push(size), new Uint8Array(size)), maxBytes: 1 << 30 }).catch((e: unknown) => e);
  expect(error).toMatchObject({ code: 'KVT_ERR_STORAGE_TOO_LARGE', sizeBytes: TB, maxBytes: 1 << 30 });
  expect(asked).toEqual([]);
});

it('the same lie without maxBytes, into an allocate that cannot make the buffer: a typed storage error, not a throw past the store', async () => {
  const refusing = (size: number): Uint8Array => {
    throw new RangeError(`no ${size}-byte buffer`);
  };
  await expect(store.get('huge-length', { allocate: refusing })).rejects.toMatchObject({ code: 'KVT_ERR_STORAGE_IO' });
});

it('a body without Content-Length that does not end: refused once it passes maxBytes, not collected', async () => {
  endlessSent = 0;
  const error = await store.get('endless', { maxBytes: 4 * 1024 * 1024 }).catch((e: unknown) => e);
  expect(error).toMatchObject({ code: 'KVT_ERR_STORAGE_TOO_LARGE', maxBytes: 4 * 1024 * 1024 });
  // The socket was torn down near the limit (send buffers allow a few MiB more), far from the 256 MiB the server would send.
  expect(endlessSent).toBeLessThan(64 * 1024 * 1024);
});

it('an honest object is still read, into the caller\'s buffer, after the lies', async () => {
  const got = await store.get('honest', { allocate: (size) => new Uint8Array(size), maxBytes: 1000 });
  expect(got?.byteLength).toBe(1000);
  expect(got?.every((b) => b === 3)).toBe(true);
  expect(await store.get('nothing-here')).toBeNull();
});
