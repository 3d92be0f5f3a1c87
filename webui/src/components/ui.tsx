// Small shared pieces: notices, badges, a key/value list, a busy-aware button.

import type { ComponentChildren } from "preact";

export type Tone = "ok" | "warn" | "error" | "info" | "muted";

/** A message for the operator; errors are announced at once (role=alert), the rest politely. */
export function Notice({ tone, children, testId }: { tone: Tone; children: ComponentChildren; testId?: string }) {
  return (
    <p class={`notice notice-${tone}`} role={tone === "error" ? "alert" : "status"} data-testid={testId}>
      {children}
    </p>
  );
}

export function Badge({ tone, children, title }: { tone: Tone; children: ComponentChildren; title?: string }) {
  return (
    <span class={`badge badge-${tone}`} title={title}>
      {children}
    </span>
  );
}

/** A definition list of label → value rows. */
export function Facts({ rows, testId }: { rows: [string, ComponentChildren][]; testId?: string }) {
  return (
    <dl class="facts" data-testid={testId}>
      {rows.map(([k, v]) => (
        <div key={k}>
          <dt>{k}</dt>
          <dd>{v}</dd>
        </div>
      ))}
    </dl>
  );
}

/** A tone for a state word the API uses. */
export function toneOf(state: string): Tone {
  if (["ok", "running", "ready", "idle", "normal", "open"].includes(state)) return "ok";
  if (["failed", "error", "not_ready", "stopped", "closed"].includes(state)) return "error";
  if (["pending", "in_progress", "reloading", "retrying", "connecting", "always_false", "always_true"].includes(state)) return "warn";
  return "muted";
}
