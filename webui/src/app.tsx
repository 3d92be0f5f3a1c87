// The dashboard shell: sign-in gate, header with navigation and who is signed in, and the page for
// the current route. Pages that need an optional part of the server (a query recorder, the clients
// provider, cron, downloads) are listed only when GET /api/plugins shows a plugin serving their routes;
// pages for a role (Configuration and Audit: admin) only for a principal with that role.

import type { ComponentChildren } from "preact";
import { useSignal } from "@preact/signals";
import { useEffect } from "preact/hooks";
import { authState, errorText } from "./api";
import { Badge, Notice } from "./components/ui";
import { apiPaths, capabilities, capabilitiesRead, loadCapabilities, type PluginInfo } from "./features";
import { href, route } from "./router";
import { authRequired, can, principal, probe, role, signOutNow, type Role } from "./session";
import { AccessPage } from "./pages/access";
import { AuditPage } from "./pages/audit";
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
  /** The least role the page is for (what it reads needs it); absent: every signed-in role. */
  role?: Role;
  render(): ComponentChildren;
}

const PAGES: Page[] = [
  { id: "overview", title: "Overview", sources: () => capabilities.value.overview, render: () => <OverviewPage sources={capabilities.value.overview} /> },
  { id: "queries", title: "Query log", sources: () => capabilities.value.records, render: () => <QueriesPage sources={capabilities.value.records} /> },
  { id: "clients", title: "Clients", sources: () => capabilities.value.clients, render: () => <ClientsPage sources={capabilities.value.clients} /> },
  { id: "logs", title: "Logs", sources: () => null, render: () => <LogsPage /> },
  { id: "plugins", title: "Plugins", sources: () => null, render: () => <PluginsPage /> },
  // GET /api/config is admin only: the file holds secrets.
  { id: "config", title: "Configuration", sources: () => null, role: "admin", render: () => <ConfigPage /> },
  { id: "system", title: "System", sources: () => null, render: () => <SystemPage /> },
  {
    id: "jobs",
    title: "Cron & downloads",
    sources: () => [...capabilities.value.cron, ...capabilities.value.downloads],
    render: () => <JobsPage />,
  },
  // Audit and Access: when the server has their routes (OpenAPI), for admins; tokens only matter when the API asks for credentials.
  { id: "audit", title: "Audit", sources: () => (apiPaths.value.has("/api/audit") ? null : []), role: "admin", render: () => <AuditPage /> },
  { id: "access", title: "Access", sources: () => (apiPaths.value.has("/api/tokens") && authRequired.value ? null : []), role: "admin", render: () => <AccessPage /> },
];

const available = (p: Page): boolean => {
  const s = p.sources();
  return s === null || s.length > 0;
};

/** A page the signed-in role is not for, opened by its address: says so instead of a row of refusals. */
function NotForRole({ page }: { page: Page }) {
  return (
    <section aria-labelledby="role-title" data-testid="not-for-role">
      <header class="page-head">
        <h1 id="role-title">{page.title}</h1>
      </header>
      <Notice tone="info">
        This page is for the {page.role} role; you are signed in as {principal.value?.name ?? "?"} ({role.value ?? "no role"}).
      </Notice>
    </section>
  );
}

/** Who is signed in, with their role, and "Sign out" (only when the server asks for credentials). */
function Who() {
  const p = principal.value;
  const busy = useSignal(false);
  if (!authRequired.value || p === null) return null;
  return (
    <div class="who" data-testid="who">
      <span class="who-name" title={`signed in via ${p.via}`}>
        {p.name}
      </span>{" "}
      <Badge tone={p.role === "admin" ? "warn" : "info"}>{p.role ?? "scoped"}</Badge>
      <button
        type="button"
        class="sign-out small"
        disabled={busy.value}
        onClick={() => {
          busy.value = true;
          void signOutNow().finally(() => (busy.value = false));
        }}
      >
        Sign out
      </button>
    </div>
  );
}

function Shell() {
  const error = useSignal<string | null>(null);

  useEffect(() => {
    loadCapabilities().catch((err: unknown) => (error.value = errorText(err)));
  }, []);

  const offered = PAGES.filter(available);
  const pages = offered.filter((p) => p.role === undefined || can(p.role));
  // A page of another role opened by its address says so; otherwise the start page: the Overview when the server can back it, else System.
  const barred = offered.find((p) => p.id === route.value && !pages.includes(p));
  // An optional page asked for by its address waits for what the server offers before falling back to the start page.
  const waiting = !capabilitiesRead.value && error.value === null && PAGES.some((p) => p.id === route.value) && !pages.some((p) => p.id === route.value);
  const current = waiting ? undefined : (pages.find((p) => p.id === route.value) ?? (barred ? undefined : (pages.find((p) => p.id === "overview") ?? pages.find((p) => p.id === "system"))));

  useEffect(() => {
    const shown = current ?? barred;
    document.title = shown ? `${shown.title} · Sluice` : "Sluice";
  }, [current?.id, barred?.id]);

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
        <Who />
      </header>
      <main id="main" tabIndex={-1}>
        {error.value && <Notice tone="error">Could not read what the server offers: {error.value}</Notice>}
        {waiting ? <p class="hint">Loading…</p> : barred ? <NotForRole page={barred} /> : current?.render()}
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
