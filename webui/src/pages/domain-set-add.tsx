// The add form of a dynamic_domain_set's rules editor: rules one per line (blank lines and # comments
// skipped), what a bare name means, and an optional lifetime. The API checks every rule before adding
// any; the ones it refuses are shown with their line, and the text stays for fixing.

import { useSignal } from "@preact/signals";
import { Notice } from "../components/ui";
import type { RuleProblem } from "../domain-sets";

/** The body of POST .../rules this form sends. */
export interface AddRequest {
  rules: string[];
  rule_kind: "full" | "domain";
  ttl?: string | number;
}

/** The API's limit on rules per request (schemas.ts, RULES_PER_REQUEST). */
const MAX_RULES = 10_000;

interface Line {
  line: number;
  text: string;
}

/** The rules of the text, each with its line number (from 1). */
function rulesOf(text: string): Line[] {
  return text
    .split("\n")
    .map((raw, i) => ({ line: i + 1, text: raw.trim() }))
    .filter((l) => l.text !== "" && !l.text.startsWith("#"));
}

/** A bad lifetime (index null) is also reported at each rule it applies to: shown once, at the field. */
function ownProblems(list: RuleProblem[]): RuleProblem[] {
  const common = new Set(list.filter((p) => p.index === null).map((p) => p.message));
  return list.filter((p) => p.index === null || !common.has(p.message));
}

/** Where a refused item was: its line, or the lifetime field for the request's own ttl. */
function where(p: RuleProblem, lines: Line[]): string {
  if (p.index === null) return "Expires after";
  const l = lines[p.index];
  return l ? `line ${l.line}` : `rule ${p.index + 1}`;
}

export function AddRules({ tag, busy, add }: { tag: string; busy: boolean; add: (req: AddRequest) => Promise<{ ok: boolean; problems: RuleProblem[] }> }) {
  const draft = useSignal("");
  const kind = useSignal<"full" | "domain">("domain");
  const ttl = useSignal("");
  const problems = useSignal<{ lines: Line[]; list: RuleProblem[] } | null>(null);
  const local = useSignal<string | null>(null);

  const submit = async (e: Event): Promise<void> => {
    e.preventDefault();
    const lines = rulesOf(draft.value);
    problems.value = null;
    local.value =
      lines.length === 0 ? "Write at least one rule (one per line)." : lines.length > MAX_RULES ? `At most ${MAX_RULES.toLocaleString()} rules at a time (this has ${lines.length.toLocaleString()}).` : null;
    if (local.value !== null) return;
    const life = ttl.value.trim();
    const req: AddRequest = { rules: lines.map((l) => l.text), rule_kind: kind.value, ...(life === "" ? {} : { ttl: /^\d+$/.test(life) ? Number(life) : life }) };
    const out = await add(req);
    if (out.ok) draft.value = "";
    else if (out.problems.length > 0) problems.value = { lines, list: ownProblems(out.problems) };
  };

  const bad = problems.value;
  return (
    <form class="add-rules" onSubmit={(e) => void submit(e)} aria-label={`Add rules to ${tag}`}>
      <label class="stacked">
        <span>
          Add rules, one per line (<span class="mono">full:</span>, <span class="mono">domain:</span>, <span class="mono">keyword:</span>, <span class="mono">regexp:</span> or a bare
          name)
        </span>
        <textarea
          class="mono"
          rows={4}
          value={draft.value}
          onInput={(e) => (draft.value = e.currentTarget.value)}
          placeholder={"ads.example\nfull:tracker.example\nkeyword:beacon"}
          spellcheck={false}
          aria-invalid={bad !== null || local.value !== null}
          data-testid={`add-rules-${tag}`}
        />
      </label>
      <div class="inline-form">
        <label>
          A bare name means{" "}
          <select value={kind.value} onChange={(e) => (kind.value = e.currentTarget.value === "full" ? "full" : "domain")} aria-label={`What a bare name means in ${tag}`}>
            <option value="domain">with its subdomains (domain:)</option>
            <option value="full">that name only (full:)</option>
          </select>
        </label>
        <label>
          Expires after{" "}
          <input value={ttl.value} onInput={(e) => (ttl.value = e.currentTarget.value)} placeholder="never" size={8} aria-label={`Lifetime of the added rules (e.g. 10m, 24h, 7d; empty: never)`} data-testid={`add-ttl-${tag}`} />
        </label>
        <button type="submit" class="primary" disabled={busy}>
          Add
        </button>
      </div>
      {local.value && <Notice tone="error">{local.value}</Notice>}
      {bad && (
        <div role="alert" class="notice notice-error" data-testid={`add-problems-${tag}`}>
          Nothing was added: {bad.list.length === 1 ? "one rule is" : `${bad.list.length} rules are`} not valid.
          <ul class="problems">
            {bad.list.map((p) => (
              <li key={`${p.index ?? "ttl"}`} data-line={p.index === null ? "ttl" : (bad.lines[p.index]?.line ?? "")}>
                {where(p, bad.lines)}
                {p.rule !== null && (
                  <>
                    {" "}
                    (<span class="mono">{p.rule}</span>)
                  </>
                )}
                : {p.message}
              </li>
            ))}
          </ul>
        </div>
      )}
    </form>
  );
}
