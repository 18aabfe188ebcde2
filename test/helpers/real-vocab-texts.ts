/**
 * Texts the real-vocabulary tokenizer tests encode with kvtier, llama.cpp and
 * Hugging Face tokenizers. Each has a label so a mismatch names its case.
 */
import { Xoshiro128 } from '../../inference-core/synthetic/index.ts';

function randomString(n: number, seed: number): string {
  // Printable ASCII, Latin-1, Greek, CJK, emoji and whitespace, drawn uniformly from a fixed alphabet.
  const alphabet = [
    ...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789',
    ...'!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~',
    ...'éüßñçøåÆœ', ...'αβγδλΩ', ...'中文字日本語한국', ...['😀', '👍🏽', '🚀'], ' ', ' ', '  ', '\t', '\n',
  ];
  const rng = new Xoshiro128(seed);
  let s = '';
  while ([...s].length < n) s += alphabet[rng.nextU32() % alphabet.length];
  return s;
}

function word500(): string {
  let s = '';
  const rng = new Xoshiro128(500);
  for (let i = 0; i < 500; i++) s += String.fromCharCode(97 + (rng.nextU32() % 26));
  return s;
}

export interface LabeledText {
  label: string;
  text: string;
  /** A special-token text whose ids parse_special does not change (no control token matches in it). */
  parseSpecialNoop?: true;
}

export const COMMON_TEXTS: LabeledText[] = [
  // code
  { label: 'python', text: 'def fib(n):\n    """Return the n-th Fibonacci number."""\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n' },
  { label: 'python tabs', text: 'class A:\n\tdef f(self, x):\n\t\tif x:\n\t\t\treturn {"k": [1, 2, 3]}\n\t\treturn None\n' },
  { label: 'js', text: "const r = items.filter((x) => x.enabled).map(({ value }) => value * 2);\nexport default async function main() { await r; }\n" },
  { label: 'ts generics', text: 'function id<T extends Record<string, unknown>>(x: T): T { return x; } // ok?\n' },
  { label: 'C', text: '#include <stdio.h>\n\nint main(int argc, char **argv) {\n\tfor (int i = 0; i < argc; ++i) {\n\t\tprintf("%d: %s\\n", i, argv[i]);\n\t}\n\treturn 0;\n}\n' },
  { label: 'json', text: '{"name": "kvtier", "version": "0.1.0", "deps": {"a": "^1.2.3"}, "ok": true, "n": null}' },
  { label: 'html', text: '<div class="x" id=\'y\'><a href="https://example.com/?q=1&r=2#frag">link</a></div>' },
  { label: 'shell', text: 'for f in *.txt; do grep -n "TODO" "$f" | awk -F: \'{print $1}\' >> /tmp/out.log 2>&1; done' },
  { label: 'sql', text: "SELECT id, name FROM users WHERE created_at >= '2026-01-01' AND role IN ('admin','dev') ORDER BY id DESC LIMIT 10;" },
  { label: 'markdown', text: '# Title\n\n- item **bold** _it_\n- `code` [link](http://x.y)\n\n```py\nprint(1)\n```\n' },
  // whitespace
  { label: 'spaces run', text: 'a  b   c    d     e' },
  { label: 'leading spaces', text: '     leading' },
  { label: 'trailing spaces', text: 'trailing     ' },
  { label: 'tabs', text: '\t\tx\t\t\ty\t' },
  { label: 'newlines', text: '\n\n\nx\n\ny\n' },
  { label: 'mixed whitespace', text: ' \t \n \r\n\t  \n\n   x  \t\n' },
  { label: 'CRLF', text: 'line1\r\nline2\r\n\r\nline3\rline4' },
  { label: 'only spaces', text: '        ' },
  { label: 'only newlines', text: '\n\n\n\n' },
  { label: 'space before newline', text: 'a \nb  \n\nc   \n' },
  { label: 'indented block', text: '    if x:\n        y = 1\n\n    z = 2\n' },
  { label: 'long space run', text: ' '.repeat(200) + 'x' + '\n'.repeat(50) + '\t'.repeat(40) },
  { label: 'exotic spaces', text: 'nbsp\u00a0ideo\u3000nel\u0085en\u2002em\u2003thin\u2009zwsp\u200bbom\ufeffend' },
  // numbers
  { label: 'numbers', text: '1 12 123 1234 12345 123456 1234567' },
  { label: 'decimals', text: 'pi = 3.14159, e = 2.71828, -0.5, +1e-10, 6.022e23' },
  { label: 'thousands', text: '1,000,000 and 1.000.000 and 1 000 000' },
  { label: 'dates', text: '2026-12-03 12:59:24 UTC, 03/12/2026, v1.2.3-rc.4' },
  { label: 'digits glued', text: 'abc123def4567ghi89 0x1F 0b1010 1st 2nd 3rd' },
  { label: 'phone', text: '+1 (555) 123-4567 ext. 89' },
  // scripts
  { label: 'CJK', text: '中文：今天天气很好，我们去公园散步吧。人工智能正在改变世界。' },
  { label: 'Japanese', text: '日本語の文章です。東京は大きな都市で、ひらがなとカタカナ（ｶﾀｶﾅ）を使います。' },
  { label: 'kana only', text: 'ひらがなカタカナーゔヴヷ' },
  { label: 'Korean', text: '한국어: 안녕하세요, 만나서 반갑습니다. 서울특별시' },
  { label: 'Arabic', text: 'مرحبا بالعالم، هذا اختبار للنص من اليمين إلى اليسار ١٢٣' },
  { label: 'Hebrew', text: 'שלום עולם, זה מבחן. עברית 123' },
  { label: 'Hindi Thai', text: 'नमस्ते दुनिया हिन्दी ภาษาไทย สวัสดี' },
  { label: 'Cyrillic Greek', text: 'Привет, мир! Ελληνικά γράμματα αβγ' },
  { label: 'accented', text: 'café crème brûlée naïve Zürich São Paulo Ærøskøbing Œuvre façade' },
  { label: 'combining marks', text: 'e\u0301 a\u0308 n\u0303 Å vs A\u030a' },
  // emoji
  { label: 'emoji', text: '😀 🚀 ✅ ❤️ 🎉🎉🎉' },
  { label: 'emoji skin tones', text: '👍🏻 👍🏽 👍🏿 🤝🏼' },
  { label: 'emoji ZWJ', text: '👨‍👩‍👧‍👦 👩‍💻 🏳️‍🌈 🧑🏽‍🚀' },
  { label: 'flags', text: '🇫🇷🇯🇵🇺🇸 🏴󠁧󠁢󠁳󠁣󠁴󠁿' },
  // symbols
  { label: 'symbols', text: '~ | $ ` ^ \\ @ # % & * _ + = < > { } [ ]' },
  { label: 'tilde runs', text: '~~tilde~~ ~x ~ ~~ ~/path ~$HOME' },
  { label: 'math', text: '∀x ∈ ℝ, x² ≥ 0; √2 ≈ 1.41421; ∑ᵢ aᵢ ≠ ∞ — “quotes” «guill» ‘single’ …' },
  { label: 'punct runs', text: '!!!??? ... --- ___ *** ,,, ;;; ::: ((( ))) \'\'\' """' },
  { label: 'contractions', text: "don't can't I'm you're we've they'll she'd It's I'LL WE'VE DON'T" },
  { label: 'detokenizer clean-up cases', text: "x ' ' y ' z it 's I 'm we 're you 've don 't I 'd we 'll ? ! . , end ." },
  { label: 'apostrophes', text: "rock 'n' roll, 'quoted', o'clock, ’curly’s" },
  // long
  { label: '500-letter word', text: word500() },
  { label: 'repeated word', text: 'Pneumonoultramicroscopicsilicovolcanoconiosis'.repeat(5) },
  { label: 'random 2000', text: randomString(2000, 2026) },
  { label: 'base64', text: 'aGVsbG8gd29ybGQgdGhpcyBpcyBhIGxvbmcgYmFzZTY0IHN0cmluZyB3aXRob3V0IGFueSBzcGFjZXM=' },
  { label: 'url', text: 'https://user:pass@example.co.uk:8443/a/b_c-d/e.html?x=1&y=%20z#top' },
  // edge
  { label: 'empty', text: '' },
  { label: 'single space', text: ' ' },
  { label: 'single char', text: 'x' },
  { label: 'single newline', text: '\n' },
  { label: 'replacement char', text: 'bad \ufffd bytes \ufffd\ufffd end' },
  { label: 'lone surrogate-free oddities', text: '\u0000\u0001\u007f\u0080\u00ad\u200d\u2028\u2029' },
  { label: 'private use', text: '\ue000\uf8ff\u{f0000}\u{10fffd}' },
  { label: 'lone surrogates', text: 'a\ud800b \udc00 \ud83d end \ud83d\ude00' },
  { label: 'byte-token look-alike', text: '<0x41> <0xFF> <0x0A>' },
  { label: 'prose', text: 'The quick brown fox jumps over the lazy dog. It\'s 5 o\'clock; "Really?" she asked.' },
];

/** Special and added tokens of each vocabulary, to write inside texts. */
export const SPECIAL_TEXTS: Record<string, LabeledText[]> = {
  llama3_1: [
    { label: 'header ids', text: '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>' },
    { label: 'special mid-word', text: 'abc<|eot_id|>def <|eot_id|> ghi<|reserved_special_token_5|>' },
    { label: 'broken special', parseSpecialNoop: true, text: '<|eot_id| <|eot_ id|> <|begin_of_text|' },
    { label: 'end_of_text', text: 'done<|end_of_text|> </s>' },
  ],
  qwen2_5: [
    { label: 'chatml', text: '<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n' },
    { label: 'tool_call (user-defined)', parseSpecialNoop: true, text: 'x<tool_call>\n{"name": "f"}\n</tool_call>y' },
    { label: 'fim', text: '<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>' },
    { label: 'promoted </s>', text: 'x </s> y</s>' },
    { label: 'broken special', text: '<|im_start| <|im_end|<|endoftext|>' },
  ],
  qwen3: [
    { label: 'chatml', text: '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello<|im_end|>' },
    { label: 'promoted </s> and fim pad', text: 'a</s>b <|fim_pad|> <|file_sep|>x<|repo_name|>' },
    { label: 'think (user-defined)', parseSpecialNoop: true, text: 'a<think>b</think>c <tool_response> </tool_response>' },
    { label: 'broken special', parseSpecialNoop: true, text: '<think <|im_start| </think >' },
  ],
  deepseek_v3: [
    { label: 'user/assistant', text: '<｜begin▁of▁sentence｜>You are helpful.<｜User｜>Hi<｜Assistant｜>Hello<｜end▁of▁sentence｜>' },
    { label: 'tool calls', text: '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>' },
    { label: 'fim', text: '<｜fim▁begin｜>def f():<｜fim▁hole｜>\n<｜fim▁end｜>' },
  ],
  gptoss: [
    { label: 'harmony turns', text: '<|start|>system<|message|>You are ChatGPT.<|end|><|start|>user<|message|>Hi 你好 👋<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|return|>' },
    { label: 'harmony tool call', text: '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>' },
    { label: 'bos/eot/reserved', text: '<|startoftext|>x<|endoftext|> <|endofprompt|><|reserved_200013|>' },
    { label: 'broken special', parseSpecialNoop: true, text: '<|start| <|channel|<|end |> <|return|' },
  ],
  gemma3: [
    { label: 'gemma turns', text: '<bos><start_of_turn>user\nYou are kind.\n\nHi 你好 👋<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n' },
    { label: 'image and eos', text: '<start_of_image><image_soft_token><end_of_image> done<eos><pad>' },
    { label: 'unused and mask', text: '<unused0>x<unused6241> <mask>[multimodal]' },
    { label: 'user-defined runs', parseSpecialNoop: true, text: 'a  b   c\n\n\nd\t\t<table><tr>    x' },
    { label: 'literal ▁▁', parseSpecialNoop: true, text: 'x▁▁y ▁▁▁ z' },
    { label: 'broken special', parseSpecialNoop: true, text: '<start_of_turn <end_of_turn <bos' },
  ],
  llama2: [
    { label: 'inst', text: '<s>[INST] Hello [/INST] Hi</s><s>[INST] again [/INST]' },
    { label: 'specials glued', text: 'a<s>b</s>c<unk>d' },
    { label: 'special then space', text: '<s> x</s>  y' },
  ],
};
