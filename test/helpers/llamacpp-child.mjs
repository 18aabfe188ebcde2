/**
 * The frame of the llama.cpp helper processes (llamacpp-tokenize.mjs,
 * llamacpp-vocab-info.mjs): read { many: [request…] } on stdin, load each
 * request's modelPath in turn with node-llama-cpp 3.21.1 on the CPU prebuilt
 * (never built), answer { many: [work(model, request)…] } as JSON on stdout,
 * or { error } with exit status 1 (llamacpp-child-run.ts calls them). They
 * run as their own process because node-llama-cpp's binary self-test forks
 * process.execArgv, which breaks inside vitest workers.
 */
import { getLlama, LlamaLogLevel } from 'node-llama-cpp';

async function readStdin() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

/** vocabOnly(req): whether to load the vocabulary alone (no weights). */
export function runLlamaChild(vocabOnly, work) {
  const main = async () => {
    const req = await readStdin();
    const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error });
    const one = async (r) => {
      const model = await llama.loadModel({ modelPath: r.modelPath, gpuLayers: 0, vocabOnly: vocabOnly(r) });
      try {
        return await work(model, r);
      } finally {
        await model.dispose();
      }
    };
    try {
      // several models in one process: llama.cpp's start (~3 s of CPU) is paid once
      const many = [];
      for (const r of req.many) many.push(await one(r));
      return { many };
    } finally {
      await llama.dispose();
    }
  };
  main().then(
    // Exit only once the (possibly large) answer has drained into the pipe.
    (res) => process.stdout.write(JSON.stringify(res), () => process.exit(0)),
    (err) => {
      process.stdout.write(JSON.stringify({ error: String(err?.stack ?? err) }));
      process.exit(1);
    },
  );
}
