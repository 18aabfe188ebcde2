/**
 * llama.cpp's tokenizer (node-llama-cpp 3.21.1, CPU prebuilt), one file at a
 * time, run by llamacpp-server.mjs.
 *
 *   a request: { modelPath, items: [{ text, parseSpecial }], vocabOnly? (default true) }
 *   its answer: { tokens: number[][], tokenizeMs, trainContextSize, vocabOnly }
 *
 * With vocabOnly false the whole model (weights included) is loaded, which
 * proves llama.cpp accepts every tensor of the file.
 *
 * Tokenization is llama.cpp's common_tokenize(vocab, text, add_special=false,
 * parse_special).
 */
import { withModel } from './llamacpp-model.mjs';

export function runTokenize(llama, req) {
  return withModel(llama, req.modelPath, req.vocabOnly !== false, (model) => {
    const t0 = performance.now();
    const tokens = req.items.map((it) => Array.from(model.tokenize(it.text, it.parseSpecial === true)));
    const tokenizeMs = performance.now() - t0;
    return { tokens, tokenizeMs, trainContextSize: model.trainContextSize, vocabOnly: req.vocabOnly !== false };
  });
}
