/**
 * Pre-tokenizers: split text into words before BPE, with the regexes
 * llama.cpp's llama-vocab.cpp uses for each `tokenizer.ggml.pre`.
 *
 * Differences from the original (Python/Rust) regexes that llama.cpp has and
 * we reproduce so token ids match llama.cpp exactly:
 *  - `(?i:'s|'t|…)` is written out as `'[sS]|'[tT]|…` (V8 in Node 20 has no
 *    inline modifiers).
 *  - `\s` is llama.cpp's whitespace set (includes U+0085, excludes U+FEFF),
 *    not JavaScript's.
 *  - A pre-tokenizer with several regexes applies them in turn: each one
 *    splits every piece left by the previous into matches and the gaps
 *    between them, and a regex sees only the piece it splits (lookaheads stop
 *    at the piece's end).
 */
export type PreTokenizerName = 'llama-bpe' | 'qwen2' | 'deepseek-v3' | 'gpt-4o';

const WS = '\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const S = `[${WS}]`;
const NS = `[^${WS}]`;
const CONTRACTIONS = "'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]";

function llama3Like(digits: string): string {
  return (
    `(?:${CONTRACTIONS})|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}${digits}| ?[^${WS}\\p{L}\\p{N}]+[\\r\\n]*|${S}*[\\r\\n]+|${S}+(?!${NS})|${S}+`
  );
}

// ASCII '~' counts as \p{S} here: llama.cpp (node-llama-cpp 3.21.1) makes "~/" and " ~~" one
// piece each, as Hugging Face does (checked on DeepSeek V3's real vocabulary).
const PS = '[\\p{P}\\p{S}]';
const NOT_L_PS = '[^\\r\\n\\p{L}\\p{P}\\p{S}]';

// gpt-4o (o200k, gpt-oss's o200k_harmony): llama.cpp rewrites tokenizer.json's letter classes
// [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]* / [\p{Ll}\p{Lm}\p{Lo}\p{M}]+ as "a letter but not a-z" /
// "a letter but not A-Z" (its regex engine has no sub-categories): every letter outside ASCII
// counts as both cases, and combining marks (\p{M}) are not letters there. Reproduced as written
// so ids match llama.cpp; where HF's split differs (marks, some non-ASCII case runs) llama.cpp wins.
const NOT_LOWER = '(?:(?=\\p{L})[^a-z])';
const NOT_UPPER = '(?:(?=\\p{L})[^A-Z])';
const GPT4O_CONTRACTIONS = `(?:${CONTRACTIONS})?`;
const GPT4O =
  `[^\\r\\n\\p{L}\\p{N}]?${NOT_LOWER}*${NOT_UPPER}+${GPT4O_CONTRACTIONS}|[^\\r\\n\\p{L}\\p{N}]?${NOT_LOWER}+${NOT_UPPER}*${GPT4O_CONTRACTIONS}` +
  `|\\p{N}{1,3}| ?[^${WS}\\p{L}\\p{N}]+[\\r\\n/]*|${S}*[\\r\\n]+|${S}+(?!${NS})|${S}+`;

const REGEXES: Record<PreTokenizerName, RegExp[]> = {
  'llama-bpe': [new RegExp(llama3Like('{1,3}'), 'gu')],
  qwen2: [new RegExp(llama3Like(''), 'gu')],
  'deepseek-v3': [
    /\p{N}{1,3}/gu,
    /[一-龥぀-ゟ゠-ヿ]+/gu,
    new RegExp(
      `[!"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_\`{|}~][A-Za-z]+|${NOT_L_PS}?[\\p{L}\\p{M}]+| ?${PS}+[\\r\\n]*|${S}*[\\r\\n]+|${S}+(?!${NS})|${S}+`,
      'gu',
    ),
  ],
  'gpt-4o': [new RegExp(GPT4O, 'gu')],
};

export const PRE_TOKENIZER_NAMES: readonly PreTokenizerName[] = ['llama-bpe', 'qwen2', 'deepseek-v3', 'gpt-4o'];

export function isPreTokenizerName(name: string): name is PreTokenizerName {
  return (PRE_TOKENIZER_NAMES as readonly string[]).includes(name);
}

function splitOne(piece: string, re: RegExp, out: string[]): void {
  re.lastIndex = 0;
  let last = 0;
  for (let m = re.exec(piece); m !== null; m = re.exec(piece)) {
    if (m.index > last) out.push(piece.slice(last, m.index));
    out.push(m[0]);
    last = m.index + m[0].length;
    if (m[0].length === 0) re.lastIndex++;
  }
  if (last < piece.length) out.push(piece.slice(last));
}

export function preTokenize(text: string, name: PreTokenizerName): string[] {
  let pieces = [text];
  for (const re of REGEXES[name]) {
    const next: string[] = [];
    for (const p of pieces) splitOne(p, re, next);
    pieces = next;
  }
  return pieces;
}
