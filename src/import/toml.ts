// A strict reader for the subset of TOML that Pi-hole v6 writes in pihole.toml: `[table]` and
// `[a.b]` headers, `key = value` with bare or quoted keys, basic and literal strings, integers,
// floats, booleans, arrays (over several lines, trailing comma allowed) and inline tables, and `#`
// comments. Anything else (dates, multi-line strings, dotted keys, arrays of tables) is an error
// naming its line, never a guess. No TOML parser is among the dependencies; this is the part of the
// language the importer needs.

export type TomlValue = string | number | boolean | TomlValue[] | TomlTable;
export interface TomlTable {
  [key: string]: TomlValue;
}

export class TomlError extends Error {}

const BARE_KEY = /^[A-Za-z0-9_-]+/;

class Reader {
  pos = 0;
  constructor(private readonly text: string) {}

  get line(): number {
    return this.text.slice(0, this.pos).split("\n").length;
  }

  fail(message: string): never {
    throw new TomlError(`line ${this.line}: ${message}`);
  }

  peek(): string {
    return this.text[this.pos] ?? "";
  }

  /** Skips spaces and tabs (and, with `newlines`, line ends and comments). */
  skip(newlines: boolean): void {
    for (;;) {
      const c = this.peek();
      if (c === " " || c === "\t" || c === "\r") this.pos++;
      else if (newlines && c === "\n") this.pos++;
      else if (newlines && c === "#") while (this.pos < this.text.length && this.peek() !== "\n") this.pos++;
      else return;
    }
  }

  /** The rest of the line must be blank or a comment. */
  endOfLine(): void {
    this.skip(false);
    if (this.peek() === "#") while (this.pos < this.text.length && this.peek() !== "\n") this.pos++;
    if (this.pos < this.text.length && this.peek() !== "\n") this.fail(`unexpected '${this.peek()}' after the value`);
  }

  key(): string {
    const c = this.peek();
    if (c === '"' || c === "'") return this.string();
    const m = BARE_KEY.exec(this.text.slice(this.pos));
    if (!m) this.fail(`expected a key, found '${c}'`);
    this.pos += m[0].length;
    return m[0];
  }

  string(): string {
    const quote = this.peek();
    if (this.text.startsWith(quote.repeat(3), this.pos)) this.fail("multi-line strings are not supported");
    this.pos++;
    let out = "";
    for (;;) {
      const c = this.peek();
      if (c === "" || c === "\n") this.fail("unterminated string");
      this.pos++;
      if (c === quote) return out;
      if (c === "\\" && quote === '"') {
        const e = this.peek();
        this.pos++;
        const simple: Record<string, string> = { b: "\b", t: "\t", n: "\n", f: "\f", r: "\r", '"': '"', "\\": "\\" };
        if (simple[e] !== undefined) out += simple[e];
        else if (e === "u" || e === "U") {
          const len = e === "u" ? 4 : 8;
          const hex = this.text.slice(this.pos, this.pos + len);
          if (!new RegExp(`^[0-9a-fA-F]{${len}}$`).test(hex)) this.fail("bad unicode escape");
          out += String.fromCodePoint(parseInt(hex, 16));
          this.pos += len;
        } else this.fail(`unknown escape '\\${e}'`);
      } else out += c;
    }
  }

  value(): TomlValue {
    const c = this.peek();
    if (c === '"' || c === "'") return this.string();
    if (c === "[") return this.array();
    if (c === "{") return this.inlineTable();
    const m = /^[^\s,\]}#]+/.exec(this.text.slice(this.pos));
    if (!m) this.fail(`expected a value, found '${c}'`);
    const word = m[0];
    this.pos += word.length;
    if (word === "true") return true;
    if (word === "false") return false;
    if (/^[+-]?(0|[1-9](_?\d)*)$/.test(word)) return Number(word.replace(/_/g, ""));
    if (/^[+-]?(0|[1-9](_?\d)*)(\.\d(_?\d)*)?([eE][+-]?\d+)?$/.test(word)) return Number(word.replace(/_/g, ""));
    if (/^0x[0-9a-fA-F_]+$/.test(word)) return parseInt(word.slice(2).replace(/_/g, ""), 16);
    return this.fail(`'${word}' is not a value this reader takes (string, number, boolean, array or inline table)`);
  }

  array(): TomlValue[] {
    this.pos++;
    const out: TomlValue[] = [];
    for (;;) {
      this.skip(true);
      if (this.peek() === "]") {
        this.pos++;
        return out;
      }
      out.push(this.value());
      this.skip(true);
      if (this.peek() === ",") this.pos++;
      else if (this.peek() !== "]") this.fail(`expected ',' or ']' in an array, found '${this.peek() || "the end"}'`);
    }
  }

  inlineTable(): TomlTable {
    this.pos++;
    const out: TomlTable = {};
    this.skip(false);
    if (this.peek() === "}") {
      this.pos++;
      return out;
    }
    for (;;) {
      this.skip(false);
      const k = this.key();
      this.skip(false);
      if (this.peek() !== "=") this.fail(`expected '=' after '${k}'`);
      this.pos++;
      this.skip(false);
      if (k in out) this.fail(`'${k}' is defined twice`);
      out[k] = this.value();
      this.skip(false);
      if (this.peek() === "}") {
        this.pos++;
        return out;
      }
      if (this.peek() !== ",") this.fail("expected ',' or '}' in an inline table");
      this.pos++;
    }
  }
}

function isTable(v: TomlValue): v is TomlTable {
  return typeof v === "object" && !Array.isArray(v);
}

/** The document as nested tables. Throws TomlError with the line of the first problem. */
export function parseToml(text: string): TomlTable {
  const r = new Reader(text);
  const root: TomlTable = {};
  let table = root;
  const declared = new Set<string>();
  for (;;) {
    r.skip(true);
    if (r.pos >= text.length) return root;
    if (r.peek() === "[") {
      if (text.startsWith("[[", r.pos)) r.fail("arrays of tables are not supported");
      r.pos++;
      const path: string[] = [];
      for (;;) {
        r.skip(false);
        path.push(r.key());
        r.skip(false);
        if (r.peek() === ".") r.pos++;
        else if (r.peek() === "]") break;
        else r.fail("expected '.' or ']' in a table header");
      }
      r.pos++;
      r.endOfLine();
      const name = path.join(".");
      if (declared.has(name)) r.fail(`table [${name}] is defined twice`);
      declared.add(name);
      table = root;
      for (const part of path) {
        const next: TomlValue = table[part] ?? {};
        if (!isTable(next)) throw new TomlError(`line ${r.line}: '${part}' is not a table`);
        table[part] = next;
        table = next;
      }
      continue;
    }
    const k = r.key();
    r.skip(false);
    if (r.peek() === ".") r.fail("dotted keys are not supported");
    if (r.peek() !== "=") r.fail(`expected '=' after '${k}'`);
    r.pos++;
    r.skip(false);
    if (k in table) r.fail(`'${k}' is defined twice`);
    table[k] = r.value();
    r.endOfLine();
  }
}
