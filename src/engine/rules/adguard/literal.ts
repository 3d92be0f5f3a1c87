// A literal every match of a regular expression must contain, so /regex/ rules can be found
// through the keyword automaton instead of being tried on every name. Conservative: anything not
// understood (alternation, escapes with payloads, groups) gives up or ends the literal; "" means
// "no literal known" and the rule is tested on every name.

/** Escapes whose payload follows them (\u0041, \x41, \cJ, \p{L}, \k<n>, \1): give up on these. */
const PAYLOAD_ESCAPES = /\\[uxcpPk1-9]/;

/** The longest run of literal characters at top level (lower case), or "". */
export function regexpLiteral(source: string): string {
  if (source.includes("|") || PAYLOAD_ESCAPES.test(source)) return "";
  let best = "";
  let run = "";
  let depth = 0;
  const end = (): void => {
    if (run.length > best.length) best = run;
    run = "";
  };
  for (let i = 0; i < source.length; i++) {
    const c = source[i];
    if (c === "\\") {
      const next = source[i + 1] ?? "";
      i++;
      // \d, \w, \s, \b ... are classes or assertions; \. \- \/ ... are the character itself.
      if (/[A-Za-z0-9]/.test(next) || next === "" || depth > 0) end();
      else run += next;
    } else if (c === "[") {
      end();
      // Skip the class (a `]` right after `[` or `[^` is a member, not the end).
      let j = i + 1;
      if (source[j] === "^") j++;
      if (source[j] === "]") j++;
      while (j < source.length && source[j] !== "]") j += source[j] === "\\" ? 2 : 1;
      i = j;
    } else if (c === "(") {
      end();
      depth++;
    } else if (c === ")") {
      end();
      depth = Math.max(0, depth - 1);
    } else if (c === "?" || c === "*" || c === "{") {
      // The character before an optional quantifier may be absent: it leaves the run.
      run = run.slice(0, -1);
      end();
      if (c === "{") while (i < source.length && source[i] !== "}") i++;
    } else if (c === "+") {
      end();
    } else if (c === "." || c === "^" || c === "$") {
      end();
    } else if (depth === 0 && c.charCodeAt(0) < 0x80) {
      run += c.toLowerCase();
    } else {
      end();
    }
  }
  end();
  return best;
}
