/**
 * SentencePiece merging word by word (the fast path) must give the ids of
 * merging the whole text at once; a vocabulary with a piece that spans a word
 * boundary ("a▁b") has to be merged whole.
 */
import { describe, expect, it } from 'vitest';
import { Tokenizer, TokenType } from '../../inference-core/index.ts';

function spm(tokens: string[], scores: number[]): Tokenizer {
  const types = new Int32Array(tokens.length).fill(TokenType.NORMAL);
  types[0] = TokenType.UNKNOWN;
  types[1] = TokenType.CONTROL;
  types[2] = TokenType.CONTROL;
  return new Tokenizer({ model: 'llama', tokens, tokenTypes: types, scores: Float32Array.from(scores), bosId: 1, eosId: 2, unkId: 0 });
}

describe('SentencePiece word independence', () => {
  const base = ['<unk>', '<s>', '</s>', '▁', 'a', 'b', '▁a', '▁b'];
  const baseScores = [0, 0, 0, -10, -10, -10, -2, -1];

  it('a piece spanning "a▁b" is reached by merging across the space', () => {
    const tok = spm([...base, 'a▁b'], [...baseScores, 0]);
    // ▁ a ▁ b → ▁ a ▁b (score -1) → ▁ a▁b (score 0): only possible when the words are merged together.
    expect(Array.from(tok.encode('a b', { addSpecial: false }))).toEqual([3, 8]);
  });

  it('without such a piece the words merge on their own, same ids as whole-text merging', () => {
    const tok = spm(base, baseScores);
    expect(Array.from(tok.encode('a b', { addSpecial: false }))).toEqual([6, 7]);
    expect(Array.from(tok.encode('a  b a', { addSpecial: false }))).toEqual([6, 3, 7, 6]);
  });
});
