/**
 * The real-vocabulary GGUFs of test/helpers/real-vocab-gguf.ts are whole
 * models both engines run: kvtier's greedy continuation equals llama.cpp's
 * (full load, weights included) on each vocabulary.
 *
 * llama.cpp's continuations come from one reference process for all the
 * vocabularies (llamaBatch): its start (~3 s of CPU) is paid once, not once
 * per vocabulary.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { loadEngine } from '../../inference-core/engine/index.ts';
import { llamaBatch } from '../helpers/llamacpp.ts';
import { buildRealVocabGguf, REAL_VOCAB_NAMES, type RealVocabName } from '../helpers/real-vocab-gguf.ts';
import { greedyFrom } from './engine-fixtures.ts';

const PROMPT = 'Hello world, this is a test of the real vocabulary.';
const N_PREDICT = 6;

interface Continuations {
  mine: number[];
  ref: { tokens: number[]; margins: number[] };
}

const byName = new Map<RealVocabName, Continuations>();

beforeAll(async () => {
  const runs: Array<{ name: RealVocabName; file: string; ids: number[]; mine: number[] }> = [];
  for (const name of REAL_VOCAB_NAMES) {
    const file = buildRealVocabGguf(name);
    const eng = await loadEngine(file, { threads: 1, poolBytes: 8 * 2 ** 20 });
    try {
      const ids = Array.from(eng.tokenizer.encode(PROMPT));
      const seq = eng.createSequence();
      runs.push({ name, file, ids, mine: greedyFrom(seq, seq.prefill(ids), N_PREDICT) });
    } finally {
      eng.destroy();
    }
  }
  const refs = await llamaBatch(runs.map((run) => ({ op: 'greedy' as const, modelPath: run.file, tokens: run.ids, nPredict: N_PREDICT, threads: 1 })));
  runs.forEach((run, i) => byName.set(run.name, { mine: run.mine, ref: { tokens: refs[i].tokens!, margins: refs[i].margins! } }));
}, 600_000);

describe.each(REAL_VOCAB_NAMES.map((name) => ({ name })))('real-vocabulary GGUF $name', ({ name }) => {
  it('loads in kvtier and llama.cpp, and both continue a prompt with the same greedy tokens', () => {
    const { mine, ref } = byName.get(name)!;
    // Compare up to the first near-tie of llama.cpp's top two logits (rounding may pick either there).
    let n = ref.margins.findIndex((m) => m < 0.01);
    if (n < 0) n = ref.tokens.length;
    expect(n).toBeGreaterThan(0);
    expect(mine.slice(0, n)).toEqual(ref.tokens.slice(0, n));
    expect(new Set(mine).size).toBeGreaterThan(1); // not a degenerate repeat of one token
  });
});
