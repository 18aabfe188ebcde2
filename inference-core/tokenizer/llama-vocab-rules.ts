/**
 * What llama.cpp's vocabulary loader (llama-vocab.cpp) decides beyond the GGUF's
 * own fields, reproduced so kvtier's ids, stops and decoding match it.
 */
import { TokenType } from './token-type.ts';

/**
 * Token texts llama.cpp's vocabulary loader recognises whatever their GGUF type: it makes each one
 * CONTROL (so parse_special matches it in text and it decodes to nothing) and the end-of-generation
 * ones EOG. Checked against llama.cpp's attributes on the real vocabularies (Qwen's "</s>" is a
 * NORMAL token in the GGUF, CONTROL and EOG in llama.cpp; so are its FIM pad/repo/file-sep tokens).
 */
export const EOG_TEXTS = new Set([
  '<|eot_id|>', '<|im_end|>', '<|end|>', '<end_of_turn>', '<|endoftext|>', '<|eom_id|>', '<EOT>', '_<EOT>', '<|end_of_text|>', '<end_of_utterance>', '</s>',
  // FIM pad / repo / file separator
  '<|fim_pad|>', '<fim-pad>', '<fim_pad>', '<PAD>', '<|fim_repo|>', '<|repo_name|>', '<fim-repo>', '<REPO>', '<reponame>', '<|file_sep|>', '<file_sep>',
]);
export const FORCED_CONTROL_TEXTS = new Set([
  ...EOG_TEXTS,
  // FIM prefix / suffix / middle (not EOG)
  '<|fim_prefix|>', '<fim-prefix>', '<fim_prefix>', '<｜fim▁begin｜>', '<PRE>', '▁<PRE>',
  '<|fim_suffix|>', '<fim-suffix>', '<fim_suffix>', '<｜fim▁hole｜>', '<SUF>', '▁<SUF>',
  '<|fim_middle|>', '<fim-middle>', '<fim_middle>', '<｜fim▁end｜>', '<MID>', '▁<MID>',
]);

/**
 * llama.cpp (llama-vocab.cpp) gives specials the RSTRIP attribute only by model name: for a
 * general.name containing "phi-3"/"phi3" every control/user-defined/unknown token and "</s>"
 * rstrip, except "<unk>", "<s>" and "<|endoftext|>". HF's lstrip/rstrip flags never reach a GGUF.
 */
export function stripAttributesByModelName(name: string, tokens: string[], types: Int32Array | undefined): Map<number, { lstrip: boolean; rstrip: boolean }> | undefined {
  const lower = name.toLowerCase();
  if (!lower.includes('phi-3') && !lower.includes('phi3')) return undefined;
  const out = new Map<number, { lstrip: boolean; rstrip: boolean }>();
  const keep = new Set(['<unk>', '<s>', '<|endoftext|>']);
  for (let i = 0; i < tokens.length; i++) {
    const t = types?.[i] ?? TokenType.NORMAL;
    const special = t === TokenType.CONTROL || t === TokenType.USER_DEFINED || t === TokenType.UNKNOWN;
    if ((special || tokens[i] === '</s>') && !keep.has(tokens[i])) out.set(i, { lstrip: false, rstrip: true });
  }
  return out;
}
