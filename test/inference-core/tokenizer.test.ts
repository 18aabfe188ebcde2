import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CORPUS_DIR, Tokenizer, TokenizerError, ensureSyntheticModel, readGguf, type SyntheticOptions } from '../../inference-core/index.ts';
import { llamaCppTokenizeMany } from '../helpers/llamacpp-tokenize.ts';

let dataDir: string;
beforeAll(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvtier-tok-'));
});
afterAll(() => {
  fs.rmSync(dataDir, { recursive: true, force: true });
});

const STRINGS = [
  'Hello world',
  'The quick brown fox jumps over the lazy dog.',
  // contractions, both cases
  "don't can't I'm you're we've they'll she'd It's I'LL WE'VE",
  // digits: groups of 1 / 3 depending on the pre-tokenizer
  '0 12 345 6789 1234567890 3.14159 -42 1e-5 2024-01-31 $1,000,000.00',
  // whitespace runs, tabs, newlines, CRLF, trailing spaces
  '  leading', 'trailing   ', 'a  b   c    d', '\n\n\nx\n', 'tab\there\t\tand\r\nCRLF\rCR', '    \n    indented\n\t\tcode  \n',
  // Unicode: accents, CJK, Hangul, RTL, emoji (with ZWJ and flags), math, exotic whitespace
  'café crème brûlée naïve Zürich São Paulo Ærøskøbing',
  '日本語の文章です。東京は大きな都市で、毎日たくさんの人が電車に乗ります。',
  '中文：今天天气很好，我们去公园散步吧。한국어: 안녕하세요',
  'مرحبا بالعالم עברית हिन्दी ไทย',
  '😀 🚀 👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️ ✅',
  '∀x ∈ ℝ, x² ≥ 0; √2 ≈ 1.41421 — “quotes” «guillemets» ‘single’ …',
  'nbsp\u00a0ideographic\u3000nel\u0085bom\ufeffzwsp\u200bend',
  // code
  'function f(x: number): number {\n  return x ** 2; // square\n}\n',
  'const r = items.filter((x) => x.enabled).map((x) => x.value * 2);',
  'def main(argv):\n    print(f"{count:6d} {word}")\n    return 0\n',
  '#include <stdio.h>\nint main(void) { printf("%d\\n", 42); }',
  '~~tilde~~ ~x ~ ~~ @user #tag a&&b a||b a!==b <div class="x">',
  // special tokens (only split out with parseSpecial)
  '<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n',
  'text<|endoftext|>more<|im_end|><|im_end|> <|im_start|>',
  '<s> </s> <unk> <0x41> half <|im_sta rt|>',
  '',
  ' ',
  'x',
  // long words (> 64 bytes: the BPE heap path), long whitespace runs
  'a'.repeat(300),
  'Pneumonoultramicroscopicsilicovolcanoconiosis'.repeat(4) + ' supercalifragilisticexpialidocious',
  ' '.repeat(150) + 'x' + '\n'.repeat(80) + '\t'.repeat(70),
  'aGVsbG8gd29ybGQgdGhpcyBpcyBhIGxvbmcgYmFzZTY0IHN0cmluZyB3aXRob3V0IGFueSBzcGFjZXMgaW4gaXQ',
  '東京大阪京都名古屋札幌福岡神戸横浜川崎広島仙台千葉北九州堺浜松新潟熊本相模原岡山静岡',
];

const corpus = (name: string) => fs.readFileSync(path.join(CORPUS_DIR, name), 'utf8');

const VARIANTS: Array<{ label: string; options: Partial<SyntheticOptions> }> = [
  { label: 'byte-level BPE, pre qwen2', options: { pre: 'qwen2' } },
  { label: 'byte-level BPE, pre llama-bpe', options: { pre: 'llama-bpe' } },
  { label: 'byte-level BPE, pre deepseek-v3', options: { pre: 'deepseek-v3' } },
  { label: 'SentencePiece (llama)', options: { tokenizer: 'spm' } },
  // The small model's 8192-token vocabularies (many long merges; llama-bpe's ignore_merges matters here).
  { label: 'byte-level BPE 8k, pre qwen2', options: { pre: 'qwen2', overrides: { vocabSize: 8192 } } },
  { label: 'byte-level BPE 8k, pre llama-bpe', options: { pre: 'llama-bpe', overrides: { vocabSize: 8192 } } },
  { label: 'byte-level BPE 8k, pre deepseek-v3', options: { pre: 'deepseek-v3', overrides: { vocabSize: 8192 } } },
  { label: 'SentencePiece 4k (llama)', options: { tokenizer: 'spm', overrides: { vocabSize: 4096 } } },
];

/** Every variant's file and llama.cpp's ids of `items` on it. */
const variantRefs = new Map<string, { file: string; tokens: number[][] }>();
let items: Array<{ text: string; parseSpecial: boolean }> = [];
beforeAll(async () => {
  const long = [corpus('unicode.txt'), corpus('code.txt'), corpus('prose.txt').slice(0, 6000)];
  items = [...STRINGS, ...long].flatMap((text) => [
    { text, parseSpecial: false },
    { text, parseSpecial: true },
  ]);
  const files = VARIANTS.map(({ options }) => ensureSyntheticModel('tiny', { dataDir, weightType: 'f32', progress: null, ...options }));
  (await llamaCppTokenizeMany(files.map((modelPath) => ({ modelPath, items })))).forEach((ref, i) => variantRefs.set(VARIANTS[i].label, { file: files[i], tokens: ref.tokens }));
}, 600_000);

describe.each(VARIANTS)('$label: identical ids to llama.cpp', ({ label }) => {
  it('on the test strings and on corpus text, with and without parseSpecial', () => {
    const { file, tokens } = variantRefs.get(label)!;
    const tok = Tokenizer.fromGguf(readGguf(file));
    const mismatches: string[] = [];
    items.forEach((it, i) => {
      const ours = Array.from(tok.encode(it.text, { addSpecial: false, parseSpecial: it.parseSpecial }));
      if (JSON.stringify(ours) !== JSON.stringify(tokens[i])) {
        mismatches.push(`${JSON.stringify(it.text.slice(0, 60))} parseSpecial=${it.parseSpecial}\n ours ${ours.join(' ')}\n ref  ${tokens[i].join(' ')}`);
      }
    });
    expect(mismatches).toEqual([]);
    // The specials really are single tokens with parseSpecial, and text without it.
    const chat = STRINGS.find((s) => s.startsWith('<|im_start|>system'))!;
    const withSpecial = tok.encode(chat, { addSpecial: false, parseSpecial: true });
    const asText = tok.encode(chat, { addSpecial: false, parseSpecial: false });
    const imStart = tok.tokenId('<|im_start|>')!;
    expect(Array.from(withSpecial).filter((t) => t === imStart).length).toBe(3);
    expect(Array.from(asText)).not.toContain(imStart);
  });
});

describe('encode / decode behaviour', () => {
  let bpe: Tokenizer;
  let spm: Tokenizer;
  beforeAll(() => {
    bpe = Tokenizer.fromGguf(readGguf(ensureSyntheticModel('tiny', { dataDir, weightType: 'f32', progress: null })));
    spm = Tokenizer.fromGguf(readGguf(ensureSyntheticModel('tiny', { dataDir, weightType: 'f32', tokenizer: 'spm', progress: null })));
  });

  it('round-trips every test string through decode', () => {
    for (const s of STRINGS) {
      expect(bpe.decode(bpe.encode(s, { addSpecial: false }))).toBe(s);
      expect(spm.decode(spm.encode(s, { addSpecial: false }), { stripLeadingSpace: true })).toBe(s);
    }
  });

  it('exposes special ids, vocab size, add_bos and EOG tokens from the metadata', () => {
    expect(bpe.vocabSize).toBe(512);
    expect(bpe.model).toBe('gpt2');
    expect(bpe.pre).toBe('qwen2');
    expect(bpe.tokenText(bpe.bosId!)).toBe('<|endoftext|>');
    expect(bpe.tokenText(bpe.eosId!)).toBe('<|im_end|>');
    expect(bpe.addBos).toBe(false);
    expect(bpe.isEog(bpe.tokenId('<|im_end|>')!)).toBe(true);
    expect(bpe.isEog(bpe.tokenId('<|endoftext|>')!)).toBe(true);
    expect(bpe.isEog(bpe.tokenId('<|im_start|>')!)).toBe(false);
    expect(Array.from(bpe.encode('hi', { addSpecial: true }))).toEqual(Array.from(bpe.encode('hi', { addSpecial: false })));

    expect(spm.model).toBe('llama');
    expect(spm.addBos).toBe(true);
    expect(spm.tokenText(spm.bosId!)).toBe('<s>');
    const ids = spm.encode('hi', { addSpecial: true });
    expect(ids[0]).toBe(spm.bosId);
    expect(spm.isEog(spm.tokenId('<|im_end|>')!)).toBe(true);
  });

  it('decodes control tokens only when asked, and rejects bad ids', () => {
    const ids = bpe.encode('<|im_start|>user\nhi<|im_end|>', { addSpecial: false, parseSpecial: true });
    expect(bpe.decode(ids)).toBe('user\nhi');
    expect(bpe.decode(ids, { renderSpecial: true })).toBe('<|im_start|>user\nhi<|im_end|>');
    expect(() => bpe.decode([512])).toThrow(TokenizerError);
    expect(() => bpe.tokenToPiece(-1)).toThrow(/KVT_ERR_TOKENIZER_BAD_TOKEN_ID/);
  });

  it('uses byte fallback for characters outside the SPM vocabulary', () => {
    const ids = Array.from(spm.encode('🦀', { addSpecial: false }));
    const bytes = ids.filter((id) => /^<0x[0-9A-F]{2}>$/.test(spm.tokenText(id)));
    expect(bytes.length).toBe(4);
    expect(spm.decode(ids, { stripLeadingSpace: true })).toBe('🦀');
  });

  it('streams multi-byte characters split across tokens without U+FFFD mid-stream', () => {
    const text = 'Ein 🦀 und 東京 — “ok” 👨‍👩‍👧‍👦!';
    for (const tok of [bpe, spm]) {
      const ids = tok.encode(text, { addSpecial: false });
      // The tiny vocabulary has no merges for these code points: they arrive as single bytes.
      const pieces = Array.from(ids).map((id) => tok.tokenToPiece(id));
      expect(pieces.some((p) => p.length === 1 && p[0] >= 0x80)).toBe(true);
      const d = tok.createDetokenizer({ stripLeadingSpace: tok === spm });
      const chunks: string[] = [];
      for (const id of ids) chunks.push(d.push(id));
      chunks.push(d.flush());
      for (const c of chunks) expect(c).not.toContain('\ufffd');
      expect(chunks.join('')).toBe(text);
      expect(chunks.filter((c) => c === '').length).toBeGreaterThan(0);
    }
  });

  it('flushes an unfinished character as U+FFFD at the end of the stream', () => {
    const ids = Array.from(bpe.encode('😀', { addSpecial: false }));
    const d = bpe.createDetokenizer();
    let s = '';
    for (const id of ids.slice(0, -1)) s += d.push(id);
    expect(s).toBe('');
    expect(d.flush()).toBe('\ufffd');
  });

  it('tokenizes ~20k tokens of text consistently with per-word caching', () => {
    const text = corpus('generated.txt').slice(0, 80_000);
    const a = bpe.encode(text, { addSpecial: false });
    const b = bpe.encode(text, { addSpecial: false });
    expect(a.length).toBeGreaterThan(20_000);
    expect(Array.from(b)).toEqual(Array.from(a));
    expect(bpe.decode(a)).toBe(text);
  });
});
