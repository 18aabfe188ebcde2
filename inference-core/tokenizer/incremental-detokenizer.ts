/**
 * Streaming detokenizer. Token pieces are bytes and a UTF-8 character may be
 * split across tokens (byte-level BPE, byte fallback); a streaming TextDecoder
 * holds an incomplete trailing sequence back until the next token completes
 * it, so no U+FFFD is emitted mid-stream for a character that is merely
 * split. Bytes that can never form a character still decode to U+FFFD.
 */
import type { DecodeOptions, Tokenizer } from './tokenizer.ts';

export class IncrementalDetokenizer {
  private readonly decoder = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });
  private first = true;

  constructor(
    private readonly tokenizer: Tokenizer,
    private readonly options: DecodeOptions = {},
  ) {}

  /** Feeds one token; returns the text that became complete (possibly ''). */
  push(id: number): string {
    let piece = this.tokenizer.tokenToPiece(id, { renderSpecial: this.options.renderSpecial });
    // As Tokenizer.decode: the first token's piece, whatever it renders, is the one that may lose a space.
    if (this.first) {
      this.first = false;
      if (this.options.stripLeadingSpace && piece.length > 0 && piece[0] === 0x20) piece = piece.subarray(1);
    }
    if (piece.length === 0) return '';
    return this.decoder.decode(piece, { stream: true });
  }

  /** Ends the stream: whatever is still held (an unfinished character) comes out as U+FFFD. */
  flush(): string {
    return this.decoder.decode();
  }
}
