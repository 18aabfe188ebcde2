/**
 * The compiled form of a constraint: a graph of byte-level nodes, referenced
 * by index so recursive schemas ($ref) are cycles in the table, not trees.
 *
 *   lit  fixed bytes                      `true`, `"name":`, `<tool_call>\n…`
 *   str  a JSON string, length in code points within [min, max]; `exclude`
 *        lists raw contents it must not equal (extra keys vs declared ones)
 *   num  a JSON number; integer-only and/or bounded
 *   obj  members in declared order (optional ones may be skipped), then
 *        extra members (`extra` = their value node) when allowed
 *   arr  items of one node, count within [min, max]
 *   alt  one of several nodes (anyOf, oneOf, enum, type arrays, nullable)
 *   seq  nodes one after another (the tool-call envelope)
 *   trig any text; once it contains `marker`, `then` follows (an optional,
 *        constrained tool call after free content)
 *
 * No whitespace between tokens: a constrained reply is compact JSON.
 */

export interface NumBounds {
  lo: number | null;
  loExclusive: boolean;
  hi: number | null;
  hiExclusive: boolean;
}

export type GrammarNode =
  | { kind: 'lit'; bytes: Uint8Array }
  | { kind: 'str'; min: number; max: number; exclude: Uint8Array[] | null }
  | { kind: 'num'; integer: boolean; bounds: NumBounds | null }
  | { kind: 'obj'; props: ObjProp[]; extra: number | null; extraKey: number }
  | { kind: 'arr'; item: number; min: number; max: number }
  | { kind: 'alt'; alts: number[] }
  | { kind: 'seq'; parts: number[] }
  /** Free text until `marker` (KMP failure table `fail`), then `then`: a reply that may call a tool. */
  | { kind: 'trig'; marker: Uint8Array; fail: Int32Array; then: number };

export interface ObjProp {
  name: string;
  /** Node of the literal `"name":`. */
  key: number;
  value: number;
  required: boolean;
}

/** A compiled constraint: its node table and the root. */
export interface Grammar {
  readonly nodes: readonly GrammarNode[];
  readonly root: number;
  /** Shortest serialization of each node in bytes (Infinity: none). */
  readonly minLen: Float64Array;
  /** Canonical text of what was compiled: the cache key of the grammar. */
  readonly key: string;
}
