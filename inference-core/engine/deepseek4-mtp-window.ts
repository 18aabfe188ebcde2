/**
 * The MTP block's window of one deepseek4 sequence, kept as its inputs and
 * keyed lazily. A forward only records, per fed row, its token and the trunk's
 * hidden state before it (all cheap: the hidden states exist anyway); the key
 * (eh_proj over the hc streams, the block's pre-attention mix and norm, its KV
 * projection and rope) is computed for a row only when a draft is about to be
 * made or a unit exported (mtpKeys in deepseek4-mtp.ts), and then cached on the
 * row. A key depends only on its row's token, hidden state and position, not on
 * when or with which other rows it is computed, so a lazily keyed window is the
 * eagerly keyed one.
 *
 * Rows kept: the last n_swa + ROLLBACK_ROWS, so that after undoing at most
 * ROLLBACK_ROWS rows the window still has the n_swa keys a draft attends to.
 * Rolling back needs no marks: dropping the undone rows is the window before
 * them, and the first undone row's hidden state before it is the trunk's
 * last hidden state then.
 *
 * A unit import (deepseek4-unit.ts) gives keys without their inputs: such rows
 * cannot be keyed again nor rolled back into, which no forward needs (a
 * rollback only undoes the last forward's rows).
 */
import { EngineError } from './engine-errors.ts';
import { ROLLBACK_ROWS } from './deepseek4-marks.ts';

export interface MtpRow {
  /** -1: the row came keyed from a unit (its inputs are unknown). */
  readonly token: number;
  /** The trunk's hidden state (hc·n_embd) after the previous row; null at position 0. */
  readonly hPrev: Float32Array | null;
  key: Float32Array | null;
}

export class MtpWindow {
  /** Rows of positions first..first+rows.length−1 (the sequence's last fed rows). */
  rows: MtpRow[] = [];
  first = 0;

  constructor(readonly nSwa: number) {}

  get end(): number {
    return this.first + this.rows.length;
  }

  /** Appends the rows of positions end.. and drops those no window can reach any more. */
  push(rows: readonly MtpRow[], skipped = 0): void {
    if (skipped > 0) {
      // rows too far back to matter were not recorded: nothing before them matters either
      this.first = this.end + skipped;
      this.rows = [];
    }
    for (const r of rows) this.rows.push(r);
    const drop = this.rows.length - (this.nSwa + ROLLBACK_ROWS);
    if (drop > 0) {
      this.rows.splice(0, drop);
      this.first += drop;
    }
  }

  /** Whether the window (and the trunk's last hidden state) can be rolled back to `pos` tokens. */
  canRollback(pos: number): boolean {
    if (pos === this.end) return true;
    const r = this.rows[pos - this.first];
    return r !== undefined && r.token >= 0;
  }

  /** Rolls back to `pos` tokens (canRollback(pos)); returns the trunk's hidden state after pos tokens. */
  rollback(pos: number, hLast: Float32Array | null): Float32Array | null {
    if (pos === this.end) return hLast;
    const h = this.rows[pos - this.first]!.hPrev;
    this.rows.length = pos - this.first;
    return h;
  }

  /** Rows of positions ≥ end − n_swa: what a draft at position end attends to (with its own key). */
  windowRows(): MtpRow[] {
    return this.rows.slice(Math.max(0, this.rows.length - this.nSwa));
  }

  /** The keys of windowRows() with their positions; every one must have been computed. */
  keyed(): { raw: Float32Array[]; rawPos: number[] } {
    const rows = this.windowRows();
    const p0 = this.end - rows.length;
    return { raw: rows.map((r) => r.key ?? missingKey(p0)), rawPos: rows.map((_, i) => p0 + i) };
  }

  clone(): MtpWindow {
    const w = new MtpWindow(this.nSwa);
    w.first = this.first;
    w.rows = this.rows.map((r) => ({ token: r.token, hPrev: r.hPrev?.slice() ?? null, key: r.key?.slice() ?? null }));
    return w;
  }
}

function missingKey(p0: number): never {
  throw new EngineError('KVT_ERR_ENGINE_SEQUENCE_STATE', `the MTP window from position ${p0} is not keyed (mtpKeys computes its keys)`);
}
