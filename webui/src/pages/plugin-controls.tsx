// Controls of one plugin: a matcher's runtime mode (POST .../mode, optionally for N minutes) and a
// provider's reload (POST .../reload) with its rule count (GET .../reload/status). Both read their
// status once and again whenever the plugin's actors change (useActorLoad): a timed mode that ends,
// a reload asked elsewhere, show up by themselves, with no polling. Changing either needs the operator
// role: a viewer sees the state only.

import { useSignal } from "@preact/signals";
import { useActorLoad } from "../actors";
import { useEvery } from "../components/every";
import { api, errorText, pluginPath, send } from "../api";
import { clock, count, duration } from "../format";
import { Badge, Notice, toneOf } from "../components/ui";
import { can } from "../session";
import type { MatcherStatus, ProviderReloaded, ProviderStatus } from "../shapes";

const MODES: { mode: MatcherStatus["mode"]; label: string; hint: string }[] = [
  { mode: "normal", label: "Normal", hint: "the matcher checks each query" },
  { mode: "always_true", label: "Always true", hint: "every query matches ($tag matches, !$tag misses)" },
  { mode: "always_false", label: "Always false", hint: "no query matches ($tag misses, !$tag matches)" },
];

export function MatcherControl({ tag }: { tag: string }) {
  const status = useSignal<MatcherStatus | null>(null);
  const minutes = useSignal("10");
  const busy = useSignal(false);
  const error = useSignal<string | null>(null);
  const now = useSignal(Date.now());

  const load = async (): Promise<void> => {
    try {
      status.value = await api<MatcherStatus>(pluginPath(tag, "status"));
      now.value = Date.now();
      error.value = null;
    } catch (err) {
      error.value = errorText(err);
    }
  };

  // A timed mode that ends on the server changes the matcher's actor: read again then.
  useActorLoad(tag, (id) => id.includes(`/plugin:${tag}/`), load);
  // The countdown ticks here; nothing is asked of the server.
  const until = status.value?.until_ms ?? null;
  useEvery(1000, () => {
    if (until !== null) now.value = Date.now();
  });

  const setMode = async (mode: MatcherStatus["mode"], forMinutes?: number): Promise<void> => {
    busy.value = true;
    try {
      status.value = await send<MatcherStatus>("POST", pluginPath(tag, "mode"), forMinutes === undefined ? { mode } : { mode, duration: `${forMinutes}m` });
      now.value = Date.now();
      error.value = null;
    } catch (err) {
      error.value = errorText(err);
    } finally {
      busy.value = false;
    }
  };

  const pause = (e: Event): void => {
    e.preventDefault();
    const n = Number(minutes.value);
    if (!Number.isInteger(n) || n < 1 || n > 10080) {
      error.value = "Minutes must be a whole number from 1 to 10080 (7 days).";
      return;
    }
    void setMode("always_false", n);
  };

  const current = status.value?.mode;
  return (
    <div class="control" data-testid={`matcher-${tag}`}>
      {can("operator") && (
        <>
          <div class="segmented" role="group" aria-label={`Runtime mode of ${tag}`}>
            {MODES.map((m) => (
              <button key={m.mode} type="button" aria-pressed={current === m.mode} disabled={busy.value} title={m.hint} onClick={() => void setMode(m.mode)} data-mode={m.mode}>
                {m.label}
              </button>
            ))}
          </div>
          <form class="inline-form" onSubmit={pause}>
            <label>
              Pause for{" "}
              <input type="number" inputMode="numeric" min={1} max={10080} step={1} value={minutes.value} onInput={(e) => (minutes.value = e.currentTarget.value)} aria-label={`Minutes to pause ${tag}`} /> min
            </label>
            <button type="submit" disabled={busy.value} title="Always false for that long (a block list stops blocking), then back to normal">
              Pause
            </button>
          </form>
        </>
      )}
      {status.value && (
        <p class="hint" data-testid={`matcher-${tag}-status`}>
          Mode <Badge tone={toneOf(status.value.mode)}>{status.value.mode}</Badge>
          {until !== null && (
            <>
              {" "}
              until {clock(until)} (back to normal in {duration(until - now.value)})
            </>
          )}
        </p>
      )}
      {error.value && <Notice tone="error">{error.value}</Notice>}
    </div>
  );
}

export function ProviderControl({ tag }: { tag: string }) {
  const status = useSignal<ProviderStatus | null>(null);
  const busy = useSignal(false);
  const result = useSignal<string | null>(null);
  const error = useSignal<string | null>(null);

  const load = async (): Promise<void> => {
    try {
      status.value = await api<ProviderStatus>(pluginPath(tag, "reload/status"));
    } catch (err) {
      error.value = errorText(err);
    }
  };

  useActorLoad(tag, (id) => id.includes(`/plugin:${tag}/`), load);

  const reload = async (): Promise<void> => {
    busy.value = true;
    result.value = null;
    try {
      const out = await send<ProviderReloaded>("POST", pluginPath(tag, "reload"));
      result.value = `Reloaded: ${count(out.rules)} rules in ${out.duration_ms} ms.`;
      error.value = null;
    } catch (err) {
      error.value = errorText(err);
    } finally {
      busy.value = false;
      await load();
    }
  };

  const s = status.value;
  return (
    <div class="control" data-testid={`provider-${tag}`}>
      <p>
        <strong data-testid={`provider-${tag}-rules`}>{s === null ? "…" : s.rules === null ? "unknown" : count(s.rules)}</strong> {s?.rules === 1 ? "rule" : "rules"}
        {s && (
          <span class="hint">
            {" "}
            · {s.reloads} reloads, {s.failures} failed{s.status === "reloading" ? " · reloading now" : ""}
          </span>
        )}
      </p>
      {can("operator") && (
        <button type="button" onClick={() => void reload()} disabled={busy.value}>
          {busy.value ? "Reloading…" : "Reload rules"}
        </button>
      )}
      {result.value && <Notice tone="ok">{result.value}</Notice>}
      {s?.last_error && <Notice tone="warn">Last reload failed; the previous rules keep serving: {s.last_error}</Notice>}
      {error.value && <Notice tone="error">{error.value}</Notice>}
    </div>
  );
}
