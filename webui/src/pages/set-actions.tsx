// "Block" and "Allow" on a recorded query: add its name to a dynamic_domain_set (POST .../rules), as
// that name only (full:) or with its subdomains (domain:), for good or for a while. Each action adds to
// the set the operator picks for it (remembered for the tab, see ../domain-sets); what the set then does
// to queries is the pipeline's business, so the result names the set and the rule, not an effect.
// Dynamic rules need the operator role: a viewer does not see these actions.

import { useSignal } from "@preact/signals";
import { pluginPath, refusalText, send } from "../api";
import { Notice, type Tone } from "../components/ui";
import { plural } from "../format";
import { can } from "../session";
import { chooseSet, domainSets, ruleName, setChoice, setFor, TTL_CHOICES, type SetAction } from "../domain-sets";
import type { DomainRulesAdded } from "../shapes";

const ACTIONS: { action: SetAction; label: string }[] = [
  { action: "block", label: "Block" },
  { action: "allow", label: "Allow" },
];

export function SetActions({ qname }: { qname: string }) {
  const kind = useSignal<"full" | "domain">("full");
  const ttl = useSignal("");
  const busy = useSignal(false);
  const result = useSignal<{ tone: Tone; text: string } | null>(null);

  const sets = domainSets.value;
  const name = ruleName(qname);
  if (sets.length === 0 || name === "" || !can("operator")) return null;
  const rule = `${kind.value}:${name}`;
  const lifetime = TTL_CHOICES.find((c) => c.value === ttl.value)?.label ?? ttl.value;

  const add = async (action: SetAction, tag: string): Promise<void> => {
    busy.value = true;
    result.value = null;
    try {
      const out = await send<DomainRulesAdded>("POST", pluginPath(tag, "rules"), { rules: [name], rule_kind: kind.value, ...(ttl.value ? { ttl: ttl.value } : {}) });
      const label = action === "block" ? "Block" : "Allow";
      result.value =
        out.added > 0
          ? { tone: "ok", text: `${label}: added ${rule} to ${tag} (${lifetime}; ${plural(out.total, "rule")} now).` }
          : { tone: "info", text: `${label}: ${rule} was already in ${tag}; it now lasts ${lifetime}.` };
    } catch (err) {
      result.value = { tone: "error", text: `Could not add ${rule} to ${tag}. ${refusalText(err)}` };
    } finally {
      busy.value = false;
    }
  };

  return (
    <section class="set-actions" aria-labelledby="set-actions-title" data-testid="set-actions">
      <h3 class="subhead" id="set-actions-title">
        Block or allow <span class="mono">{name}</span>
      </h3>
      <div class="inline-form">
        <label>
          Rule{" "}
          <select value={kind.value} onChange={(e) => (kind.value = e.currentTarget.value === "domain" ? "domain" : "full")} data-testid="set-kind">
            <option value="full">this name only (full:)</option>
            <option value="domain">with its subdomains (domain:)</option>
          </select>
        </label>
        <label>
          For{" "}
          <select value={ttl.value} onChange={(e) => (ttl.value = e.currentTarget.value)} data-testid="set-ttl">
            {TTL_CHOICES.map((c) => (
              <option key={c.value} value={c.value}>
                {c.label}
              </option>
            ))}
          </select>
        </label>
      </div>
      {ACTIONS.map(({ action, label }) => {
        const tag = setFor(action, sets, setChoice.value);
        return (
          <form key={action} class="inline-form" onSubmit={(e) => {
              e.preventDefault();
              if (tag !== null) void add(action, tag);
            }} data-action={action}>
            <label>
              {label} adds to{" "}
              <select value={tag ?? ""} onChange={(e) => chooseSet(action, e.currentTarget.value)} data-testid={`set-for-${action}`}>
                {tag === null && <option value="">choose a set…</option>}
                {sets.map((p) => (
                  <option key={p.tag} value={p.tag}>
                    {p.tag}
                  </option>
                ))}
              </select>
            </label>
            <button type="submit" class={action === "block" ? "danger" : undefined} disabled={busy.value || tag === null} data-testid={`set-${action}`}>
              {label}
            </button>
          </form>
        );
      })}
      {result.value && (
        <Notice tone={result.value.tone} testId="set-result">
          {result.value.text}
        </Notice>
      )}
    </section>
  );
}
