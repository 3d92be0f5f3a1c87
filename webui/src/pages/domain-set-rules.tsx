// A dynamic_domain_set's rules editor on its Plugins card: the live rules (GET .../rules, paged with
// the cursor, filtered with `q`) with each one's source and time left, counted down here from
// `ttl_left_ms` (so the browser's clock does not matter); the set's status (GET .../rules/status); add
// rules (POST .../rules: one per line, optional ttl), remove one (DELETE .../rules), clear all (POST
// .../rules/clear, confirmed inline). It reads again when the set's actors change (a change made by curl,
// another tab or a learn_domain write shows up by itself) and when a shown rule's time is up. Adding,
// removing and clearing need the operator role; a viewer reads the rules only.

import { useSignal } from "@preact/signals";
import { useRef } from "preact/hooks";
import { useActorLoad } from "../actors";
import { api, errorText, pluginPath, refusalText, send } from "../api";
import { useEvery } from "../components/every";
import { Badge, Notice, type Tone } from "../components/ui";
import { ruleProblems, type RuleProblem } from "../domain-sets";
import { count, duration, plural, when } from "../format";
import { can } from "../session";
import type { DomainRule, DomainRulesAdded, DomainRulesCleared, DomainRulesPage, DomainRulesRemoved, DomainSetStatus } from "../shapes";
import { AddRules, type AddRequest } from "./domain-set-add";

/** Rules per page. */
export const RULES_PAGE = 50;

const SOURCE_TONE: Record<DomainRule["source"], Tone> = { api: "info", learned: "warn", bootstrap: "muted", file: "muted" };

function StatusLine({ s }: { s: DomainSetStatus }) {
  const parts = (["api", "learned", "bootstrap", "file"] as const).filter((k) => s.by_source[k] > 0).map((k) => `${count(s.by_source[k])} ${k}`);
  return (
    <p class="hint" data-testid="set-status">
      <strong>{count(s.rules)}</strong> of at most {count(s.max_entries)} rules{parts.length > 0 ? ` (${parts.join(", ")})` : ""} · file <span class="mono">{s.path}</span>
      {s.unsaved_changes ? " · changes not written yet" : ""}
      {s.expired > 0 ? ` · ${count(s.expired)} expired since loaded` : ""}
    </p>
  );
}

export function DomainSetRules({ tag }: { tag: string }) {
  const search = useSignal("");
  /** The filter the shown page answers. */
  const applied = useSignal("");
  /** Cursors of the pages before this one: [] on the first page. */
  const trail = useSignal<string[]>([]);
  const cursor = useSignal<string | null>(null);
  const page = useSignal<DomainRulesPage | null>(null);
  const status = useSignal<DomainSetStatus | null>(null);
  /** Date.now() when the page was read, and now: a rule's time left is its ttl_left_ms minus the difference. */
  const readAt = useSignal(0);
  const now = useSignal(0);
  const busy = useSignal(false);
  const confirming = useSignal(false);
  const message = useSignal<{ tone: Tone; text: string } | null>(null);
  const loadError = useSignal<string | null>(null);
  // Only the answer of the newest read is shown (a change, a tick and a click may each start one).
  const seq = useRef(0);

  const load = async (): Promise<void> => {
    const mine = ++seq.current;
    const q = new URLSearchParams({ limit: String(RULES_PAGE) });
    if (applied.value !== "") q.set("q", applied.value);
    if (cursor.value !== null) q.set("cursor", cursor.value);
    try {
      const [p, st] = await Promise.all([api<DomainRulesPage>(`${pluginPath(tag, "rules")}?${q.toString()}`), api<DomainSetStatus>(pluginPath(tag, "rules/status"))]);
      if (mine !== seq.current) return;
      // The rules of a later page went away (removed, expired): show the page before it.
      if (p.rules.length === 0 && trail.value.length > 0) {
        const back = trail.value[trail.value.length - 1];
        trail.value = trail.value.slice(0, -1);
        cursor.value = back ? back : null;
        return load();
      }
      page.value = p;
      status.value = st;
      readAt.value = now.value = Date.now();
      loadError.value = null;
    } catch (err) {
      if (mine === seq.current) loadError.value = errorText(err);
    }
  };

  // Read again when the set's actor context changes (a change done, a write of the file, a sweep that
  // removed rules, a reload), not for each timer of its saver and sweeper that changed nothing.
  const lastContext = useRef<Record<string, string>>({});
  useActorLoad(
    tag,
    (id, frame) => {
      if (!id.includes(`/plugin:${tag}/`)) return false;
      const context = JSON.stringify(frame.context);
      if (lastContext.current[id] === context) return false;
      lastContext.current[id] = context;
      return true;
    },
    load,
  );

  const left = (r: DomainRule): number | null => (r.ttl_left_ms === null ? null : r.ttl_left_ms - (now.value - readAt.value));
  const rules = page.value?.rules ?? [];
  useEvery(1000, () => {
    if (!rules.some((r) => r.ttl_left_ms !== null)) return;
    now.value = Date.now();
    // A rule whose time is up is gone from the set already: read the page again.
    if (rules.some((r) => (left(r) ?? 1) <= 0)) return load();
  });

  const show = (cur: string | null, before: string[]): Promise<void> => {
    cursor.value = cur;
    trail.value = before;
    return load();
  };
  const next = (): void => void show(page.value?.next_cursor ?? null, [...trail.value, cursor.value ?? ""]);
  const previous = (): void => {
    const back = trail.value[trail.value.length - 1];
    void show(back ? back : null, trail.value.slice(0, -1));
  };

  /** Runs one change, shows its outcome, and reads the page again. */
  const change = async (what: string, run: () => Promise<string>): Promise<void> => {
    busy.value = true;
    message.value = null;
    try {
      message.value = { tone: "ok", text: await run() };
    } catch (err) {
      message.value = { tone: "error", text: `Could not ${what}. ${refusalText(err)}` };
    } finally {
      busy.value = false;
      await load();
    }
  };

  /** Adds the rules of the form; the rules the API refuses come back for the form to show at their lines. */
  const add = async (req: AddRequest): Promise<{ ok: boolean; problems: RuleProblem[] }> => {
    busy.value = true;
    message.value = null;
    try {
      const out = await send<DomainRulesAdded>("POST", pluginPath(tag, "rules"), req);
      message.value = { tone: "ok", text: `Added ${plural(out.added, "rule")}${out.updated > 0 ? `; ${count(out.updated)} already there, their expiry set again` : ""}; ${plural(out.total, "rule")} now.` };
      return { ok: true, problems: [] };
    } catch (err) {
      const problems = ruleProblems(err);
      if (problems.length === 0) message.value = { tone: "error", text: `Could not add the rules. ${refusalText(err)}` };
      return { ok: false, problems };
    } finally {
      busy.value = false;
      await load();
    }
  };

  const remove = (r: DomainRule): Promise<void> =>
    change(`remove ${r.rule}`, async () => {
      const out = await send<DomainRulesRemoved>("DELETE", pluginPath(tag, "rules"), { rules: [r.rule] });
      return out.removed > 0 ? `Removed ${r.rule}.` : `${r.rule} was no longer in the set.`;
    });

  const clear = (): Promise<void> => {
    confirming.value = false;
    return change("clear the set", async () => {
      const out = await send<DomainRulesCleared>("POST", pluginPath(tag, "rules/clear"));
      trail.value = [];
      cursor.value = null;
      return `Cleared: ${plural(out.removed, "rule")} removed.`;
    });
  };

  const p = page.value;
  const first = trail.value.length * RULES_PAGE;
  const operator = can("operator");
  return (
    <div class="set-rules" data-testid={`set-rules-${tag}`}>
      {status.value && <StatusLine s={status.value} />}
      {status.value?.last_write_error && <Notice tone="warn">The last write of the file failed (tried again at the next interval; the rules serve on): {status.value.last_write_error}</Notice>}
      <form
        class="toolbar"
        onSubmit={(e) => {
          e.preventDefault();
          applied.value = search.value.trim();
          void show(null, []);
        }}
      >
        <label>
          Rule contains{" "}
          <input type="search" value={search.value} onInput={(e) => (search.value = e.currentTarget.value)} aria-label={`Search the rules of ${tag}`} size={16} />
        </label>
        <button type="submit">Search</button>
        {!operator ? null : confirming.value ? (
          <span class="confirm">
            <button type="button" class="danger" onClick={() => void clear()} disabled={busy.value}>
              Yes, remove {status.value ? `all ${plural(status.value.rules, "rule")}` : "every rule"}
            </button>
            <button type="button" onClick={() => (confirming.value = false)}>
              Cancel
            </button>
          </span>
        ) : (
          <button type="button" onClick={() => (confirming.value = true)} disabled={busy.value || status.value?.rules === 0}>
            Clear all…
          </button>
        )}
      </form>
      {loadError.value && <Notice tone="error">Could not read the rules: {loadError.value}</Notice>}
      {message.value && (
        <Notice tone={message.value.tone} testId={`set-message-${tag}`}>
          {message.value.text}
        </Notice>
      )}
      {p && p.rules.length === 0 ? (
        <p class="hint">{applied.value ? `No rule contains “${applied.value}”.` : "The set has no rules."}</p>
      ) : (
        <div class="table-wrap">
          <table class="stack">
            <thead>
              <tr>
                <th scope="col">Rule</th>
                <th scope="col">Source</th>
                <th scope="col">Expires</th>
                <th scope="col">Added</th>
                {operator && (
                  <th scope="col">
                    <span class="sr-only">Actions</span>
                  </th>
                )}
              </tr>
            </thead>
            <tbody>
              {rules.map((r) => {
                const l = left(r);
                return (
                  <tr key={r.rule} data-rule={r.rule}>
                    <td class="mono rule-text" data-label="Rule">
                      {r.rule}
                    </td>
                    <td data-label="Source">
                      <Badge tone={SOURCE_TONE[r.source]}>{r.source}</Badge>
                    </td>
                    <td class="nowrap" data-label="Expires" title={r.expires_at_ms === null ? undefined : when(r.expires_at_ms)} data-testid="rule-expires">
                      {l === null ? "never" : l > 0 ? `in ${duration(l)}` : "now"}
                    </td>
                    <td class="nowrap" data-label="Added">
                      {when(r.added_at_ms)}
                    </td>
                    {operator && (
                      <td>
                        <button type="button" class="small" onClick={() => void remove(r)} disabled={busy.value} aria-label={`Remove ${r.rule}`}>
                          Remove
                        </button>
                      </td>
                    )}
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      {p && (trail.value.length > 0 || p.next_cursor !== null) && (
        <div class="toolbar">
          <button type="button" onClick={previous} disabled={trail.value.length === 0}>
            ← Previous
          </button>
          <button type="button" onClick={next} disabled={p.next_cursor === null}>
            Next →
          </button>
        </div>
      )}
      {p && p.rules.length > 0 && (
        <p class="hint" data-testid={`set-range-${tag}`}>
          {count(first + 1)}–{count(first + p.rules.length)} of {count(p.total)}
          {applied.value ? ` containing “${applied.value}”` : ""}
        </p>
      )}
      {operator && <AddRules tag={tag} busy={busy.value} add={add} />}
    </div>
  );
}
