/**
 * MTP drafting on deepseek4 (KVTIER_SPECULATIVE=mtp's path: SpeculativeSession
 * mode 'mtp', adaptive length, at most 7 drafts as served): greedy decode with
 * drafting vs a plain engine, same file, same prompt, same thread count,
 * alternating off/on rounds (best of each) so machine load hits both alike.
 *
 *   mtp_adaptive_over_off         decode tok/s with drafting / without (target ≥ 0.97 on random weights)
 *   mtp_adaptive_over_off_cpu     the same from the process's CPU time per token (user + system, all
 *                                 threads): what the work costs, less swayed by other processes' load
 *   mtp_accepted_per_verification accepted drafts per verification (mean accepted length)
 *   mtp_tokens_per_step           tokens emitted per target forward
 *   mtp_prefill_over_off          prefill tok/s with the MTP window fed along / without
 *   mtp_greedy_same               the two runs emitted the same tokens
 */
import { argmax, loadEngine } from '../inference-core/index.ts';
import { SpeculativeSession } from '../inference-core/speculative/index.ts';

export interface MtpFigures {
  offTps: number;
  onTps: number;
  /** tokens per CPU-second, best round */
  offCpuTps: number;
  onCpuTps: number;
  acceptedPerVerification: number;
  tokensPerStep: number;
  prefillOverOff: number;
  same: boolean;
}

/** Wall and CPU seconds of `f`. */
function timed(f: () => void): { wall: number; cpu: number } {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  f();
  const c = process.cpuUsage(c0);
  return { wall: (performance.now() - t0) / 1000, cpu: (c.user + c.system) / 1e6 };
}

/** `promptOf`: the prompt, or how to make it from the model's vocabulary size. */
export async function measureMtp(modelPath: string, threads: number, promptOf: number[] | ((vocab: number) => number[]), decodeTokens: number, rounds = 3): Promise<MtpFigures> {
  const off = await loadEngine(modelPath, { threads, poolBytes: 64 * 2 ** 20 });
  const on = await loadEngine(modelPath, { threads, poolBytes: 64 * 2 ** 20, mtp: true });
  try {
    const prompt = typeof promptOf === 'function' ? promptOf(off.vocabSize) : promptOf;
    let offTps = 0;
    let onTps = 0;
    let offCpuTps = 0;
    let onCpuTps = 0;
    let offPrefill = 0;
    let onPrefill = 0;
    let same = true;
    const stats = { verifications: 0, accepted: 0, emitted: 0, steps: 0 };
    for (let r = 0; r < rounds; r++) {
      const a = off.createSequence();
      let logits: Float32Array = new Float32Array(0);
      offPrefill = Math.max(offPrefill, prompt.length / timed(() => (logits = a.prefill(prompt))).wall);
      const plain: number[] = [];
      const td = timed(() => {
        for (let i = 0; i < decodeTokens; i++) {
          plain.push(argmax(logits));
          logits = a.decode(plain[i]!);
        }
      });
      offTps = Math.max(offTps, decodeTokens / td.wall);
      offCpuTps = Math.max(offCpuTps, decodeTokens / td.cpu);
      a.free();

      const b = on.createSequence();
      let first = 0;
      onPrefill = Math.max(onPrefill, prompt.length / timed(() => (first = argmax(b.prefill(prompt)))).wall);
      const got = [first];
      let session: SpeculativeSession | null = null;
      const ts = timed(() => {
        session = new SpeculativeSession({ target: b, context: [...prompt, first], sampling: { temperature: 0 }, mode: 'mtp', length: { mode: 'adaptive', maxDraft: 7 } });
        // decodeTokens forwards' worth of tokens, as the plain run (its last decode feeds the last token)
        while (got.length <= decodeTokens) got.push(...session.next(decodeTokens + 1 - got.length));
      });
      onTps = Math.max(onTps, decodeTokens / ts.wall);
      onCpuTps = Math.max(onCpuTps, decodeTokens / ts.cpu);
      same &&= got.slice(0, decodeTokens).join() === plain.join();
      for (const k of ['verifications', 'accepted', 'emitted', 'steps'] as const) stats[k] += session!.stats[k];
      b.free();
    }
    return {
      offTps, onTps, offCpuTps, onCpuTps,
      acceptedPerVerification: stats.verifications > 0 ? stats.accepted / stats.verifications : 0,
      tokensPerStep: stats.emitted / Math.max(1, stats.steps),
      prefillOverOff: onPrefill / offPrefill,
      same,
    };
  } finally {
    off.destroy();
    on.destroy();
  }
}
