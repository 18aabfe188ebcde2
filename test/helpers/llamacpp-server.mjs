#!/usr/bin/env node
/**
 * The llama.cpp process of one test process (llamacpp-server.ts starts it on
 * first use): llama.cpp's start (~3 s of CPU: node-llama-cpp loads and
 * self-tests its prebuilt binary) is paid once per vitest fork, not once per
 * reference call. It runs as its own process because node-llama-cpp's binary
 * self-test forks process.execArgv, which breaks inside vitest workers.
 *
 *   stdin : one JSON line per request  { id, kind: 'reference' | 'tokenize' | 'vocab-info', request }
 *   stdout: one JSON line per answer   { id, result } or { id, error }, in request order
 *   stdin closed (the test process ended, however it ended): dispose and exit.
 */
import { createInterface } from 'node:readline';

import { getLlama, LlamaLogLevel } from 'node-llama-cpp';

import { runReference } from './llamacpp-reference.mjs';
import { runTokenize } from './llamacpp-tokenize.mjs';
import { runVocabInfo } from './llamacpp-vocab-info.mjs';

const KINDS = { reference: runReference, tokenize: runTokenize, 'vocab-info': runVocabInfo };

let llama = null;
let queue = Promise.resolve();

function answer(message) {
  return new Promise((resolve) => process.stdout.write(JSON.stringify(message) + '\n', resolve));
}

async function serve(line) {
  let id = null;
  try {
    const message = JSON.parse(line);
    id = message.id;
    const run = KINDS[message.kind];
    if (!run) throw new Error(`unknown kind ${JSON.stringify(message.kind)}; one of ${Object.keys(KINDS).join(', ')}`);
    llama ??= await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error, maxThreads: 0 });
    await answer({ id, result: await run(llama, message.request) });
  } catch (error) {
    await answer({ id, error: String(error?.stack ?? error) });
  }
}

const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => (queue = queue.then(() => serve(line))));
lines.on('close', () => {
  queue.then(async () => {
    await llama?.dispose();
    process.exit(0);
  });
});
