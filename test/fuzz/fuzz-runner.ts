/**
 * A seeded, time-bounded fuzz loop shared by test/fuzz/*: each case draws
 * from one PRNG seeded per run, so a failure names the seed and the case
 * index and reproduces with FUZZ_SEED=<seed>. The budget is a few seconds
 * inside `npm test`; `npm run fuzz -- --minutes N` raises it (FUZZ_MS).
 * The budget bounds how long the loop runs; nothing asserts on time.
 */
export type Rand = () => number;

export function seededRandom(seed: number): Rand {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const int = (rand: Rand, below: number): number => Math.floor(rand() * below);
export const pick = <T>(rand: Rand, items: readonly T[]): T => items[int(rand, items.length)]!;

export interface FuzzOptions {
  name: string;
  /** Budget inside `npm test`, ms (FUZZ_MS overrides). */
  budgetMs?: number;
  /** At least this many cases, whatever the budget (so a slow machine still fuzzes). */
  minCases?: number;
  /** At most this many cases (FUZZ_MAX_CASES overrides). */
  maxCases?: number;
}

export interface FuzzReport {
  seed: number;
  cases: number;
}

/** Runs `body(rand, i)` until the budget is spent; a throw is rethrown naming seed and case. */
export async function fuzz(options: FuzzOptions, body: (rand: Rand, index: number) => void | Promise<void>): Promise<FuzzReport> {
  const seed = process.env.FUZZ_SEED !== undefined ? Number(process.env.FUZZ_SEED) : (Date.now() ^ (process.pid << 8)) >>> 0;
  const budgetMs = process.env.FUZZ_MS !== undefined ? Number(process.env.FUZZ_MS) : (options.budgetMs ?? 3000);
  const maxCases = process.env.FUZZ_MAX_CASES !== undefined ? Number(process.env.FUZZ_MAX_CASES) : (options.maxCases ?? Number.POSITIVE_INFINITY);
  const minCases = Math.min(options.minCases ?? 20, maxCases);
  const rand = seededRandom(seed);
  const end = Date.now() + budgetMs;
  let cases = 0;
  process.stdout.write(`[fuzz] ${options.name}: seed ${seed} (FUZZ_SEED=${seed} reproduces), budget ${budgetMs} ms\n`);
  while (cases < maxCases && (cases < minCases || Date.now() < end)) {
    try {
      await body(rand, cases);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      throw new Error(`[fuzz] ${options.name} failed at case ${cases} with FUZZ_SEED=${seed}: ${message}`, { cause: error });
    }
    cases++;
  }
  process.stdout.write(`[fuzz] ${options.name}: ${cases} cases, seed ${seed}\n`);
  return { seed, cases };
}

/** A mutated copy of `bytes`: bit flips, byte sets, interesting integers, inserted/deleted runs, truncation. */
export function mutateBytes(rand: Rand, bytes: Uint8Array, edits = 1 + int(rand, 4)): Uint8Array {
  let out = bytes.slice();
  const interesting = [0, 1, 0x7f, 0x80, 0xff, 0x7fffffff, 0xffffffff, 0x80000000, 0x10000, 0x40000000];
  for (let e = 0; e < edits; e++) {
    const at = out.length === 0 ? 0 : int(rand, out.length);
    switch (int(rand, 7)) {
      case 0:
        if (out.length > 0) out[at] ^= 1 << int(rand, 8);
        break;
      case 1:
        if (out.length > 0) out[at] = int(rand, 256);
        break;
      case 2: {
        // An interesting u32/u64 over a field (counts, lengths, offsets).
        const value = pick(rand, interesting);
        const width = pick(rand, [4, 8]);
        if (at + width <= out.length) {
          const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
          if (width === 4) view.setUint32(at, value >>> 0, true);
          else view.setBigUint64(at, BigInt(value) * (rand() < 0.3 ? 1n << 20n : 1n), true);
        }
        break;
      }
      case 3:
        out = out.subarray(0, int(rand, out.length + 1)).slice();
        break;
      case 4: {
        const n = 1 + int(rand, 16);
        const grown = new Uint8Array(out.length + n);
        grown.set(out.subarray(0, at));
        for (let i = 0; i < n; i++) grown[at + i] = int(rand, 256);
        grown.set(out.subarray(at), at + n);
        out = grown;
        break;
      }
      case 5: {
        const n = Math.min(out.length - at, 1 + int(rand, 16));
        const shrunk = new Uint8Array(out.length - n);
        shrunk.set(out.subarray(0, at));
        shrunk.set(out.subarray(at + n), at);
        out = shrunk;
        break;
      }
      case 6:
        if (out.length > 0) out[at] = 0;
        break;
    }
  }
  return out;
}

/** A random string mixing ASCII, multi-byte, astral, combining marks, controls and lone surrogates when allowed. */
export function randomString(rand: Rand, maxLength: number, options: { loneSurrogates?: boolean } = {}): string {
  const length = int(rand, maxLength + 1);
  const pools: (() => string)[] = [
    () => String.fromCharCode(0x20 + int(rand, 95)),
    () => pick(rand, [' ', '  ', '\n', '\t', '\r\n', '\u00a0', '\u3000']),
    () => String.fromCharCode(0x80 + int(rand, 0x780)),
    () => String.fromCharCode(0x4e00 + int(rand, 0x5000)),
    () => String.fromCodePoint(0x1f300 + int(rand, 0x300)),
    () => String.fromCodePoint(0x10000 + int(rand, 0xfffff)),
    () => String.fromCharCode(0x300 + int(rand, 0x70)),
    () => String.fromCharCode(int(rand, 0x20)),
    () => pick(rand, ['<s>', '</s>', '<|im_start|>', '<|endoftext|>', '{{', '}}', '{%', '%}', '<unk>', '\ufffd', '\u200d', '\ufeff']),
  ];
  if (options.loneSurrogates) pools.push(() => String.fromCharCode(0xd800 + int(rand, 0x800)));
  let s = '';
  for (let i = 0; i < length; i++) s += pick(rand, pools)();
  return s;
}
