/**
 * Tokenizer built from GGUF metadata, matching llama.cpp's llama-vocab.cpp
 * token for token:
 *
 *   text ──(special-token partition: longest special first)──► fragments
 *        raw fragment ──► gpt2: pre-tokenizer regexes → byte-level BPE per word
 *                      └► llama: ' ' → '▁' (+ leading '▁' after BOS/special) → SPM merges
 *        special fragment ──► its id
 *   addSpecial: BOS in front when tokenizer.ggml.add_bos_token, EOS behind when add_eos_token.
 *
 * Which tokens count as specials: CONTROL, USER_DEFINED and UNKNOWN types.
 * With parseSpecial false only USER_DEFINED ones are matched (as llama.cpp).
 */
import type { GgufFile } from '../gguf/index.ts';
import { BpeModel } from './bpe-model.ts';
import { byteDecode } from './byte-unicode.ts';
import { IncrementalDetokenizer } from './incremental-detokenizer.ts';
import { preTokenize, type PreTokenizerName } from './pre-tokenizer.ts';
import { SpmModel } from './spm-model.ts';
import { TokenizerError } from './tokenizer-errors.ts';
import { EOG_TEXTS, FORCED_CONTROL_TEXTS, FORCED_USER_DEFINED_TEXTS, cleanSpaces, harmonyEndToDemote } from './llama-vocab-rules.ts';
import { TokenType } from './token-type.ts';

import { tokenizerSpecFromGguf, type DecodeOptions, type EncodeOptions, type TokenizerModelName, type TokenizerSpec } from './tokenizer-spec.ts';

export { TokenType } from './token-type.ts';
export type { DecodeOptions, EncodeOptions, TokenizerModelName, TokenizerSpec } from './tokenizer-spec.ts';


const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });

export class Tokenizer {
  readonly model: TokenizerModelName;
  readonly pre: PreTokenizerName | undefined;
  readonly vocabSize: number;
  readonly bosId: number | undefined;
  readonly eosId: number | undefined;
  readonly eotId: number | undefined;
  readonly padId: number | undefined;
  readonly unkId: number | undefined;
  readonly addBos: boolean;
  readonly addEos: boolean;
  readonly addSpacePrefix: boolean;
  /** Whether llama_detokenize cleans spaces for this vocabulary (llama.cpp: byte-level BPE except the qwen2 and deepseek-v3 pre-tokenizers). */
  readonly cleanSpaces: boolean;
  /** Ids that end generation: EOS, EOT and the end-of-turn / FIM tokens llama.cpp finds by text. */
  readonly eogIds: ReadonlySet<number>;

  private readonly tokens: string[];
  private readonly types: Int32Array;
  private readonly tokenToId = new Map<string, number>();
  /** Specials to partition on, longest text first (ties: lower id first). */
  private readonly specials: Array<{ id: number; text: string; type: TokenType; lstrip: boolean; rstrip: boolean }>;
  private readonly bpe: BpeModel | undefined;
  private readonly spm: SpmModel | undefined;
  private readonly pieceCache: Array<Uint8Array | undefined>;

  constructor(spec: TokenizerSpec) {
    this.model = spec.model;
    this.tokens = spec.tokens;
    this.vocabSize = spec.tokens.length;
    this.types = spec.tokenTypes ? Int32Array.from(spec.tokenTypes) : new Int32Array(this.vocabSize).fill(TokenType.NORMAL);
    if (this.types.length !== this.vocabSize) {
      throw new TokenizerError('KVT_ERR_TOKENIZER_BAD_VOCAB', `token_type has ${this.types.length} entries for ${this.vocabSize} tokens`);
    }
    for (let i = 0; i < this.tokens.length; i++) this.tokenToId.set(this.tokens[i], i);
    const checkId = (name: string, id: number | undefined) => {
      if (id !== undefined && (id < 0 || id >= this.vocabSize)) {
        throw new TokenizerError('KVT_ERR_TOKENIZER_BAD_VOCAB', `${name} id ${id} is outside the vocabulary of ${this.vocabSize}`);
      }
      return id;
    };
    this.bosId = checkId('bos', spec.bosId);
    this.eosId = checkId('eos', spec.eosId);
    this.eotId = checkId('eot', spec.eotId);
    this.padId = checkId('pad', spec.padId);
    this.unkId = checkId('unk', spec.unkId);
    this.pieceCache = new Array(this.vocabSize);

    const eog = new Set<number>();
    if (this.eosId !== undefined) eog.add(this.eosId);
    if (this.eotId !== undefined) eog.add(this.eotId);
    for (let i = 0; i < this.vocabSize; i++) {
      if (!FORCED_CONTROL_TEXTS.has(this.tokens[i])) continue;
      this.types[i] = TokenType.CONTROL;
      if (EOG_TEXTS.has(this.tokens[i])) eog.add(i);
    }
    // llama.cpp's order: the forced USER_DEFINED ones after the EOG pass, then harmony's <|end|>.
    for (let i = 0; i < this.vocabSize; i++) if (FORCED_USER_DEFINED_TEXTS.has(this.tokens[i])) this.types[i] = TokenType.USER_DEFINED;
    const end = harmonyEndToDemote(eog, this.tokens);
    if (end !== undefined) {
      eog.delete(end);
      this.types[end] = TokenType.USER_DEFINED;
    }
    this.eogIds = eog;

    this.specials = [];
    for (let i = 0; i < this.vocabSize; i++) {
      const t = this.types[i];
      if ((t === TokenType.CONTROL || t === TokenType.USER_DEFINED || t === TokenType.UNKNOWN) && this.tokens[i].length > 0) {
        const st = spec.strip?.get(i);
        this.specials.push({ id: i, text: this.tokens[i], type: t, lstrip: st?.lstrip ?? false, rstrip: st?.rstrip ?? false });
      }
    }
    // llama.cpp sorts by byte length, descending.
    this.specials.sort((a, b) => utf8.encode(b.text).length - utf8.encode(a.text).length || a.id - b.id);

    if (spec.model === 'gpt2') {
      if (!spec.pre) throw new TokenizerError('KVT_ERR_TOKENIZER_UNSUPPORTED_PRE', 'a gpt2 (byte-level BPE) vocabulary needs tokenizer.ggml.pre');
      if (!spec.merges) throw new TokenizerError('KVT_ERR_TOKENIZER_BAD_VOCAB', 'a gpt2 (byte-level BPE) vocabulary needs tokenizer.ggml.merges');
      this.pre = spec.pre;
      this.addBos = spec.addBos ?? spec.pre === 'llama-bpe';
      this.addEos = spec.addEos ?? false;
      this.addSpacePrefix = false;
      this.cleanSpaces = spec.pre === 'llama-bpe';
      this.bpe = new BpeModel(this.tokenToId, spec.merges, spec.pre === 'llama-bpe');
    } else {
      this.pre = undefined;
      this.addBos = spec.addBos ?? true;
      this.addEos = spec.addEos ?? false;
      this.addSpacePrefix = spec.addSpacePrefix ?? true;
      this.cleanSpaces = false;
      const scores = spec.scores ?? new Float32Array(this.vocabSize);
      const byteTokens = new Int32Array(256).fill(-1);
      for (let b = 0; b < 256; b++) {
        const id = this.tokenToId.get(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
        if (id !== undefined) byteTokens[b] = id;
      }
      this.spm = new SpmModel(this.tokenToId, scores, byteTokens, this.unkId);
    }
  }

  static fromGguf(gguf: GgufFile): Tokenizer {
    return new Tokenizer(tokenizerSpecFromGguf(gguf));
  }

  encode(text: string, options: EncodeOptions = {}): Uint32Array {
    // A lone surrogate reaches llama.cpp as U+FFFD (UTF-8 conversion); make the pre-tokenizer see the same.
    text = toWellFormed(text);
    const addSpecial = options.addSpecial ?? true;
    const parseSpecial = options.parseSpecial ?? false;
    const out: number[] = [];
    if (addSpecial && this.addBos) {
      if (this.bosId === undefined) throw new TokenizerError('KVT_ERR_TOKENIZER_NO_BOS', 'the vocabulary asks for a BOS token but has no tokenizer.ggml.bos_token_id');
      out.push(this.bosId);
    }
    const fragments = this.partition(text, parseSpecial);
    let prevSpecial = true;
    for (const f of fragments) {
      if (typeof f === 'number') {
        out.push(f);
        prevSpecial = true;
        continue;
      }
      if (this.bpe) {
        for (const word of preTokenize(f, this.pre!)) this.bpe.encodeWord(word, out);
      } else {
        const prefixed = this.addSpacePrefix && prevSpecial ? ' ' + f : f;
        this.spm!.encode(prefixed.replace(/ /g, '\u2581'), out);
      }
      prevSpecial = false;
    }
    if (addSpecial && this.addEos && this.eosId !== undefined) out.push(this.eosId);
    return Uint32Array.from(out);
  }

  /** llama.cpp's tokenizer_st_partition: for each special (longest first), split every raw fragment at its occurrences. */
  private partition(text: string, parseSpecial: boolean): Array<string | number> {
    let fragments: Array<string | number> = [text];
    for (const sp of this.specials) {
      if (!parseSpecial && sp.type !== TokenType.USER_DEFINED) continue;
      let changed = false;
      const next: Array<string | number> = [];
      for (const f of fragments) {
        if (typeof f === 'number' || f.indexOf(sp.text) < 0) {
          next.push(f);
          continue;
        }
        changed = true;
        let pos = 0;
        for (let at = f.indexOf(sp.text); at >= 0; at = f.indexOf(sp.text, pos)) {
          let end = at;
          if (sp.lstrip) while (end > pos && isAsciiSpace(f.charCodeAt(end - 1))) end--;
          if (end > pos) next.push(f.slice(pos, end));
          next.push(sp.id);
          pos = at + sp.text.length;
          if (sp.rstrip) while (pos < f.length && isAsciiSpace(f.charCodeAt(pos))) pos++;
        }
        if (pos < f.length) next.push(f.slice(pos));
      }
      if (changed) fragments = next;
    }
    return fragments.filter((f) => typeof f === 'number' || f.length > 0);
  }

  private checkId(id: number): void {
    if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize) {
      throw new TokenizerError('KVT_ERR_TOKENIZER_BAD_TOKEN_ID', `token id ${id} is outside the vocabulary of ${this.vocabSize}`);
    }
  }

  /** The vocabulary string of a token, as stored (byte-level or '▁'-escaped). */
  tokenText(id: number): string {
    this.checkId(id);
    return this.tokens[id];
  }

  tokenType(id: number): TokenType {
    this.checkId(id);
    return this.types[id];
  }

  tokenId(text: string): number | undefined {
    return this.tokenToId.get(text);
  }

  isSpecial(id: number): boolean {
    const t = this.tokenType(id);
    return t === TokenType.CONTROL || t === TokenType.UNKNOWN;
  }

  isEog(id: number): boolean {
    return this.eogIds.has(id);
  }

  /** The bytes a token contributes to decoded text (llama_token_to_piece). May be a partial UTF-8 sequence. */
  tokenToPiece(id: number, options: { renderSpecial?: boolean } = {}): Uint8Array {
    this.checkId(id);
    const type = this.types[id];
    if (type === TokenType.CONTROL || type === TokenType.UNKNOWN) {
      return options.renderSpecial ? utf8.encode(this.tokens[id]) : new Uint8Array(0);
    }
    let piece = this.pieceCache[id];
    if (piece === undefined) {
      const text = this.tokens[id];
      if (type === TokenType.USER_DEFINED) piece = utf8.encode(text);
      else if (this.model === 'gpt2') piece = byteDecode(text);
      else if (type === TokenType.BYTE) piece = Uint8Array.of(parseInt(text.slice(3, 5), 16));
      else piece = utf8.encode(text.replace(/\u2581/g, ' '));
      this.pieceCache[id] = piece;
    }
    return piece;
  }

  decode(ids: ArrayLike<number>, options: DecodeOptions = {}): string {
    const pieces: Uint8Array[] = [];
    let total = 0;
    // As llama_detokenize: only the first token's piece loses a leading space, even when that
    // token renders as nothing (a BOS in front keeps the text's own leading space).
    let strip = options.stripLeadingSpace === true;
    for (let i = 0; i < ids.length; i++) {
      let p = this.tokenToPiece(ids[i], options);
      if (strip && p.length > 0 && p[0] === 0x20) p = p.subarray(1);
      strip = false;
      if (p.length === 0) continue;
      pieces.push(p);
      total += p.length;
    }
    const all = new Uint8Array(total);
    let off = 0;
    for (const p of pieces) {
      all.set(p, off);
      off += p.length;
    }
    return utf8Decoder.decode(options.cleanSpaces ? cleanSpaces(all) : all);
  }

  /** Streaming decoder: emits text as soon as it is complete UTF-8, never a U+FFFD for a split character. */
  createDetokenizer(options: DecodeOptions = {}): IncrementalDetokenizer {
    return new IncrementalDetokenizer(this, options);
  }
}

/** C isspace: the whitespace llama.cpp's lstrip/rstrip remove. */
function isAsciiSpace(c: number): boolean {
  return c === 0x20 || (c >= 0x09 && c <= 0x0d);
}


type WellFormedString = string & { isWellFormed(): boolean; toWellFormed(): string };

/** Lone surrogates → U+FFFD (String.prototype.toWellFormed, Node ≥ 20; ES2024 lib typings are not enabled). */
function toWellFormed(text: string): string {
  const s = text as WellFormedString;
  return s.isWellFormed() ? text : s.toWellFormed();
}
