/**
 * The real-vocabulary GGUFs of test/helpers/real-vocab-gguf.ts are whole
 * models both engines run: kvtier's greedy continuation equals llama.cpp's
 * (full load, weights included) on each vocabulary.
 */
import { describe, expect, it } from 'vitest';
import { loadEngine } from '../../inference-core/engine/index.ts';
import { llamaGreedy } from '../helpers/llamacpp.ts';
import { buildRealVocabGguf, REAL_VOCAB_NAMES } from '../helpers/real-vocab-gguf.ts';
import { greedyFrom } from './engine-fixtures.ts';

describe.each(REAL_VOCAB_NAMES.map((name) => ({ name })))('real-vocabulary GGUF $name', ({ name }) => {
  it('loads in kvtier and llama.cpp, and both continue a prompt with the same greedy tokens', async () => {
    const file = buildRealVocabGguf(name);
    const eng = await loadEngine(file, { threads: 1, poolBytes: 8 * 2 ** 20 });
    const ids = Array.from(eng.tokenizer.encode('Hello world, this is a test of the real vocabulary.'));
    let mine: number[];
    try {
      const seq = eng.createSequence();
      mine = greedyFrom(seq, seq.prefill(ids), 6);
    } finally {
      eng.destroy();
    }
    const ref = await llamaGreedy({ modelPath: file, tokens: ids, nPredict: 6, threads: 1 });
    // Compare up to the first near-tie of llama.cpp's top two logits (rounding may pick either there).
    let n = ref.margins.findIndex((m) => m < 0.01);
    if (n < 0) n = ref.tokens.length;
    expect(n).toBeGreaterThan(0);
    expect(mine.slice(0, n)).toEqual(ref.tokens.slice(0, n));
    expect(new Set(mine).size).toBeGreaterThan(1); // not a degenerate repeat of one token
  }, 180_000);
});
