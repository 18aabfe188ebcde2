/**
 * llama.cpp reference ops (node-llama-cpp 3.21.1, CPU prebuilt binary), run
 * by llamacpp-server.mjs, one request at a time, in the one llama.cpp process
 * a test process keeps (llamacpp-server.ts).
 *
 *   { op: 'logits',   modelPath, tokens, threads?, kvType? }   → { logprobs, vocab }
 *   { op: 'logitsMany', modelPath, prompts: tokens[], threads?, kvType? }
 *                                                             → { logprobs: per prompt, vocab }
 *     (one model load for many prompts; the sequence is cleared between them)
 *   { op: 'greedy',   modelPath, tokens, nPredict, threads?, kvType? }
 *                                                             → { tokens, margins }
 *   { op: 'bench',    modelPath, tokens, nPredict, threads?, kvType? }
 *                                                             → { prefillTps, decodeTps, prefillMs, decodeMs, threads }
 *   { op: 'batch',    requests: [any request above but batch] } → { results: [answer per request] }
 *
 * Every model and context a request opens is disposed before it answers.
 *
 * Logits: node-llama-cpp exposes the next-token distribution only as
 * probabilities (softmax of the raw logits, computed in f32 from the full
 * vocab when the sampler is greedy, i.e. temperature 0, no penalties). We
 * return log(p) = logit − logsumexp(logits): the raw logits up to one additive
 * constant per position, which is what a comparison needs. Tokens whose f32
 * probability underflows to 0 come back as null.
 *
 * kvType: 'f32' | 'f16' (default 'f16', llama.cpp's own default). Flash
 * attention is off so the KV cache type is honoured as given on CPU.
 */
function kvGgmlType(kvType) {
  if (kvType === undefined || kvType === 'f16') return 'F16';
  if (kvType === 'f32') return 'F32';
  throw new Error(`kvType must be 'f16' or 'f32', got ${JSON.stringify(kvType)}`);
}

async function openContext(llama, req, nTokens) {
  const model = await llama.loadModel({ modelPath: req.modelPath, gpuLayers: 0 });
  const kv = kvGgmlType(req.kvType);
  const want = Math.max(nTokens + 8, 64);
  const context = await model.createContext({
    contextSize: want,
    // One batch holds the whole prompt: llama.cpp then runs it as one ubatch
    // series of batched GEMMs, as our engine does.
    batchSize: Math.max(nTokens, 1),
    threads: { ideal: req.threads ?? 1, min: req.threads ?? 1 },
    flashAttention: false,
    experimentalKvCacheKeyType: kv,
    experimentalKvCacheValueType: kv,
    sequences: 1,
  });
  return { model, context, sequence: context.getSequence() };
}

const GREEDY = { temperature: 0 };

/** Evaluates `tokens` and returns the next-token result of the last one. */
async function evalLast(sequence, tokens, want) {
  const input = tokens.map((t, i) =>
    i === tokens.length - 1 ? [t, { generateNext: { ...want, options: GREEDY } }] : t,
  );
  const out = await sequence.controlledEvaluate(input);
  const last = out[tokens.length - 1];
  if (!last) throw new Error('llama.cpp returned no output for the last token');
  return last.next;
}

function logprobsOf(probabilities, vocab) {
  const lp = new Array(vocab).fill(null);
  for (const [tok, p] of probabilities) if (p > 0) lp[tok] = Math.log(p);
  return lp;
}

/** Gap between the two most likely tokens in log-prob units (= raw logit gap). */
function topMargin(probabilities) {
  const it = probabilities.values();
  const a = it.next().value ?? 0;
  const b = it.next().value ?? 0;
  return a > 0 && b > 0 ? Math.log(a) - Math.log(b) : Infinity;
}

/** One request (a batch: its requests in turn) on an initialised llama.cpp. */
export async function runReference(llama, req) {
  if (req.op === 'batch') {
    if (!Array.isArray(req.requests) || req.requests.some((r) => r?.op === 'batch')) throw new Error('batch needs requests: an array of non-batch requests');
    const results = [];
    for (const r of req.requests) results.push(await runOne(llama, r));
    return { results };
  }
  return await runOne(llama, req);
}

async function runOne(llama, req) {
  {
    if (req.op === 'logitsMany') {
      const prompts = req.prompts;
      if (!Array.isArray(prompts) || prompts.length === 0 || prompts.some((p) => !Array.isArray(p) || p.length === 0)) {
        throw new Error('prompts must be a non-empty array of non-empty token arrays');
      }
      const longest = Math.max(...prompts.map((p) => p.length));
      const { model, context, sequence } = await openContext(llama, req, longest);
      try {
        const n = vocabSizeOf(model);
        const logprobs = [];
        for (const p of prompts) {
          await sequence.clearHistory();
          const next = await evalLast(sequence, p, { probabilities: true });
          logprobs.push(logprobsOf(next.probabilities, n));
        }
        return { logprobs, vocab: n };
      } finally {
        await context.dispose();
        await model.dispose();
      }
    }
    const tokens = req.tokens;
    if (!Array.isArray(tokens) || tokens.length === 0) throw new Error('tokens must be a non-empty array');
    const nPredict = req.nPredict ?? 0;
    const { model, context, sequence } = await openContext(llama, req, tokens.length + nPredict);
    try {
      if (req.op === 'logits') {
        const next = await evalLast(sequence, tokens, { probabilities: true });
        const n = vocabSizeOf(model);
        return { logprobs: logprobsOf(next.probabilities, n), vocab: n };
      }
      if (req.op === 'greedy') {
        const out = [];
        const margins = [];
        let next = await evalLast(sequence, tokens, { token: true, probabilities: true });
        for (let i = 0; i < nPredict; i++) {
          if (next.token == null) throw new Error(`no token at step ${i}`);
          out.push(next.token);
          margins.push(topMargin(next.probabilities));
          if (i + 1 < nPredict) next = await evalLast(sequence, [next.token], { token: true, probabilities: true });
        }
        return { tokens: out, margins };
      }
      if (req.op === 'bench') {
        const t0 = performance.now();
        const cpu0 = process.cpuUsage();
        let next = await evalLast(sequence, tokens, { token: true });
        const cpu = process.cpuUsage(cpu0);
        const t1 = performance.now();
        for (let i = 0; i < nPredict; i++) {
          if (next.token == null) throw new Error(`no token at step ${i}`);
          next = await evalLast(sequence, [next.token], { token: true });
        }
        const t2 = performance.now();
        return {
          prefillMs: t1 - t0,
          prefillCpuMs: (cpu.user + cpu.system) / 1000,
          decodeMs: t2 - t1,
          prefillTps: tokens.length / ((t1 - t0) / 1000),
          decodeTps: nPredict / ((t2 - t1) / 1000),
          threads: req.threads ?? 1,
        };
      }
      throw new Error(`unknown op ${JSON.stringify(req.op)}`);
    } finally {
      await context.dispose();
      await model.dispose();
    }
  }
}

function vocabSizeOf(model) {
  // GGUF tokenizer.ggml.tokens length; node-llama-cpp reports it via fileInfo.
  const arr = model.fileInfo?.metadata?.tokenizer?.ggml?.tokens;
  if (Array.isArray(arr)) return arr.length;
  throw new Error('cannot read the vocab size from the model metadata');
}
