/**
 * The dashboard's "Recent blocks" table in real headless Chromium, on a
 * server with encryption at rest on (KVTIER_ENCRYPTION_SECRET's keyring) and
 * the int8 codec in the policy: after real traffic (an isolated tenant and a
 * shared one) every row shows codec int8 and aes-256-gcm key 1 — the codec
 * read from the block header after opening it with its tenant's key — the
 * rows equal GET /admin/blocks?stored=1, and the page logs no errors. The
 * listing without `stored` is unchanged (no storage reads).
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { keyringFromSecret } from '../../../src/kvtier/seal/index.ts';
import type { BlockListing } from '../../../src/admin/index.ts';
import { admin, chat, waitFor } from './admin-fixtures.ts';
import { ADMIN_TOKEN, KEYS, startTestServer, type TestServer } from './server-fixture.ts';
import { collectPageProblems, launchDashboardBrowser } from './dashboard-browser.ts';

const SECRET = 'dashboard-blocks-test-secret-0123456789abcdef';

let server: TestServer;
let browser: Browser;

beforeAll(async () => {
  server = await startTestServer({ encryption: keyringFromSecret(SECRET) });
  const policy = await admin(server.url, '/admin/policy', { method: 'PUT', body: { codec: 'int8', force: true } });
  expect(policy.status).toBe(200);
  for (const key of [KEYS.alice, KEYS.sharedOne]) await chat(server.url, key, "Which blocks are sealed?");
  // Blocks are written behind the reply: wait until both tenants' are on storage.
  await waitFor(async () => {
    const listing = (await admin<BlockListing>(server.url, '/admin/blocks?limit=50')).body;
    return new Set(listing.blocks.map((b) => b.tenant)).size === 2;
  }, 'blocks of both tenants stored', 60_000);
  browser = await launchDashboardBrowser();
}, 540_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

describe('dashboard: recent blocks', () => {
  it('GET /admin/blocks?stored=1 names each block codec and key id; without stored=1 nothing is read', async () => {
    const listing = (await admin<BlockListing>(server.url, '/admin/blocks?limit=50&stored=1')).body;
    expect(listing.blocks.length).toBeGreaterThan(1);
    for (const b of listing.blocks) {
      expect(b.stored).toMatchObject({ present: true, codec: 'int8', encryption: { algorithm: 'aes-256-gcm', keyId: 1, envelopeVersion: 1 } });
      expect(b.stored!.problem).toBeUndefined();
      expect(b.stored!.storedPayloadBytes!).toBeLessThan(0.53 * b.stored!.payloadBytes!);
      expect(b.stored!.tokenCount).toBeGreaterThan(0);
    }
    expect(new Set(listing.blocks.map((b) => b.tenant))).toEqual(new Set(['alice', 'team-one']));
    const plain = (await admin<BlockListing>(server.url, '/admin/blocks?limit=50')).body;
    expect(plain.blocks.every((b) => !('stored' in b))).toBe(true);
    const bad = await admin<{ error: { param: string } }>(server.url, '/admin/blocks?stored=yes');
    expect(bad.status).toBe(400);
    expect(bad.body.error.param).toBe('stored');
  });

  it('shows the table with codec int8 and aes-256-gcm key 1 per row, with no console errors', async () => {
    const page = await browser.newPage({ viewport: { width: 1440, height: 900 }, deviceScaleFactor: 1 });
    const problems = collectPageProblems(page, { httpErrors: true });
    await page.goto(`${server.url}/dashboard#token=${ADMIN_TOKEN}`);
    await page.waitForSelector('#blocks tbody tr[data-key]', { timeout: 120_000 });

    const rows = await page.locator('#blocks tbody tr[data-key]').evaluateAll((trs) =>
      trs.map((tr) => ({
        key: tr.getAttribute('data-key'),
        codec: tr.getAttribute('data-codec'),
        encryption: tr.getAttribute('data-encryption'),
        keyId: tr.getAttribute('data-key-id'),
        cells: Array.from(tr.querySelectorAll('td')).map((td) => td.textContent ?? ''),
      })),
    );
    const api = (await admin<BlockListing>(server.url, '/admin/blocks?limit=12&stored=1')).body;
    expect(rows.map((r) => r.key)).toEqual(api.blocks.map((b) => b.key));
    for (const [i, row] of rows.entries()) {
      const b = api.blocks[i];
      expect(row).toMatchObject({ codec: 'int8', encryption: 'aes-256-gcm', keyId: '1' });
      expect(row.cells[0]).toBe(`${b.key.slice(0, 12)}…`);
      expect(row.cells[1]).toBe(b.trafficClass);
      expect(row.cells[2]).toBe(b.tenant);
      expect(row.cells[3]).toBe(String(b.stored!.tokenCount));
      expect(row.cells[5]).toBe('int8');
      expect(row.cells[6]).toBe('aes-256-gcm · key 1');
      expect(row.cells[7]).toMatch(/ago$/);
    }
    expect(problems).toEqual([]);
    await page.close();
  }, 300_000);
});
