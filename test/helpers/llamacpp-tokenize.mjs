#!/usr/bin/env node
/**
 * llama.cpp tokenizer reference (node-llama-cpp 3.21.1, CPU prebuilt), run as
 * its own process (node-llama-cpp's binary self-test forks process.execArgv,
 * which breaks inside vitest workers).
 *
 *   stdin : { modelPath, items: [{ text, parseSpecial }], vocabOnly? (default true) }
 *   stdout: { tokens: number[][], tokenizeMs, trainContextSize, vocabOnly } or { error }
 *
 * With vocabOnly false the whole model (weights included) is loaded, which
 * proves llama.cpp accepts every tensor of the file.
 *
 * Tokenization is llama.cpp's common_tokenize(vocab, text, add_special=false,
 * parse_special).
 */
import { getLlama, LlamaLogLevel } from 'node-llama-cpp';

async function readStdin() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

async function main() {
  const req = await readStdin();
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error });
  try {
    const model = await llama.loadModel({ modelPath: req.modelPath, gpuLayers: 0, vocabOnly: req.vocabOnly !== false });
    try {
      const t0 = performance.now();
      const tokens = req.items.map((it) => Array.from(model.tokenize(it.text, it.parseSpecial === true)));
      const tokenizeMs = performance.now() - t0;
      return { tokens, tokenizeMs, trainContextSize: model.trainContextSize, vocabOnly: req.vocabOnly !== false };
    } finally {
      await model.dispose();
    }
  } finally {
    await llama.dispose();
  }
}

main().then(
  (res) => {
    // Exit only once the (possibly large) answer has drained into the pipe.
    process.stdout.write(JSON.stringify(res), () => process.exit(0));
  },
  (err) => {
    process.stdout.write(JSON.stringify({ error: String(err?.stack ?? err) }));
    process.exit(1);
  },
);
