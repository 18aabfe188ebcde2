// utf8Lead against the platform's strict UTF-8 decoder: for every lead byte,
// exactly the first continuation bytes it allows start a valid sequence.
import { describe, expect, it } from 'vitest';

import { leadHi, leadLo, leadRem, utf8Lead } from '../../../inference-core/grammar/utf8-lead.ts';

const strict = new TextDecoder('utf-8', { fatal: true });
const decodes = (bytes: number[]): boolean => {
  try {
    strict.decode(new Uint8Array(bytes));
    return true;
  } catch {
    return false;
  }
};

describe('utf8Lead', () => {
  it('matches a strict decoder for every byte and first continuation byte', () => {
    for (let c = 0x80; c <= 0xff; c++) {
      const u = utf8Lead(c);
      for (let d = 0x80; d <= 0xbf; d++) {
        const rem = u < 0 ? 1 : leadRem(u);
        const valid = decodes([c, d, ...Array<number>(rem - 1).fill(0x80)]);
        expect(u >= 0 && d >= leadLo(u) && d <= leadHi(u), `lead 0x${c.toString(16)} then 0x${d.toString(16)}`).toBe(valid);
      }
    }
  });
});
