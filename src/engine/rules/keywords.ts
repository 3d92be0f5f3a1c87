// Aho–Corasick automaton over ASCII keywords: one pass over a name finds every keyword it
// contains, so the cost depends on the name's length, not on how many keywords there are.

import { finish, STEP, type Steps } from "./slicer.js";

/** Keywords are ASCII (checked by the rule parser); any other code resets to the root. */
const ALPHABET = 128;
/**
 * The full transition table has one column per character that occurs in some keyword (plus one
 * for all the others, which lead to the root): up to this many cells (4 MiB) it is built.
 */
const DENSE_MAX_CELLS = 1 << 20;
const FEW_KEYWORDS = 4;

interface Columns {
  /** Column of each character in the dense table (0: a character no keyword has). */
  column: Uint8Array;
  /** The characters of the keywords, in column order (column 1 first). */
  chars: number[];
  width: number;
}

function columnsOf(keywords: readonly string[]): Columns {
  const chars: number[] = [];
  const column = new Uint8Array(ALPHABET);
  for (const k of keywords) {
    for (let i = 0; i < k.length; i++) {
      const c = k.charCodeAt(i);
      if (column[c] === 0) column[c] = chars.push(c);
    }
  }
  return { column, chars, width: chars.length + 1 };
}

/** Full transition table, rows in breadth-first order: a state's failure target is shallower, so its row is already complete. */
function* denseTable(edges: Map<number, number>, fail: Int32Array, { chars, width: w }: Columns, order: Int32Array): Steps<Int32Array> {
  const table = new Int32Array(fail.length * w);
  for (let i = 0; i < order.length; i++) {
    if (i % STEP === STEP - 1) yield;
    const s = order[i];
    const f = fail[s];
    for (let col = 1; col < w; col++) {
      const t = edges.get(s * ALPHABET + chars[col - 1]);
      table[s * w + col] = t !== undefined ? t : s === 0 ? 0 : table[f * w + col];
    }
  }
  return table;
}

export class KeywordAutomaton {
  /** Trie edges keyed `state * 128 + code` (one flat map keeps memory low for big lists). */
  private readonly edges: Map<number, number>;
  /** Failure link of each state: the longest proper suffix that is also a trie path. */
  private readonly fail: Int32Array;
  /** Smallest keyword index that ends at this state or on its failure chain; -1 for none. */
  private readonly best: Int32Array;
  /** Keyword index that ends exactly at this state; -1 for none. */
  private readonly ending: Int32Array;
  /** Nearest state on the failure chain where a keyword ends (0: none), for reporting every match. */
  private readonly dict: Int32Array;

  /** Full transition table (failure links folded in) when the automaton is small: one read per char. */
  private readonly dense: Int32Array | null;
  /** Column of each character in the dense table (0: a character no keyword has). */
  private readonly column: Uint8Array;
  private readonly width: number;
  /** A handful of keywords: String.prototype.includes beats any automaton. */
  private readonly few: readonly string[] | null;

  private constructor(edges: Map<number, number>, fail: Int32Array, best: Int32Array, ending: Int32Array, dict: Int32Array, few: readonly string[] | null, columns: Columns, dense: Int32Array | null) {
    this.edges = edges;
    this.fail = fail;
    this.best = best;
    this.ending = ending;
    this.dict = dict;
    this.few = few;
    this.column = columns.column;
    this.width = columns.width;
    this.dense = dense;
  }

  /** `keywords[i]` has priority `i` (lower wins when several occur in one name). */
  static build(keywords: readonly string[]): KeywordAutomaton {
    return finish(KeywordAutomaton.steps(keywords));
  }

  /** The same build in steps (see slicer.ts), for builds that must yield to the event loop. */
  static *steps(keywords: readonly string[]): Steps<KeywordAutomaton> {
    const edges = new Map<number, number>();
    const children: number[][] = [[]];
    const ending: number[] = [-1];
    for (let k = 0; k < keywords.length; k++) {
      if (k % STEP === STEP - 1) yield;
      const word = keywords[k];
      let s = 0;
      for (let i = 0; i < word.length; i++) {
        const c = word.charCodeAt(i);
        if (c >= ALPHABET) throw new Error(`keyword '${word}' is not ASCII`);
        const key = s * ALPHABET + c;
        let t = edges.get(key);
        if (t === undefined) {
          t = children.length;
          edges.set(key, t);
          children.push([]);
          ending.push(-1);
          children[s].push(c);
        }
        s = t;
      }
      if (ending[s] < 0 || k < ending[s]) ending[s] = k;
    }
    const n = children.length;
    const fail = new Int32Array(n);
    const best = Int32Array.from(ending);
    const ends = Int32Array.from(ending);
    const dict = new Int32Array(n);
    // Breadth-first: a state's failure target is shallower, so its `best` is already final.
    const queue = new Int32Array(n);
    let head = 0;
    let tail = 0;
    queue[tail++] = 0;
    while (head < tail) {
      if (head % STEP === STEP - 1) yield;
      const u = queue[head++];
      if (u !== 0) {
        const f = fail[u];
        const inherited = best[f];
        if (inherited >= 0 && (best[u] < 0 || inherited < best[u])) best[u] = inherited;
        dict[u] = ends[f] >= 0 ? f : dict[f];
      }
      for (const c of children[u]) {
        const v = edges.get(u * ALPHABET + c) as number;
        if (u === 0) {
          fail[v] = 0;
        } else {
          let f = fail[u];
          let t = edges.get(f * ALPHABET + c);
          while (t === undefined && f !== 0) {
            f = fail[f];
            t = edges.get(f * ALPHABET + c);
          }
          fail[v] = t === undefined ? 0 : t;
        }
        queue[tail++] = v;
      }
    }
    const few = keywords.length <= FEW_KEYWORDS ? keywords.slice() : null;
    const columns = columnsOf(keywords);
    const dense = few === null && n * columns.width <= DENSE_MAX_CELLS ? yield* denseTable(edges, fail, columns, queue) : null;
    return new KeywordAutomaton(edges, fail, best, ends, dict, few, columns, dense);
  }

  private step(s: number, c: number): number {
    if (c >= ALPHABET) return 0;
    const edges = this.edges;
    for (;;) {
      const t = edges.get(s * ALPHABET + c);
      if (t !== undefined) return t;
      if (s === 0) return 0;
      s = this.fail[s];
    }
  }

  /** Index of the earliest-declared keyword occurring in `text`, or -1. */
  firstMatch(text: string): number {
    const few = this.few;
    if (few !== null) {
      for (let k = 0; k < few.length; k++) if (text.includes(few[k])) return k;
      return -1;
    }
    const best = this.best;
    const dense = this.dense;
    const width = this.width;
    const column = this.column;
    let found = -1;
    let s = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      s = dense !== null ? (c < ALPHABET ? dense[s * width + column[c]] : 0) : this.step(s, c);
      const b = best[s];
      if (b >= 0 && (found < 0 || b < found)) {
        if (b === 0) return 0;
        found = b;
      }
    }
    return found;
  }

  /** True when `text` contains any keyword (stops at the first one found). */
  test(text: string): boolean {
    const few = this.few;
    if (few !== null) {
      for (let k = 0; k < few.length; k++) if (text.includes(few[k])) return true;
      return false;
    }
    const best = this.best;
    const dense = this.dense;
    const width = this.width;
    const column = this.column;
    let s = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      s = dense !== null ? (c < ALPHABET ? dense[s * width + column[c]] : 0) : this.step(s, c);
      if (best[s] >= 0) return true;
    }
    return false;
  }

  /**
   * Calls `found` with the index of every keyword occurrence in `text` (a keyword occurring twice
   * is reported twice); stops early when `found` returns true. Returns whether it stopped early.
   */
  forEachMatch(text: string, found: (keyword: number) => boolean): boolean {
    const dense = this.dense;
    const width = this.width;
    const column = this.column;
    const ending = this.ending;
    const dict = this.dict;
    let s = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      s = dense !== null ? (c < ALPHABET ? dense[s * width + column[c]] : 0) : this.step(s, c);
      if (this.best[s] < 0) continue;
      if (ending[s] >= 0 && found(ending[s])) return true;
      for (let t = dict[s]; t !== 0; t = dict[t]) if (found(ending[t])) return true;
    }
    return false;
  }
}
