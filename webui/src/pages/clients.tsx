// Clients: the `clients` provider's groups (with a per-group pause), its named clients (declared in the
// configuration or named through the API) and the clients seen but not named, most recent first. A seen
// client can be named and put in groups from here; a client named through the API can change groups or
// be removed (a declared one is changed in the configuration). The page reads GET clients once, again
// when the provider's actors change (a pause that ends, a change made elsewhere) and every few seconds
// for what the DNS path learns (last seen, query counts), which no actor announces. Naming, group
// changes, removal and pauses need the operator role; a viewer sees the lists only.

import { Fragment } from "preact";
import { useSignal } from "@preact/signals";
import { useRef } from "preact/hooks";
import { useActorLoad } from "../actors";
import { errorText, refusalText } from "../api";
import { loadClients, removeClient, type ClientsAnswer, type NamedClient, type SeenClient } from "../clients";
import { useEvery } from "../components/every";
import { useNewest } from "../components/newest";
import { Badge, Notice, type Tone } from "../components/ui";
import type { PluginInfo } from "../features";
import { count, relative, when } from "../format";
import { href } from "../router";
import { can } from "../session";
import { GroupsForm, NameForm } from "./client-forms";
import { ClientGroups } from "./client-groups";

const REFRESH_MS = 10_000;

type Editing = { kind: "name" | "assign"; key: string } | { kind: "groups"; key: string } | null;

const list = (xs: string[]): string => (xs.length === 0 ? "—" : xs.join(", "));

function LastSeen({ ms, now }: { ms: number | null | undefined; now: number }) {
  if (ms === null || ms === undefined) return <span class="hint">not yet</span>;
  return <time dateTime={new Date(ms).toISOString()} title={when(ms)}>{relative(ms, now)}</time>;
}

function Named({ tag, rows, groups, now, editing, removing, done, act }: {
  tag: string;
  rows: NamedClient[];
  groups: string[];
  now: number;
  editing: Editing;
  removing: string | null;
  done: (text: string, tone?: Tone) => void;
  act: (next: { editing?: Editing; removing?: string | null }) => void;
}) {
  if (rows.length === 0) return <p class="hint">No client has a name yet: name one below, or declare them in the configuration.</p>;
  return (
    <div class="table-wrap">
      <table class="stack" data-testid="named-clients">
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Source</th>
            <th scope="col">Identified by</th>
            <th scope="col">Groups</th>
            <th scope="col">Hostname</th>
            <th scope="col">Last seen</th>
            <th scope="col">Queries</th>
            {can("operator") && (
              <th scope="col">
                <span class="sr-only">Actions</span>
              </th>
            )}
          </tr>
        </thead>
        <tbody>
          {rows.map((c) => (
            <Fragment key={c.name}>
              <tr data-name={c.name} data-source={c.source}>
                <td class="mono" data-label="Name">
                  <a href={href("queries", { client_name: c.name })} title={`Queries of ${c.name}`}>
                    {c.name}
                  </a>
                </td>
                <td data-label="Source">
                  <span>
                    <Badge tone={c.source === "api" ? "info" : "muted"} title={c.source === "api" ? "named through the API" : "declared in the configuration"}>
                      {c.source === "api" ? "named here" : "configuration"}
                    </Badge>
                  </span>
                </td>
                <td class="mono" data-label="Identified by">
                  {list([...c.addresses, ...c.macs, ...c.ids.map((id) => `id ${id}`)])}
                </td>
                <td class="mono" data-label="Groups" data-testid="client-groups">
                  {list(c.groups)}
                </td>
                <td class="mono" data-label="Hostname">
                  {c.seen?.hostname ?? "—"}
                </td>
                <td class="nowrap" data-label="Last seen">
                  <span>
                    <LastSeen ms={c.seen?.last_seen_ms} now={now} />
                    {c.seen && <span class="hint mono"> from {c.seen.address}</span>}
                  </span>
                </td>
                <td data-label="Queries">{c.seen ? count(c.seen.queries) : "0"}</td>
                {can("operator") && (
                <td data-label="Actions">
                  {c.source === "config" ? (
                    <span class="hint">edit the configuration</span>
                  ) : removing === c.name ? (
                    <span class="confirm">
                      <button type="button" class="danger small" onClick={() => void removeClient(tag, c.name).then(() => done(`Removed ${c.name}.`), (err: unknown) => done(refusalText(err), "error"))}>
                        Yes, remove {c.name}
                      </button>
                      <button type="button" class="small" onClick={() => act({ removing: null })}>
                        Cancel
                      </button>
                    </span>
                  ) : (
                    <span class="actions">
                      <button type="button" class="small" onClick={() => act({ editing: { kind: "groups", key: c.name } })} aria-label={`Edit the groups of ${c.name}`}>
                        Edit groups
                      </button>
                      <button type="button" class="small" onClick={() => act({ removing: c.name })} aria-label={`Remove ${c.name}`}>
                        Remove…
                      </button>
                    </span>
                  )}
                </td>
                )}
              </tr>
              {editing?.kind === "groups" && editing.key === c.name && (
                <tr class="form-row">
                  <td colSpan={8}>
                    <GroupsForm tag={tag} client={c} groups={groups} onDone={(n) => done(`${n.name} is in ${n.groups.length === 0 ? "no group" : n.groups.join(", ")}.`)} onCancel={() => act({ editing: null })} />
                  </td>
                </tr>
              )}
            </Fragment>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function Seen({ tag, rows, groups, now, editing, done, act }: {
  tag: string;
  rows: SeenClient[];
  groups: string[];
  now: number;
  editing: Editing;
  done: (text: string, tone?: Tone) => void;
  act: (next: { editing?: Editing }) => void;
}) {
  if (rows.length === 0) return <p class="hint">Every client seen so far has a name.</p>;
  return (
    <div class="table-wrap">
      <table class="stack" data-testid="seen-clients">
        <thead>
          <tr>
            <th scope="col">Address</th>
            <th scope="col">MAC</th>
            <th scope="col">Client id</th>
            <th scope="col">Hostname</th>
            <th scope="col">Last seen</th>
            <th scope="col">First seen</th>
            <th scope="col">Queries</th>
            {can("operator") && (
              <th scope="col">
                <span class="sr-only">Actions</span>
              </th>
            )}
          </tr>
        </thead>
        <tbody>
          {rows.map((s) => {
            const open = editing !== null && editing.kind !== "groups" && editing.key === s.key ? editing.kind : null;
            return (
              <Fragment key={s.key}>
                <tr data-key={s.key} data-address={s.address}>
                  <td class="mono" data-label="Address">
                    <a href={href("queries", { client_ip: s.address })} title={`Queries from ${s.address}`}>
                      {s.address}
                    </a>
                  </td>
                  <td class="mono" data-label="MAC">
                    {s.mac ?? "—"}
                  </td>
                  <td class="mono" data-label="Client id">
                    {s.id ?? "—"}
                  </td>
                  <td class="mono" data-label="Hostname">
                    {s.hostname ?? "—"}
                  </td>
                  <td class="nowrap" data-label="Last seen">
                    <LastSeen ms={s.last_seen_ms} now={now} />
                  </td>
                  <td class="nowrap" data-label="First seen">
                    {when(s.first_seen_ms)}
                  </td>
                  <td data-label="Queries">{count(s.queries)}</td>
                  {can("operator") && (
                  <td data-label="Actions">
                    <span class="actions">
                      <button type="button" class="small" aria-pressed={open === "name"} onClick={() => act({ editing: open === "name" ? null : { kind: "name", key: s.key } })} aria-label={`Name the client at ${s.address}`} data-testid="seen-name">
                        Name…
                      </button>
                      {groups.length > 0 && (
                        <button type="button" class="small" aria-pressed={open === "assign"} onClick={() => act({ editing: open === "assign" ? null : { kind: "assign", key: s.key } })} aria-label={`Assign groups to the client at ${s.address}`}>
                          Assign groups…
                        </button>
                      )}
                    </span>
                  </td>
                  )}
                </tr>
                {open !== null && (
                  <tr class="form-row">
                    <td colSpan={8}>
                      <NameForm tag={tag} seen={s} groups={groups} focus={open === "assign" ? "groups" : "name"} onDone={(c) => done(`Named ${c.name}${c.groups.length > 0 ? ` (${c.groups.join(", ")})` : ""}.`)} onCancel={() => act({ editing: null })} />
                    </td>
                  </tr>
                )}
              </Fragment>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

export function ClientsPage({ sources }: { sources: PluginInfo[] }) {
  const tag = sources[0]?.tag ?? null;
  const data = useSignal<ClientsAnswer | null>(null);
  const error = useSignal<string | null>(null);
  const message = useSignal<{ tone: Tone; text: string } | null>(null);
  const editing = useSignal<Editing>(null);
  const removing = useSignal<string | null>(null);
  const now = useSignal(Date.now());

  // A periodic read under way during an edit may answer after the edit's own: only the newest is shown.
  const newest = useNewest();
  const load = async (): Promise<void> => {
    if (tag === null) return;
    const isNewest = newest();
    try {
      const answer = await loadClients(tag);
      if (!isNewest()) return;
      data.value = answer;
      now.value = Date.now();
      error.value = null;
    } catch (err) {
      if (isNewest()) error.value = errorText(err);
    }
  };

  useActorLoad(tag ?? "", (id) => tag !== null && id.includes(`/plugin:${tag}/`), load);
  useEvery(REFRESH_MS, load);
  // The pauses' countdowns tick here; one that has ended by this browser's clock reads the groups
  // again (once per end time: the server's clock decides, and its actor change reads them too).
  const endsRead = useRef(new Set<number>());
  useEvery(1000, () => {
    now.value = Date.now();
    const ended = (data.value?.groups ?? []).map((g) => g.paused_until_ms).filter((ms): ms is number => ms !== null && ms <= now.value && !endsRead.current.has(ms));
    for (const ms of ended) endsRead.current.add(ms);
    return ended.length > 0 ? load() : undefined;
  });

  const done = (text: string, tone: Tone = "ok"): void => {
    message.value = { tone, text };
    editing.value = null;
    removing.value = null;
    void load();
  };
  const act = (next: { editing?: Editing; removing?: string | null }): void => {
    if (next.editing !== undefined) editing.value = next.editing;
    if (next.removing !== undefined) removing.value = next.removing;
    message.value = null;
  };

  if (tag === null) return null;
  const d = data.value;
  const groupNames = d?.groups.map((g) => g.name) ?? [];
  return (
    <section aria-labelledby="clients-title">
      <header class="page-head">
        <h1 id="clients-title">Clients</h1>
        <span class="hint">
          Named and seen clients of <span class="mono">{tag}</span>
        </span>
        <button type="button" onClick={() => void load()}>
          Refresh
        </button>
      </header>
      {error.value && <Notice tone="error">Could not read the clients: {error.value}</Notice>}
      {message.value && (
        <Notice tone={message.value.tone} testId="clients-message">
          {message.value.text}
        </Notice>
      )}
      {d === null && !error.value && <p class="hint">Loading clients…</p>}
      {d !== null && (
        <>
          <section aria-labelledby="groups-title" class="plugin-group">
            <h2 id="groups-title">Groups</h2>
            <ClientGroups tag={tag} groups={d.groups} now={now.value} changed={() => void load()} />
          </section>
          <section aria-labelledby="named-title" class="plugin-group">
            <h2 id="named-title">Named clients</h2>
            <Named tag={tag} rows={d.clients} groups={groupNames} now={now.value} editing={editing.value} removing={removing.value} done={done} act={act} />
          </section>
          <section aria-labelledby="seen-title" class="plugin-group">
            <h2 id="seen-title">Seen, not named</h2>
            <Seen tag={tag} rows={d.seen} groups={groupNames} now={now.value} editing={editing.value} done={done} act={act} />
          </section>
        </>
      )}
    </section>
  );
}
