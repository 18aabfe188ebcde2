/**
 * UTF-8 lead bytes as RFC 3629 allows them (no overlong forms, no surrogates,
 * nothing past U+10FFFF): how many continuation bytes follow, and the range
 * the first of them must fall in (the later ones are always 0x80..0xbf).
 * One table for the grammar's byte walkers (grammar-frames, string-body-table,
 * vocab-index), which each had their own copy.
 *
 * Packed in one number so the per-byte paths allocate nothing:
 * rem | lo << 8 | hi << 16, or -1 when c is not a lead byte (ASCII, a
 * continuation byte, 0xc0, 0xc1, 0xf5..0xff).
 */
export function utf8Lead(c: number): number {
  if (c >= 0xc2 && c <= 0xdf) return 1 | (0x80 << 8) | (0xbf << 16);
  if (c >= 0xe0 && c <= 0xef) return 2 | ((c === 0xe0 ? 0xa0 : 0x80) << 8) | ((c === 0xed ? 0x9f : 0xbf) << 16);
  if (c >= 0xf0 && c <= 0xf4) return 3 | ((c === 0xf0 ? 0x90 : 0x80) << 8) | ((c === 0xf4 ? 0x8f : 0xbf) << 16);
  return -1;
}

/** The continuation bytes still due after lead byte `c` (utf8Lead's packed value). */
export const leadRem = (u: number): number => u & 0xff;
/** The lowest allowed first continuation byte. */
export const leadLo = (u: number): number => (u >> 8) & 0xff;
/** The highest allowed first continuation byte. */
export const leadHi = (u: number): number => u >> 16;
