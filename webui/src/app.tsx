// The dashboard shell: sign-in gate, header with navigation, and the page for the current route.
// Pages that need an optional part of the server (a query recorder, the clients provider, cron,
// downloads) are listed only when GET /api/plugins shows a plugin serving their routes.

import type { ComponentChildren } from "preact";
import { useSignal } from "@preact/signals";
import { useEffect } from "preact/hooks";
import { authState, authUsed, errorText, probe, signOut } from "./api";
import { Notice } from "./components/ui";
import { capabilities, loadCapabilities, type PluginInfo } from "./features";
import { href, route } from "./router";
import { ClientsPage } from "./pages/clients";
import { ConfigPage } from "./pages/config";
import { JobsPage } from "./pages/jobs";
import { LogsPage } from "./pages/logs";
import { OverviewPage } from "./pages/overview";
import { PluginsPage } from "./pages/plugins";
import { QueriesPage } from "./pages/queries";
import { SignIn } from "./pages/sign-in";
import { SystemPage } from "./pages/system";

interface Page {
  id: string;
  title: string;
  /** Plugins that back an optional page; null for pages every server has. */
  sources(): PluginInfo[] | null;
  render(): ComponentChildren;
}

const PAGES: Page[] = [
  { id: "overview", title: "Overview", sources: () => capabilities.value.overview, render: () => <OverviewPage sources={capabilities.value.overview} /> },
  { id: "queries", title: "Query log", sources: () => capabilities.value.records, render: () => <QueriesPage sources={capabilities.value.records} /> },
  { id: "clients", title: "Clients", sources: () => capabilities.value.clients, render: () => <ClientsPage sources={capabilities.value.clients} /> },
  { id: "logs", title: "Logs", sources: () => null, render: () => <LogsPage /> },
  { id: "plugins", title: "Plugins", sources: () => null, render: () => <PluginsPage /> },
  { id: "config", title: "Configuration", sources: () => null, render: () => <ConfigPage /> },
  { id: "system", title: "System", sources: () => null, render: () => <SystemPage /> },
  {
    id: "jobs",
    title: "Cron & downloads",
    sources: () => [...capabilities.value.cron, ...capabilities.value.downloads],
    render: () => <JobsPage />,
  },
];

const available = (p: Page): boolean => {
  const s = p.sources();
  return s === null || s.length > 0;
};

function Shell() {
  const error = useSignal<string | null>(null);

  useEffect(() => {
    loadCapabilities().catch((err: unknown) => (error.value = errorText(err)));
  }, []);

  const pages = PAGES.filter(available);
  // The start page: the Overview when the server can back it, else System.
  const current = pages.find((p) => p.id === route.value) ?? pages.find((p) => p.id === "overview") ?? pages.find((p) => p.id === "system");

  useEffect(() => {
    document.title = current ? `${current.title} · Sluice` : "Sluice";
  }, [current?.id]);

  return (
    <>
      <a class="skip" href="#main" onClick={(e) => (e.preventDefault(), document.getElementById("main")?.focus())}>
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href={href("")}>
          Sluice
        </a>
        <nav aria-label="Pages">
          <ul>
            {pages.map((p) => (
              <li key={p.id}>
                <a href={href(p.id)} aria-current={p.id === current?.id ? "page" : undefined}>
                  {p.title}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        {authUsed.value && (
          <button type="button" class="sign-out" onClick={() => signOut("Signed out.")}>
            Sign out
          </button>
        )}
      </header>
      <main id="main" tabIndex={-1}>
        {error.value && <Notice tone="error">Could not read what the server offers: {error.value}</Notice>}
        {current?.render()}
      </main>
    </>
  );
}

export function App() {
  useEffect(() => {
    void probe();
  }, []);

  switch (authState.value) {
    case "checking":
      return (
        <main id="main" class="center">
          <p class="hint">Connecting…</p>
        </main>
      );
    case "unreachable":
      return (
        <main id="main" class="center">
          <Notice tone="error">The management API does not answer.</Notice>
          <button type="button" onClick={() => ((authState.value = "checking"), void probe())}>
            Try again
          </button>
        </main>
      );
    case "needed":
      return <SignIn />;
    case "ok":
      return <Shell />;
  }
}
