// One recorded query in full (GET records/<id>): the question, the answer, and the execution path
// step by step — each rule the query met, which of its matchers matched, which executor ran and how
// it ended — with the rule that matched and the executor that answered called out. With a
// dynamic_domain_set configured, "Block" and "Allow" add the question's name to one (set-actions.tsx).

import type { ComponentChildren } from "preact";
import { useSignal } from "@preact/signals";
import { useEffect, useRef } from "preact/hooks";
import { errorText } from "../api";
import { Badge, Facts, Notice, type Tone } from "../components/ui";
import { millis, when } from "../format";
import { outcomeText, recorderGet, type FullRecord, type RecordRow, type ResourceRecord, type Step } from "../recorder";
import { SetActions } from "./set-actions";

interface Rule {
  sequence: string;
  /** node_index: the rule's place in its sequence, from 0 (shown from 1, as in the YAML list); null for a step outside any rule. */
  index: number | null;
  steps: Step[];
}

/** Consecutive steps of one rule (sequence tag + rule index) grouped, in order. */
function rulesOf(steps: Step[]): Rule[] {
  const rules: Rule[] = [];
  for (const s of steps) {
    const last = rules[rules.length - 1];
    if (last && last.sequence === s.sequence_tag && last.index === s.node_index) last.steps.push(s);
    else rules.push({ sequence: s.sequence_tag, index: s.node_index, steps: [s] });
  }
  return rules;
}

/** The last executor or builtin on the path: the one whose result the client got (when there was a response). */
function finalStep(steps: Step[]): Step | null {
  for (let i = steps.length - 1; i >= 0; i--) if (steps[i].kind !== "matcher") return steps[i];
  return null;
}

/** The rule whose matchers let its executors run: the one holding the final step, when it has matchers. */
function matchedRule(rules: Rule[], last: Step | null): Rule | null {
  if (last === null) return null;
  const rule = rules.find((r) => r.steps.includes(last));
  return rule && rule.steps.some((s) => s.kind === "matcher") ? rule : null;
}

/** An inline executor or matcher of a rule (`exec: forward 1.1.1.1`) is tagged qs.<exec|match>.<sequence>.<rule>.<type>: shown by its type. */
const INLINE = /^qs\.(?:exec|match|cron)\.(?:.+)\.\d+\.([a-z0-9_]+)$/;

function stepName(s: Step): { name: string; kind: string } {
  const inline = INLINE.exec(s.tag);
  return inline ? { name: inline[1], kind: `inline ${s.kind}` } : { name: s.tag, kind: s.kind };
}

const STEP_TONE: Record<string, Tone> = { matched: "ok", not_matched: "muted", entered: "info", next: "info", stop: "ok", return: "ok", error: "error" };

function Records({ title, rows }: { title: string; rows: ResourceRecord[] }) {
  if (rows.length === 0) return null;
  return (
    <>
      <h3 class="subhead">{title}</h3>
      <ul class="rrs mono">
        {rows.map((r, i) => (
          <li key={i}>
            {r.name} {r.ttl} {r.class} {r.rr_type} {r.payload_text}
          </li>
        ))}
      </ul>
    </>
  );
}

const flags = (r: RecordRow): string =>
  [r.resp_aa && "aa", r.resp_tc && "tc", r.resp_ra && "ra", r.resp_ad && "ad", r.resp_cd && "cd"].filter((f): f is string => typeof f === "string").join(" ") || "none";

function Path({ full }: { full: FullRecord }) {
  const rules = rulesOf(full.steps);
  const last = finalStep(full.steps);
  const rule = matchedRule(rules, last);
  const answered = full.record.has_response && last !== null;
  return (
    <>
      <p data-testid="path-summary">
        {rule ? (
          <>
            {rule.index === null ? "A step" : `Rule ${rule.index + 1}`} of <span class="mono">{rule.sequence}</span> matched (
            {rule.steps
              .filter((s) => s.kind === "matcher")
              .map((s) => stepName(s).name)
              .join(", ")}
            ).{" "}
          </>
        ) : (
          "No rule with a matcher decided this query. "
        )}
        {last ? (
          <>
            {answered ? "Answered by" : "Ended at"} <span class="mono">{stepName(last).name}</span> ({stepName(last).kind}, {last.outcome.replace("_", " ")}).
          </>
        ) : (
          "No executor ran after the recorder."
        )}
      </p>
      {rules.length === 0 ? (
        <p class="hint">The path is empty: nothing ran after the recorder.</p>
      ) : (
        <ol class="path" data-testid="record-steps">
          {rules.map((r) => (
            <li key={`${r.sequence}:${r.index}:${r.steps[0]?.event_index}`} class={r === rule ? "path-rule hit" : "path-rule"}>
              <span class="hint">
                <span class="mono">{r.sequence}</span>
                {r.index !== null && ` · rule ${r.index + 1}`}
              </span>
              <ul>
                {r.steps.map((s) => (
                  <li key={s.event_index} data-kind={s.kind} data-tag={s.tag} data-outcome={s.outcome} class={s === last && answered ? "answered" : undefined}>
                    <span class="step-kind">{stepName(s).kind}</span>{" "}
                    <span class="mono" title={s.tag}>
                      {stepName(s).name}
                    </span>{" "}
                    <Badge tone={STEP_TONE[s.outcome] ?? "muted"}>{s.outcome.replace("_", " ")}</Badge>
                    {s === last && answered && <strong class="answered-by"> answered</strong>}
                  </li>
                ))}
              </ul>
            </li>
          ))}
        </ol>
      )}
    </>
  );
}

export function RecordDetail({ tag, id, onClose }: { tag: string; id: number; onClose: () => void }) {
  const full = useSignal<FullRecord | null>(null);
  const error = useSignal<string | null>(null);
  const heading = useRef<HTMLHeadingElement>(null);

  useEffect(() => {
    full.value = null;
    error.value = null;
    recorderGet<{ record: FullRecord }>(tag, `records/${id}`)
      .then((a) => (full.value = a.record))
      .catch((err: unknown) => (error.value = errorText(err)));
    heading.current?.focus();
  }, [tag, id]);

  const r = full.value?.record;
  return (
    <section class="card detail" aria-labelledby="record-title" data-testid="record-detail">
      <header class="page-head">
        <h2 id="record-title" tabIndex={-1} ref={heading}>
          Query #{id}
        </h2>
        <button type="button" onClick={onClose} data-testid="record-close">
          Close
        </button>
      </header>
      {error.value && <Notice tone="error">{error.value}</Notice>}
      {!r && !error.value && <p class="hint">Loading…</p>}
      {r && full.value && (
        <>
          <Facts
            rows={[
              ["time", when(r.created_at_ms)],
              ["client", <span class="mono">{r.client_name === null ? r.client_ip : `${r.client_name} (${r.client_ip})`}</span>],
              ...(r.client_groups.length > 0 ? ([["groups", <span class="mono">{r.client_groups.join(", ")}</span>]] as [string, ComponentChildren][]) : []),
              ...(r.instance ? ([["instance", <span class="mono">{r.instance}</span>]] as [string, ComponentChildren][]) : []),
              ["question", <span class="mono">{r.questions_json.map((q) => `${q.name} ${q.qclass} ${q.qtype}`).join(", ") || "none"}</span>],
              ["request", `${r.req_opcode}, id ${r.request_id}${r.req_rd ? ", rd" : ""}${r.req_cd ? ", cd" : ""}${r.req_ad ? ", ad" : ""}`],
              ["outcome", outcomeText(r)],
              ...(r.error !== null ? ([["error", r.error]] as [string, ComponentChildren][]) : []),
              ["flags", r.has_response ? flags(r) : "—"],
              ["took", millis(r.elapsed_us / 1000)],
            ]}
          />
          {r.questions_json[0] && <SetActions key={id} qname={r.questions_json[0].name} />}
          <h3 class="subhead">Execution path</h3>
          <Path full={full.value} />
          <Records title={`Answers (${r.answer_count})`} rows={r.answers_json} />
          <Records title={`Authority (${r.authority_count})`} rows={r.authorities_json} />
          <Records title={`Additional (${r.additional_count})`} rows={r.additionals_json} />
        </>
      )}
    </section>
  );
}
