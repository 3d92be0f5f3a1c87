// Cron & downloads: every cron plugin's jobs and every download plugin's items of the running
// configuration, in one place (each also appears on its card on the Plugins page).

import type { ComponentChildren } from "preact";
import { useEffect } from "preact/hooks";
import { capabilities, generation, loadPlugins, type PluginInfo } from "../features";
import { CronJobs } from "./cron-jobs";
import { Downloads } from "./downloads";

function Group({ title, id, plugins, render }: { title: string; id: string; plugins: PluginInfo[]; render: (tag: string) => ComponentChildren }) {
  if (plugins.length === 0) return null;
  return (
    <section aria-labelledby={id} class="plugin-group">
      <h2 id={id}>{title}</h2>
      {plugins.map((p) => (
        // Keyed by generation too: after a reload each view reads the new plugin's actor.
        <article key={`${generation.value}:${p.tag}`} class="card wide" aria-labelledby={`${id}-${p.tag}`}>
          <h3 id={`${id}-${p.tag}`} class="mono">
            {p.tag}
          </h3>
          {render(p.tag)}
        </article>
      ))}
    </section>
  );
}

export function JobsPage() {
  // A reload may have added or removed plugins since the dashboard opened.
  useEffect(() => {
    void loadPlugins().catch(() => undefined);
  }, []);
  const { cron, downloads } = capabilities.value;
  return (
    <section aria-labelledby="jobs-title">
      <header class="page-head">
        <h1 id="jobs-title">Cron &amp; downloads</h1>
        <span class="hint">Background jobs and file downloads of the running configuration</span>
      </header>
      <Group title="Cron jobs" id="cron" plugins={cron} render={(tag) => <CronJobs tag={tag} />} />
      <Group title="Downloads" id="downloads" plugins={downloads} render={(tag) => <Downloads tag={tag} />} />
    </section>
  );
}
