/** Small vocabularies for grammar tests: every single byte, JSON-ish fragments, split UTF-8, escapes, and seeded random strings. */
import { Xoshiro128 } from '../../../inference-core/index.ts';
import type { TokenVocabulary } from '../../../inference-core/grammar/index.ts';

const enc = new TextEncoder();

export const FRAGMENTS = [
  '{"', '"}', '":', '",', '","', '{}', '[]', '[', ']', '},', '}]', ']}', '":"', '":{', '":[', '":1', 'true', 'false', 'null', 'tr', 'ue', 'nul',
  '12', '123', '0.', '.5', '-1', 'e+', 'E-', '00', '1e', '-0', 'abc', 'hello', ' world', 'name', '"name', 'age', '"age":', 'items', 'id', '"id":',
  '\\n', '\\"', '\\u00', '\\u', 'e9', 'D8', '\\\\', '\\', 'a"', '"a', 'x', 'xyz', '  ', '\n', '\t', 'ab"}', '1,', '1]', '"]', '"],', '},{"',
  '<tool_call>', '\n{"name": "', '"arguments": ', '}\n</tool_call>', '</tool_call>', 'é', 'ü', '中文', '😀', 'kind', '"kind":"', 'leaf', 'node', 'children',
];

export function smallVocab(seed = 1, randomCount = 200): TokenVocabulary & { pieces: Uint8Array[] } {
  const pieces: Uint8Array[] = [];
  for (let b = 0; b < 256; b++) pieces.push(Uint8Array.of(b));
  for (const f of FRAGMENTS) pieces.push(enc.encode(f));
  // Split UTF-8 characters across tokens (byte-level BPE does this).
  pieces.push(Uint8Array.of(0xc3), Uint8Array.of(0xa9, 0x22), Uint8Array.of(0xe4, 0xb8), Uint8Array.of(0xad, 0x61), Uint8Array.of(0xf0, 0x9f, 0x98));
  pieces.push(new Uint8Array(0)); // a control token: prints nothing
  const rng = new Xoshiro128(seed);
  const alphabet = '{}[]":,0123456789.-+eEabcdefnulltrsx \\/éü';
  for (let i = 0; i < randomCount; i++) {
    const len = 1 + (rng.nextU32() % 6);
    let s = '';
    for (let k = 0; k < len; k++) s += alphabet[rng.nextU32() % alphabet.length];
    pieces.push(enc.encode(s));
  }
  return { vocabSize: pieces.length, tokenToPiece: (id: number) => pieces[id], pieces };
}
