/**
 * The gpt-oss chat template kvtier carries (inference-core/synthetic/gptoss-template.ts) is OpenAI's,
 * byte for byte as llama.cpp's release in node-llama-cpp 3.21.1's bundle ships it
 * (models/templates/openai-gpt-oss-120b.jinja), and the harmony GGUF carries it. Its system message
 * holds the local date at render time (strftime_now), so it changes at local midnight: what the
 * serving notes in the template's header and the API tests' rerun across midnight rely on.
 * How kvtier renders it (== Python jinja2) and reads its calls: test/src/recipe/harmony-openai-template.test.ts.
 */
import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ChatTemplate } from '../../inference-core/chat-template.ts';
import { readGguf } from '../../inference-core/gguf/index.ts';
import { GPTOSS_OPENAI_CHAT_TEMPLATE } from '../../inference-core/synthetic/gptoss-template.ts';
import { ensureGptOssModel } from '../../inference-core/synthetic/gptoss-synthetic.ts';
import { llamaCppReleaseFile } from '../helpers/llamacpp-source.ts';
import { TEST_DATA_DIR } from './engine-fixtures.ts';

/** sha256 of llama.cpp v0.4.0's models/templates/openai-gpt-oss-120b.jinja (16,738 bytes). */
const OPENAI_TEMPLATE_SHA256 = 'a4c9919cbbd4acdd51ccffe22da049264b1b73e59055fa58811a99efbd7c8146';

describe("gpt-oss's chat template", () => {
  afterEach(() => vi.useRealTimers());

  it("is OpenAI's, byte for byte as the bundled llama.cpp release ships it", () => {
    const bundled = llamaCppReleaseFile('models/templates/openai-gpt-oss-120b.jinja');
    expect(GPTOSS_OPENAI_CHAT_TEMPLATE).toBe(bundled);
    const bytes = Buffer.from(GPTOSS_OPENAI_CHAT_TEMPLATE, 'utf8');
    expect(bytes.length).toBe(16738);
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(OPENAI_TEMPLATE_SHA256);
  });

  it('is the one the harmony GGUF carries', () => {
    const g = readGguf(ensureGptOssModel('gpt-oss-tiny', { dataDir: TEST_DATA_DIR, vocab: 'o200k-harmony' }));
    try {
      expect(g.optString('tokenizer.chat_template')).toBe(GPTOSS_OPENAI_CHAT_TEMPLATE);
    } finally {
      g.close();
    }
  }, 300_000);

  it("writes the local date at render time into the system message, so it changes at local midnight", () => {
    const template = new ChatTemplate(GPTOSS_OPENAI_CHAT_TEMPLATE);
    const render = () => template.render({ messages: [{ role: 'user', content: 'Hi' }], addGenerationPrompt: true });
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(new Date(2025, 2, 4, 23, 59, 59));
    const before = render();
    expect(before).toContain('\nCurrent date: 2025-03-04\n');
    expect(render()).toBe(before);
    vi.setSystemTime(new Date(2025, 2, 5, 0, 0, 1));
    expect(render()).toBe(before.replace('2025-03-04', '2025-03-05'));
  });
});
