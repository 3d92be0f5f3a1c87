// Plugins: every plugin of the running configuration (GET /api/plugins) with its kind, type and
// actor state, grouped by kind, with the controls its routes allow: matcher modes, provider reloads,
// the cache browser, a dynamic_domain_set's rules editor, a cron plugin's jobs and a download plugin's
// items (those two also have their own page, Cron & downloads).

import type { ComponentChildren } from "preact";
import { useSignal } from "@preact/signals";
import { useEffect } from "preact/hooks";
import { errorText } from "../api";
import { generation, loadPlugins, plugins, serves, type PluginInfo } from "../features";
import { Badge, Notice, toneOf } from "../components/ui";
import { CacheBrowser } from "./cache-browser";
import { CronJobs } from "./cron-jobs";
import { DomainSetRules } from "./domain-set-rules";
import { Downloads } from "./downloads";
import { MatcherControl, ProviderControl } from "./plugin-controls";

const KINDS: { kind: string; title: string }[] = [
  { kind: "server", title: "Servers" },
  { kind: "executor", title: "Executors" },
  { kind: "matcher", title: "Matchers" },
  { kind: "provider", title: "Providers" },
];

/** The state value of a concern actor in a few words: "idle", "always_false.timed", "running (ops idle · saver waiting · sweeper waiting)". */
function stateWord(value: unknown): string {
  if (value === null || value === undefined) return "";
  if (typeof value === "string") return value;
  if (typeof value !== "object") return typeof value === "number" || typeof value === "boolean" ? String(value) : "";
  const entries = Object.entries(value as Record<string, unknown>);
  // A compound state reads as a path (writer.running.up); the regions of a parallel one side by side (ops idle · saver waiting).
  if (entries.length === 1) {
    const [key, inner] = entries[0];
    const rest = stateWord(inner);
    return rest === "" ? key : rest.includes(" · ") ? `${key} (${rest})` : `${key}.${rest}`;
  }
  return entries.map(([key, inner]) => `${key} ${stateWord(inner)}`).join(" · ");
}

/** A section of a card that is built (and polls the server) only while it is open. */
function Expand({ summary, testId, children }: { summary: string; testId: string; children: () => ComponentChildren }) {
  const open = useSignal(false);
  return (
    <details class="expand" data-testid={testId} onToggle={(e) => (open.value = e.currentTarget.open)}>
      <summary>{summary}</summary>
      {open.value && children()}
    </details>
  );
}

function PluginCard({ plugin }: { plugin: PluginInfo }) {
  const concern = stateWord(plugin.concern_state);
  const matcher = serves(plugin, "POST", "mode");
  const provider = serves(plugin, "POST", "reload") && serves(plugin, "GET", "reload/status");
  return (
    <article class="card plugin" data-testid={`plugin-${plugin.tag}`} aria-labelledby={`plugin-${plugin.tag}-title`}>
      <header>
        <h3 id={`plugin-${plugin.tag}-title`} class="mono">
          {plugin.tag}
        </h3>
        <span class="plugin-type">{plugin.type}</span>
        <Badge tone={toneOf(plugin.state)} title="plugin actor state">
          {plugin.state}
        </Badge>
        {/* Matcher and provider controls show their live state themselves. */}
        {plugin.concern && concern && !matcher && !provider && (
          <Badge tone={toneOf(concern.split(".")[0] ?? "")} title={`${plugin.concern} actor state`}>
            {concern}
          </Badge>
        )}
      </header>
      {matcher && <MatcherControl tag={plugin.tag} />}
      {provider && <ProviderControl tag={plugin.tag} />}
      {serves(plugin, "GET", "entries") && <CacheBrowser tag={plugin.tag} />}
      {plugin.type === "dynamic_domain_set" && serves(plugin, "GET", "rules") && (
        <Expand summary="Rules" testId={`rules-of-${plugin.tag}`}>
          {() => <DomainSetRules tag={plugin.tag} />}
        </Expand>
      )}
      {serves(plugin, "GET", "jobs/status") && (
        <Expand summary="Jobs" testId={`jobs-${plugin.tag}`}>
          {() => <CronJobs tag={plugin.tag} />}
        </Expand>
      )}
      {serves(plugin, "GET", "downloads") && (
        <Expand summary="Downloads" testId={`downloads-of-${plugin.tag}`}>
          {() => <Downloads tag={plugin.tag} />}
        </Expand>
      )}
      {plugin.routes.length > 0 && (
        <details class="routes">
          <summary>API routes ({plugin.routes.length})</summary>
          <ul>
            {plugin.routes.map((r) => (
              <li key={r} class="mono">
                {r}
              </li>
            ))}
          </ul>
        </details>
      )}
    </article>
  );
}

export function PluginsPage() {
  const loading = useSignal(true);
  const error = useSignal<string | null>(null);
  const filter = useSignal("");

  const refresh = async (): Promise<void> => {
    loading.value = true;
    try {
      await loadPlugins();
      error.value = null;
    } catch (err) {
      error.value = errorText(err);
    } finally {
      loading.value = false;
    }
  };

  useEffect(() => {
    void refresh();
  }, []);

  const needle = filter.value.trim().toLowerCase();
  const matching = plugins.value.filter((p) => needle === "" || `${p.tag} ${p.type} ${p.kind}`.toLowerCase().includes(needle));
  const other = matching.filter((p) => !KINDS.some((k) => k.kind === p.kind));

  return (
    <section aria-labelledby="plugins-title">
      <header class="page-head">
        <h1 id="plugins-title">Plugins</h1>
        <span class="hint">
          {plugins.value.length} plugins · configuration generation {generation.value}
        </span>
      </header>
      <form class="toolbar" onSubmit={(e) => e.preventDefault()}>
        <label>
          Filter{" "}
          <input type="search" value={filter.value} onInput={(e) => (filter.value = (e.currentTarget).value)} placeholder="tag, type or kind" />
        </label>
        <button type="button" onClick={() => void refresh()} disabled={loading.value}>
          Refresh
        </button>
      </form>
      {error.value && <Notice tone="error">{error.value}</Notice>}
      {!loading.value && plugins.value.length === 0 && !error.value && <Notice tone="info">The running configuration has no plugins.</Notice>}
      {[...KINDS, ...(other.length > 0 ? [{ kind: "", title: "Other" }] : [])].map(({ kind, title }) => {
        const group = kind === "" ? other : matching.filter((p) => p.kind === kind);
        if (group.length === 0) return null;
        return (
          <section key={title} aria-labelledby={`kind-${title}`} class="plugin-group">
            <h2 id={`kind-${title}`}>
              {title} <span class="hint">({group.length})</span>
            </h2>
            <div class="cards">
              {group.map((p) => (
                // Keyed by generation too: after a reload every control reads its new actor.
                <PluginCard key={`${generation.value}:${p.tag}`} plugin={p} />
              ))}
            </div>
          </section>
        );
      })}
    </section>
  );
}
