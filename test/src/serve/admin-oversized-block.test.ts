/**
 * `kvtier inspect` / GET /admin/blocks on a block whose file was replaced by
 * one claiming 8 TiB (sparse: no disk): the admin answer reports
 * KVT_ERR_STORAGE_TOO_LARGE for that block instead of reading it into
 * memory, and chat requests over the same prefix are still answered.
 */
import { truncateSync } from 'node:fs';
import { join } from 'node:path';

import { expect, it } from 'vitest';

import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { admin, chat, waitFor } from './admin-fixtures.ts';
import { KEYS, startTestServer } from './server-fixture.ts';
import { suiteFixture } from '../../helpers/suite-fixture.ts';

interface Listing {
  blocks: Array<{ key: string; stored?: { present: boolean; fileBytes?: number; problem?: { code: string } } }>;
}

const server = suiteFixture(() => startTestServer(), (s) => s.close());

it('inspect and the stored listing report a block file past the read bound as KVT_ERR_STORAGE_TOO_LARGE; the prefix is still served', async () => {
  const first = await chat(server().url, KEYS.alice, 'what is in a block?');
  await waitFor(async () => (await admin<Listing>(server().url, '/admin/blocks?limit=10')).body.blocks.length > 0, 'blocks in the index');
  const listing = (await admin<Listing>(server().url, '/admin/blocks?limit=10&stored=1')).body;
  const victim = listing.blocks.find((block) => block.stored?.present)!;
  expect(victim).toBeDefined();
  const files = await FsBlobStore.open({ dir: join(server().dataDir, 'blocks') });
  truncateSync(files.pathOf(victim.key), 8 * 2 ** 40);
  await files.close();

  const detail = await admin<{ storage: { present: boolean; fileBytes?: number; problem?: { code: string } } }>(server().url, `/admin/blocks/${victim.key}`);
  expect(detail.status).toBe(200);
  expect(detail.body.storage.problem?.code).toBe('KVT_ERR_STORAGE_TOO_LARGE');
  expect(detail.body.storage.fileBytes).toBeUndefined();
  const stored = (await admin<Listing>(server().url, '/admin/blocks?limit=10&stored=1')).body.blocks.find((block) => block.key === victim.key);
  expect(stored?.stored?.problem?.code).toBe('KVT_ERR_STORAGE_TOO_LARGE');

  const again = await chat(server().url, KEYS.alice, 'what is in a block?');
  expect(again.prompt_tokens).toBe(first.prompt_tokens);
});
