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
  '<|eot_id|>', '<|im_end|>', '<|end|>', '<|return|>', '<|call|>', '<end_of_turn>', '<|endoftext|>', '<|eom_id|>', '<EOT>', '_<EOT>', '<|end_of_text|>', '<end_of_utterance>', '</s>',
  // Gemma's <eos> (llama.cpp lists it for Gemma 4; it applies to Gemma 3's vocabulary as well)
  '<eos>',
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
 * Harmony (gpt-oss's o200k_harmony): llama.cpp makes these four USER_DEFINED whatever their type
 * ("always render these tokens"), so they decode to their text even without special rendering and
 * match in text even without parse_special: a harmony reply's channel headers reach the parser.
 */
export const FORCED_USER_DEFINED_TEXTS = new Set(['<|channel|>', '<|message|>', '<|start|>', '<|constrain|>']);

/**
 * Harmony again: when "<|return|>" and "<|call|>" are both end-of-generation tokens, llama.cpp
 * takes "<|end|>" off that list and makes it USER_DEFINED, since in harmony <|end|> closes a
 * message (analysis, tool result) and the turn goes on. Returns the id to demote, if any.
 */
export function harmonyEndToDemote(eog: ReadonlySet<number>, tokens: readonly string[]): number | undefined {
  let ret = false;
  let call = false;
  let end: number | undefined;
  for (const id of eog) {
    if (tokens[id] === '<|return|>') ret = true;
    else if (tokens[id] === '<|call|>') call = true;
    else if (tokens[id] === '<|end|>') end = id;
  }
  return ret && call ? end : undefined;
}

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

const SP = 0x20;
const APOS = 0x27;

/**
 * llama_detokenize's clean_spaces, three passes over the bytes: drop the space before ? ! . and ,
 * then turn " ' " into "'", then drop the space before 's 'm 're 've (not 't 'd 'll).
 */
export function cleanSpaces(input: Uint8Array): Uint8Array {
  let t = input;
  let n = t.length;
  const pass = (body: (i: number, out: Uint8Array, w: number) => [number, number]) => {
    const out = new Uint8Array(n);
    let w = n > 0 ? 1 : 0;
    if (n > 0) out[0] = t[0];
    for (let i = 1; i < n; i++) [i, w] = body(i, out, w);
    t = out;
    n = w;
  };
  pass((i, out, w) => {
    const x = t[i];
    if (t[i - 1] === SP && (x === 0x3f || x === 0x21 || x === 0x2e || x === 0x2c)) w--;
    out[w++] = x;
    return [i, w];
  });
  pass((i, out, w) => {
    const x = t[i];
    if (x === APOS && i + 1 < n && t[i - 1] === SP && t[i + 1] === SP) {
      w--;
      // llama.cpp overwrites the skipped space with NUL, which the next byte then sees as its left neighbour.
      t[++i] = 0;
    }
    out[w++] = x;
    return [i, w];
  });
  pass((i, out, w) => {
    const x = t[i];
    if (t[i - 1] === SP && x === APOS && i + 1 < n) {
      const x1 = t[i + 1];
      const x2 = i + 2 < n ? t[i + 2] : -1;
      if (x1 === 0x73 || x1 === 0x6d) w--; // 's 'm
      else if (x1 !== 0x74 && x1 !== 0x64 && ((x1 === 0x72 && x2 === 0x65) || (x1 === 0x76 && x2 === 0x65))) w--; // 're 've
    }
    out[w++] = x;
    return [i, w];
  });
  return t.subarray(0, n);
}
