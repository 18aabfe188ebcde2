/**
 * Purge and GC of prefix units through a served process (gemma3-tiny, served
 * with units; embedded engine thread, fs storage) and the `kvtier` CLI as an
 * operator runs it:
 *   - GC by class: with the agent class at a 1 s TTL, `kvtier gc` removes the
 *     agent-class tails (a tool loop is agent traffic) from storage and keeps
 *     the chat ones; the tool loop's next turn misses, the chat's next turn
 *     still hits its unit exactly;
 *   - `kvtier purge --tenant alice` removes alice's tails (and blocks):
 *     afterwards her next turn misses, bob's still hits.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ensureGemma3Model } from '../../../inference-core/synthetic/gemma3-synthetic.ts';
import type { BlockDetail, BlockListing } from '../../../src/admin/index.ts';
import { TAIL_MAGIC, TailCodec, type KvTierStats } from '../../../src/kvtier/index.ts';
import { TEST_DATA_DIR } from '../../inference-core/engine-fixtures.ts';
import { kvtier } from '../cli/cli-runner.ts';
import type { Overview } from '../../../src/stats/index.ts';
import { admin, waitFor } from './admin-fixtures.ts';
import { collectPageProblems, launchDashboardBrowser } from './dashboard-browser.ts';
import { ADMIN_TOKEN, KEYS, startTestServer, type TestServer } from './server-fixture.ts';

const SYSTEM = 'You are a terse assistant that keeps answers short. '.repeat(8);
const TOOLS: OpenAI.Chat.Completions.ChatCompletionTool[] = [{ type: 'function', function: { name: 'run_tests', description: 'Run the test suite', parameters: { type: 'object', properties: {} } } }];
type Msg = OpenAI.Chat.Completions.ChatCompletionMessageParam;

let server: TestServer;
let conn: string[];
let model: string;

beforeAll(async () => {
  const modelPath = ensureGemma3Model('gemma3-tiny', { dataDir: TEST_DATA_DIR });
  model = basename(modelPath, '.gguf');
  const dataDir = mkdtempSync(join(tmpdir(), 'kvtier-units-admin-'));
  const keysFile = join(dataDir, 'units-keys.txt');
  writeFileSync(keysFile, `${KEYS.alice} alice\n${KEYS.bob} bob\n`);
  server = await startTestServer({ model: modelPath, dataDir, apiKeysFile: keysFile });
  conn = ['--url', server.url, '--token', ADMIN_TOKEN];
}, 120_000);
afterAll(async () => {
  await server?.close();
});

const client = (key: string) => new OpenAI({ baseURL: `${server.url}/v1`, apiKey: key, maxRetries: 0 });

/** A conversation whose assistant turns the client writes: each turn's prompt starts with the previous one. */
class Conversation {
  readonly messages: Msg[];
  prompts: number[] = [];
  constructor(private readonly key: string, first: string, private readonly tools?: OpenAI.Chat.Completions.ChatCompletionTool[]) {
    this.messages = [{ role: 'system', content: SYSTEM }, { role: 'user', content: first }];
  }
  /** Sends the conversation so far; returns the cached tokens; appends a written assistant turn and the next user turn. */
  async turn(): Promise<number> {
    const r = await client(this.key).chat.completions.create({ model, messages: this.messages, max_tokens: 4, temperature: 0, ...(this.tools ? { tools: this.tools } : {}) });
    this.prompts.push(r.usage!.prompt_tokens);
    const n = this.prompts.length;
    if (this.tools) {
      this.messages.push({ role: 'assistant', content: null, tool_calls: [{ id: `call_${n}`, type: 'function', function: { name: 'run_tests', arguments: '{}' } }] });
      this.messages.push({ role: 'tool', tool_call_id: `call_${n}`, content: `{"ok": false, "run": ${n}}` });
    } else this.messages.push({ role: 'assistant', content: `Noted (${n}).` });
    this.messages.push({ role: 'user', content: `Next ${n + 1}, please.` });
    return r.usage!.prompt_tokens_details!.cached_tokens!;
  }
  get lastPrompt(): number {
    return this.prompts[this.prompts.length - 1];
  }
}

const tierStats = async () => (await admin<{ tier: { cache: KvTierStats } }>(server.url, '/admin/stats')).body.tier.cache;
/** Every unit queued so far is on storage and in the node's index (its counters, then its listing). */
const settled = () => waitFor(async () => {
  const u = (await tierStats()).units!;
  if (u.written + u.dropped < u.queued) return false;
  const all = await listed('');
  return [...(await tailKeys())].every((k) => all.has(k));
}, 'the tails to be written and indexed');

function storedFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? storedFiles(join(dir, e.name)) : e.name.endsWith('.tmp') ? [] : [join(dir, e.name)]));
}

/** Keys of the tails on storage. */
async function tailKeys(): Promise<Set<string>> {
  const codec = await TailCodec.create();
  const keys = new Set<string>();
  for (const f of storedFiles(join(server.dataDir, 'blocks'))) {
    const bytes = readFileSync(f);
    if (bytes.readUInt32LE(0) === TAIL_MAGIC) keys.add(codec.decode(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)).key);
  }
  return keys;
}

const listed = async (query: string) => new Set((await admin<BlockListing>(server.url, `/admin/blocks?${query}&limit=10000`)).body.blocks.map((b) => b.key));

describe('units: inspect, GC and purge through the served process', () => {
  it('kvtier inspect shows a tail as the unit it completes (position, block chain, window section); ls --stored marks tails', async () => {
    const talk = new Conversation(KEYS.bob, 'Inspect me: hello');
    await talk.turn();
    await settled();
    const codec = await TailCodec.create();
    const tails = storedFiles(join(server.dataDir, 'blocks')).map((f) => readFileSync(f)).filter((b) => b.readUInt32LE(0) === TAIL_MAGIC).map((b) => codec.decode(new Uint8Array(b.buffer, b.byteOffset, b.byteLength)));
    // the end-of-prompt unit: past one whole block, so a block chain, a partial block and a window
    const tail = tails.find((t) => t.position === talk.prompts[0])!;
    expect(tail).toBeDefined();
    const shown = await kvtier(['inspect', tail.key, ...conn]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(new RegExp(`^unit tail ${tail.key}`));
    expect(shown.stdout).toMatch(/storage\s+.* file, verified/);
    expect(shown.stdout).toContain(`unit at ${tail.position} tokens: ${tail.blocks} blocks of 64 (chain ending at ${tail.blockKey})`);
    expect(shown.stdout).toMatch(new RegExp(`section\\s+window-kv, layers 0,1,2,3,4,6,7, tokens \\[${tail.position - 39}, ${tail.position}\\)`));
    const detail = JSON.parse((await kvtier(['inspect', tail.key, '--json', ...conn])).stdout) as BlockDetail;
    expect(detail.storage.unit).toMatchObject({ position: tail.position, blocks: tail.blocks, blockKey: tail.blockKey });
    expect(detail.entry?.tenant).toBe('bob');
    const stored = (await admin<BlockListing>(server.url, '/admin/blocks?tenant=bob&stored=1&limit=50')).body.blocks;
    const marked = stored.find((b) => b.key === tail.key);
    expect(marked?.stored).toMatchObject({ kind: 'tail', unitPosition: tail.position });
    expect(stored.filter((b) => b.stored?.kind === 'block').length).toBeGreaterThan(0);
  }, 240_000);

  it('plain kvtier ls, GET /admin/blocks and the dashboard tell tails from blocks: the index records the kind with the entry', async () => {
    const talk = new Conversation(KEYS.bob, 'Kinds: hello');
    await talk.turn();
    await settled();
    const tails = await tailKeys();
    expect(tails.size).toBeGreaterThan(0);
    const listing = (await admin<BlockListing>(server.url, '/admin/blocks?limit=10000')).body.blocks;
    expect(listing.length).toBeGreaterThan(tails.size);
    for (const b of listing) expect(b.kind, b.key).toBe(tails.has(b.key) ? 'tail' : 'block');
    // kvtier ls without --stored reads no file: the kind column is the index's
    const ls = await kvtier(['ls', '--limit', '10000', ...conn]);
    expect(ls.code, ls.stderr).toBe(0);
    const rows = ls.stdout.split('\n').map((line) => line.trim().split(/\s+/)).filter((cells) => /^[0-9a-f]{32}$/.test(cells[0]));
    expect(rows).toHaveLength(listing.length);
    for (const [key, kind] of rows) expect(kind, key).toBe(tails.has(key) ? 'tail' : 'block');
    // the stored figures: of the blocks, the tails and their bytes
    const { overview } = (await admin<{ overview: Overview }>(server.url, '/admin/stats/overview')).body;
    expect(overview.storage.tails.blocks).toBe(tails.size);
    expect(overview.storage.tails.bytes).toBe(listing.filter((b) => b.kind === 'tail').reduce((n, b) => n + b.sizeBytes, 0));
    // the dashboard: the stored card counts them, the recent-blocks table marks them
    const browser = await launchDashboardBrowser();
    try {
      const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
      const problems = collectPageProblems(page, { httpErrors: true });
      await page.goto(`${server.url}/dashboard#token=${ADMIN_TOKEN}`);
      await page.waitForSelector('#blocks tbody tr[data-key]', { timeout: 120_000 });
      await page.waitForFunction(() => document.querySelector('[data-figure="storage.tails.blocks"]')?.getAttribute('data-value') !== '', undefined, { timeout: 60_000 });
      expect(await page.getAttribute('[data-figure="storage.tails.blocks"]', 'data-value')).toBe(String(tails.size));
      const shown = await page.locator('#blocks tbody tr[data-key]').evaluateAll((trs) => trs.map((tr) => ({ key: tr.getAttribute('data-key')!, kind: tr.getAttribute('data-kind'), tag: tr.querySelector('td .tag.kind')?.textContent ?? null })));
      expect(shown.some((r) => r.kind === 'tail')).toBe(true);
      for (const r of shown) expect(r, r.key).toMatchObject(tails.has(r.key) ? { kind: 'tail', tag: 'unit tail' } : { kind: 'block', tag: null });
      expect(problems).toEqual([]);
    } finally {
      await browser.close();
    }
  }, 300_000);

  it('kvtier gc expires agent-class tails (1 s TTL) and keeps chat; the tool loop misses after, the chat hits its unit', async () => {
    const chat = new Conversation(KEYS.alice, 'Chat: hello');
    const loop = new Conversation(KEYS.alice, 'The build is red, fix it.', TOOLS);
    expect(await chat.turn()).toBe(0);
    expect(await chat.turn()).toBe(chat.prompts[0]);
    await loop.turn();
    expect(await loop.turn()).toBe(loop.prompts[0]);
    await settled();
    const tails = await tailKeys();
    const agent = [...(await listed('class=agent'))].filter((k) => tails.has(k));
    const chatTails = [...(await listed('class=chat'))].filter((k) => tails.has(k));
    expect(agent.length).toBeGreaterThan(0);
    expect(chatTails.length).toBeGreaterThan(0);

    const set = await kvtier(['policy', 'set', '--class', 'agent', '--ttl', '1s', ...conn]);
    expect(set.code, set.stderr).toBe(0);
    // a tail expires 1 s after its last use: run GC until it has taken them (each run is the CLI's)
    await waitFor(async () => {
      const gc = await kvtier(['gc', ...conn]);
      expect(gc.code, gc.stderr).toBe(0);
      const left = await tailKeys();
      return agent.every((k) => !left.has(k));
    }, 'kvtier gc to expire the agent tails', 20_000);
    const left = await tailKeys();
    for (const k of chatTails) expect(left.has(k), `chat tail ${k}`).toBe(true);
    expect(await listed('class=agent')).toEqual(new Set());

    expect(await loop.turn()).toBe(0);
    expect(await chat.turn()).toBe(chat.prompts[1]);
    const reset = await kvtier(['policy', 'reset', ...conn]);
    expect(reset.code, reset.stderr).toBe(0);
  }, 240_000);

  it('kvtier purge --tenant alice removes her tails; her next turn misses, bob\'s hits', async () => {
    const alice = new Conversation(KEYS.alice, 'Purge me: hello');
    const bob = new Conversation(KEYS.bob, 'Keep me: hello');
    await alice.turn();
    await bob.turn();
    expect(await alice.turn()).toBe(alice.prompts[0]);
    await settled();
    const tails = await tailKeys();
    const alices = [...(await listed('tenant=alice'))].filter((k) => tails.has(k));
    const bobs = [...(await listed('tenant=bob'))].filter((k) => tails.has(k));
    expect(alices.length).toBeGreaterThan(0);
    expect(bobs.length).toBeGreaterThan(0);

    const purged = await kvtier(['purge', '--tenant', 'alice', '--yes', ...conn]);
    expect(purged.code, purged.stderr).toBe(0);
    const left = await tailKeys();
    for (const k of alices) expect(left.has(k), `alice's tail ${k}`).toBe(false);
    for (const k of bobs) expect(left.has(k), `bob's tail ${k}`).toBe(true);
    expect(await listed('tenant=alice')).toEqual(new Set());

    expect(await alice.turn()).toBe(0);
    expect(await bob.turn()).toBe(bob.prompts[0]);
  }, 240_000);
});
