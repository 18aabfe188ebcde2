/**
 * Model-file benchmarks (inference-core: GGUF, tokenizer, synthetic models,
 * fingerprint). Baselines measured in the same run:
 *  - tokenizer: llama.cpp's tokenizer (node-llama-cpp, own process, tokenize calls only) on the same text
 *  - GGUF open: mmap vs reading the whole file
 *  - fingerprint: hashing throughput vs a plain sequential read of the file
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { CORPUS_DIR, Tokenizer, ensureSyntheticModel, modelFingerprint, readGguf } from '../inference-core/index.ts';
import { llamaCppTokenize } from '../test/helpers/llamacpp-tokenize.ts';

function best(n: number, fn: () => void): number {
  let min = Infinity;
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    fn();
    min = Math.min(min, performance.now() - t);
  }
  return min;
}

export async function run(): Promise<Record<string, number | string>> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvtier-bench-mf-'));
  const out: Record<string, number | string> = {};
  try {
    const say = (s: string) => process.stderr.write(`[model-files] ${s}\n`);
    say('generating synthetic:small (f16, q8_0, q4_k_m)');
    let t = performance.now();
    const smallF16 = ensureSyntheticModel('small', { dataDir, weightType: 'f16', progress: null });
    out.synthetic_small_f16_generate_s = (performance.now() - t) / 1000;
    t = performance.now();
    ensureSyntheticModel('small', { dataDir, weightType: 'q8_0', progress: null });
    out.synthetic_small_q8_0_generate_s = (performance.now() - t) / 1000;
    t = performance.now();
    const smallQ4km = ensureSyntheticModel('small', { dataDir, weightType: 'q4_k_m', progress: null });
    out.synthetic_small_q4_k_m_generate_s = (performance.now() - t) / 1000;
    {
      // bits per weight over the tensor data (llama.cpp's Q4_K_M of this shape: ≈4.9)
      const g = readGguf(smallQ4km);
      let bytes = 0;
      let n = 0;
      for (const tensor of g.tensors.values()) {
        bytes += tensor.byteLength;
        n += tensor.elements;
      }
      g.close();
      out.synthetic_small_q4_k_m_bits_per_weight = (bytes * 8) / n;
      out.synthetic_small_q4_k_m_file_mib = fs.statSync(smallQ4km).size / 2 ** 20;
    }
    t = performance.now();
    ensureSyntheticModel('small', { dataDir, weightType: 'f16', progress: null });
    out.synthetic_small_reuse_ms = performance.now() - t;

    out.gguf_open_mmap_ms = best(3, () => readGguf(smallF16).close());
    out.gguf_open_read_ms = best(3, () => readGguf(smallF16, { mmap: false }).close());
    out.gguf_open_read_over_mmap = out.gguf_open_read_ms / out.gguf_open_mmap_ms;

    const g = readGguf(smallF16);
    const bytes = fs.statSync(smallF16).size;
    t = performance.now();
    await modelFingerprint(g, { kvDtype: 'f16', cache: false });
    const hashMs = performance.now() - t;
    const readMs = best(2, () => fs.readFileSync(smallF16));
    out.fingerprint_hash_gb_s = bytes / 1e9 / (hashMs / 1000);
    out.file_read_gb_s = bytes / 1e9 / (readMs / 1000);
    await modelFingerprint(g, { kvDtype: 'f16' }); // writes the sidecar
    t = performance.now();
    await modelFingerprint(g, { kvDtype: 'f16' });
    out.fingerprint_cached_ms = performance.now() - t;

    const text = ['prose.txt', 'code.txt', 'unicode.txt'].map((f) => fs.readFileSync(path.join(CORPUS_DIR, f), 'utf8')).join('\n') + fs.readFileSync(path.join(CORPUS_DIR, 'generated.txt'), 'utf8').slice(0, 60_000);
    for (const [label, file] of [
      ['bpe8k_qwen2', smallF16],
      ['spm4k', ensureSyntheticModel('tiny', { dataDir, weightType: 'f16', tokenizer: 'spm', overrides: { vocabSize: 4096 }, progress: null })],
    ] as const) {
      const tok = Tokenizer.fromGguf(readGguf(file));
      t = performance.now();
      const ids = tok.encode(text, { addSpecial: false });
      out[`tok_${label}_cold_ms`] = performance.now() - t;
      out[`tok_${label}_tokens`] = ids.length;
      out[`tok_${label}_warm_ms`] = best(5, () => tok.encode(text, { addSpecial: false }));
      out[`tok_${label}_decode_ms`] = best(5, () => tok.decode(ids));
      say(`llama.cpp tokenizer on ${label}`);
      const ref = await llamaCppTokenize(file, [1, 2, 3, 4, 5].map(() => ({ text, parseSpecial: false })));
      out[`tok_${label}_llamacpp_ms`] = ref.tokenizeMs / 5;
      out[`tok_${label}_llamacpp_over_ours_warm`] = ref.tokenizeMs / 5 / (out[`tok_${label}_warm_ms`] as number);
      out[`tok_${label}_same_ids_as_llamacpp`] = JSON.stringify(ref.tokens[0]) === JSON.stringify(Array.from(ids)) ? 'yes' : 'NO';
    }
    g.close();
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
  return out;
}
