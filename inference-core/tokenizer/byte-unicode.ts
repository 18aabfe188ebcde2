/**
 * GPT-2's byte ↔ unicode table: byte-level BPE vocabularies store each byte
 * as a printable code point (space → 'Ġ', newline → 'Ċ', …) so every token is
 * a valid string. Printable Latin-1 bytes map to themselves; the other 68
 * bytes map to U+0100 onwards, in byte order.
 */
export const BYTE_TO_UNICODE: readonly string[] = (() => {
  const out: string[] = new Array(256);
  let next = 256;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    out[b] = String.fromCodePoint(printable ? b : next++);
  }
  return out;
})();

export const UNICODE_TO_BYTE: ReadonlyMap<string, number> = new Map(BYTE_TO_UNICODE.map((ch, b) => [ch, b]));

const utf8Encoder = new TextEncoder();

/** UTF-8 bytes of `text`, each written as its byte-level code point. */
export function byteEncode(text: string): string {
  const bytes = utf8Encoder.encode(text);
  let out = '';
  for (let i = 0; i < bytes.length; i++) out += BYTE_TO_UNICODE[bytes[i]];
  return out;
}

/** Inverse of byteEncode, to raw bytes. Code points outside the table are UTF-8 encoded as-is (user-defined tokens). */
export function byteDecode(piece: string): Uint8Array {
  const out: number[] = [];
  for (const ch of piece) {
    const b = UNICODE_TO_BYTE.get(ch);
    if (b !== undefined) out.push(b);
    else for (const x of utf8Encoder.encode(ch)) out.push(x);
  }
  return Uint8Array.from(out);
}
