#!/usr/bin/env node
/**
 * llama.cpp tokenizer reference (node-llama-cpp 3.21.1, CPU prebuilt), run as
 * its own process (see llamacpp-child.mjs).
 *
 *   a request (one of stdin's { many }): { modelPath, items: [{ text, parseSpecial }], vocabOnly? (default true) }
 *   its answer: { tokens: number[][], tokenizeMs, trainContextSize, vocabOnly }; or { error } for the whole run
 *
 * With vocabOnly false the whole model (weights included) is loaded, which
 * proves llama.cpp accepts every tensor of the file.
 *
 * Tokenization is llama.cpp's common_tokenize(vocab, text, add_special=false,
 * parse_special).
 */
import { runLlamaChild } from './llamacpp-child.mjs';

runLlamaChild(
  (req) => req.vocabOnly !== false,
  (model, req) => {
    const t0 = performance.now();
    const tokens = req.items.map((it) => Array.from(model.tokenize(it.text, it.parseSpecial === true)));
    const tokenizeMs = performance.now() - t0;
    return { tokens, tokenizeMs, trainContextSize: model.trainContextSize, vocabOnly: req.vocabOnly !== false };
  },
);
