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
 *   mtp_adaptive_over_plain_same_engine  drafting / plain decode on the MTP engine itself: the
 *                                 drafting's own cost, without the two engine instances' difference
 *                                 (two identical plain engines differ by up to ~5 % run to run here)
 */
import { argmax, loadEngine } from '../inference-core/index.ts';
import { SpeculativeSession } from '../inference-core/speculative/index.ts';

export interface MtpFigures {
  offTps: number;
  onTps: number;
  /** tokens per CPU-second, best round */
  offCpuTps: number;
  onCpuTps: number;
  /** plain greedy decode on the MTP engine (no drafting), best round */
  onPlainTps: number;
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
    // Each figure is the best of the rounds: the one least disturbed by other load on the machine.
    const best = { offTps: 0, onTps: 0, offCpuTps: 0, onCpuTps: 0, offPrefill: 0, onPrefill: 0, onPlainTps: 0 };
    let same = true;
    const stats = { verifications: 0, accepted: 0, checkHits: 0, emitted: 0, steps: 0 };
    for (let r = 0; r < rounds; r++) {
      const a = off.createSequence();
      let logits: Float32Array = new Float32Array(0);
      const offPrefill = prompt.length / timed(() => (logits = a.prefill(prompt))).wall;
      const plain: number[] = [];
      const td = timed(() => {
        for (let i = 0; i < decodeTokens; i++) {
          plain.push(argmax(logits));
          logits = a.decode(plain[i]!);
        }
      });
      a.free();

      const b = on.createSequence();
      let first = 0;
      const onPrefill = prompt.length / timed(() => (first = argmax(b.prefill(prompt)))).wall;
      const got = [first];
      let session: SpeculativeSession | null = null;
      const ts = timed(() => {
        session = new SpeculativeSession({ target: b, context: [...prompt, first], sampling: { temperature: 0 }, mode: 'mtp', length: { mode: 'adaptive', maxDraft: 7 } });
        // decodeTokens forwards' worth of tokens, as the plain run (its last decode feeds the last token)
        while (got.length <= decodeTokens) got.push(...session.next(decodeTokens + 1 - got.length));
      });
      b.free();

      const c = on.createSequence();
      let plainLogits = c.prefill(prompt);
      const tp = timed(() => {
        for (let i = 0; i < decodeTokens; i++) plainLogits = c.decode(argmax(plainLogits));
      });
      c.free();
      const round = { offTps: decodeTokens / td.wall, onTps: decodeTokens / ts.wall, offCpuTps: decodeTokens / td.cpu, onCpuTps: decodeTokens / ts.cpu, offPrefill, onPrefill, onPlainTps: decodeTokens / tp.wall };
      for (const k of Object.keys(best) as Array<keyof typeof best>) best[k] = Math.max(best[k], round[k]);
      same &&= got.slice(0, decodeTokens).join() === plain.join();
      for (const k of ['verifications', 'accepted', 'checkHits', 'emitted', 'steps'] as const) stats[k] += session!.stats[k];
    }
    return {
      offTps: best.offTps, onTps: best.onTps, offCpuTps: best.offCpuTps, onCpuTps: best.onCpuTps, onPlainTps: best.onPlainTps,
      // a probe's token is checked against a plain step's row, not verified: its hit is no accepted length
      acceptedPerVerification: stats.verifications > 0 ? (stats.accepted - stats.checkHits) / stats.verifications : 0,
      tokensPerStep: stats.emitted / Math.max(1, stats.steps),
      prefillOverOff: best.onPrefill / best.offPrefill,
      same,
    };
  } finally {
    off.destroy();
    on.destroy();
  }
}
