/**
 * What llama.cpp (node-llama-cpp 3.21.1, CPU) reads from a GGUF's vocabulary,
 * run by llamacpp-server.mjs.
 *
 *   a request: { modelPath, detokenize?: [{ tokens: number[], special: boolean }] }
 *   its answer: { eogIds, controlIds, userDefinedIds, lstripIds, rstripIds: number[], bos, eos, eot }
 *   (the *Ids lists: tokens with that llama.cpp attribute, after llama.cpp's own adjustments),
 *   texts: llama_detokenize of each detokenize entry (special: render control tokens' text)
 *   tokenize?: [{ text, parseSpecial }] → tokens: llama.cpp's ids of each (as llamacpp-tokenize.mjs),
 *   detokenizeFirst?: n → texts also holds llama_detokenize of the first n of those id lists, plain
 *   then special: one vocabulary load (seconds for a 100k+ vocabulary) instead of two.
 */
import { withModel } from './llamacpp-model.mjs';

export function runVocabInfo(llama, req) {
  return withModel(llama, req.modelPath, true, (model) => {
    const out = { eogIds: [], controlIds: [], userDefinedIds: [], lstripIds: [], rstripIds: [] };
    const n = model.fileInfo.metadata.tokenizer.ggml.tokens.length;
    for (let id = 0; id < n; id++) {
      if (model.isEogToken(id)) out.eogIds.push(id);
      const a = model.getTokenAttributes(id);
      if (a.control) out.controlIds.push(id);
      if (a.userDefined) out.userDefinedIds.push(id);
      if (a.lstrip) out.lstripIds.push(id);
      if (a.rstrip) out.rstripIds.push(id);
    }
    const tokens = (req.tokenize ?? []).map((it) => Array.from(model.tokenize(it.text, it.parseSpecial === true)));
    const own = tokens.slice(0, req.detokenizeFirst ?? 0);
    const detokenize = [...(req.detokenize ?? []), ...own.map((t) => ({ tokens: t, special: false })), ...own.map((t) => ({ tokens: t, special: true }))];
    const texts = detokenize.map((d) => model.detokenize(d.tokens, d.special === true));
    return { ...out, texts, tokens, bos: model.tokens.bos, eos: model.tokens.eos, eot: model.tokens.eot };
  });
}
