// The groups of the `clients` provider with their members and a per-group pause: 15 min, 1 h, or until
// a chosen time (POST groups/<group>/pause), which turns the provider's `pause:` matchers off for the
// group's clients until the end time shown here; Resume (DELETE groups/<group>/pause) ends it early.
// Pausing and resuming need the operator role; a viewer sees the state only.

import { useSignal } from "@preact/signals";
import { refusalText } from "../api";
import { pauseGroup, pauseUntil, resumeGroup, type ClientGroup } from "../clients";
import { Badge, Notice } from "../components/ui";
import { localInput, localMs, relative, when } from "../format";
import { can } from "../session";

const PRESETS: { duration: string; label: string }[] = [
  { duration: "15m", label: "15 min" },
  { duration: "1h", label: "1 h" },
];

function GroupPause({ tag, group, now, changed }: { tag: string; group: ClientGroup; now: number; changed: () => void }) {
  const until = useSignal(localInput(now + 3_600_000));
  const picking = useSignal(false);
  const busy = useSignal(false);
  const error = useSignal<string | null>(null);

  const run = async (work: () => Promise<unknown>): Promise<void> => {
    busy.value = true;
    try {
      await work();
      error.value = null;
      picking.value = false;
    } catch (err) {
      error.value = refusalText(err);
    } finally {
      busy.value = false;
      changed();
    }
  };

  const pauseTill = (e: Event): void => {
    e.preventDefault();
    const duration = pauseUntil(localMs(until.value), Date.now());
    if (typeof duration !== "string") {
      error.value = duration.error;
      return;
    }
    void run(() => pauseGroup(tag, group.name, duration));
  };

  // The server's word: paused until it says otherwise (this browser's clock may differ from its clock).
  const end = group.paused_until_ms;
  const paused = end !== null;
  return (
    <div class="control" data-testid={`group-${group.name}-pause`}>
      <p class="hint" data-testid={`group-${group.name}-state`} data-paused={paused ? "true" : "false"}>
        {paused ? (
          <>
            <Badge tone="warn">paused</Badge> until <time dateTime={new Date(end).toISOString()}>{when(end)}</time> ({relative(end, now)})
          </>
        ) : (
          <Badge tone="ok">active</Badge>
        )}
      </p>
      {can("operator") && (
      <div class="inline-form">
        <div class="segmented" role="group" aria-label={`Pause ${group.name} for`}>
          {PRESETS.map((p) => (
            <button key={p.duration} type="button" disabled={busy.value} onClick={() => void run(() => pauseGroup(tag, group.name, p.duration))} data-duration={p.duration}>
              {p.label}
            </button>
          ))}
          <button type="button" disabled={busy.value} aria-expanded={picking.value} onClick={() => (picking.value = !picking.value)}>
            Until…
          </button>
        </div>
        {paused && (
          <button type="button" disabled={busy.value} onClick={() => void run(() => resumeGroup(tag, group.name))} data-testid={`group-${group.name}-resume`}>
            Resume
          </button>
        )}
      </div>
      )}
      {picking.value && can("operator") && (
        <form class="inline-form" onSubmit={pauseTill} aria-label={`Pause ${group.name} until`}>
          <label>
            Until <input type="datetime-local" value={until.value} onInput={(e) => (until.value = e.currentTarget.value)} data-testid={`group-${group.name}-until`} />
          </label>
          <button type="submit" disabled={busy.value}>
            Pause
          </button>
        </form>
      )}
      {error.value && <Notice tone="error">{error.value}</Notice>}
    </div>
  );
}

export function ClientGroups({ tag, groups, now, changed }: { tag: string; groups: ClientGroup[]; now: number; changed: () => void }) {
  if (groups.length === 0) return <p class="hint">The configuration declares no groups.</p>;
  return (
    <ul class="jobs" data-testid="groups">
      {groups.map((g) => (
        <li key={g.name} class="job" data-group={g.name}>
          <div class="job-head">
            <span class="mono job-name">{g.name}</span>
            <span class="hint">
              {g.members.length === 0 ? "no named members" : `${g.members.length} named member${g.members.length === 1 ? "" : "s"}`}
              {g.addresses.length > 0 && `, ${g.addresses.length} address${g.addresses.length === 1 ? "" : "es"}`}
            </span>
          </div>
          {(g.members.length > 0 || g.addresses.length > 0) && (
            <p class="mono small-text">
              {[...g.members, ...g.addresses].join(", ")}
            </p>
          )}
          <GroupPause tag={tag} group={g} now={now} changed={changed} />
        </li>
      ))}
    </ul>
  );
}
