// The client name and group filters of the Overview and the Query log (the records and stats routes'
// `client_name=` and `group=`), shown only when the configuration has a `clients` provider: the names
// of its named clients are offered as suggestions, its groups as a choice.

import { useSignal } from "@preact/signals";
import { useEffect } from "preact/hooks";
import { loadClients } from "../clients";
import { capabilities } from "../features";

interface Known {
  names: string[];
  groups: string[];
}

/** The clients provider's tag, or null when the configuration has none. */
export const clientsTag = (): string | null => capabilities.value.clients[0]?.tag ?? null;

/** The named clients and the groups of the clients provider, read once per mount (empty until read, or without one). */
function useKnown(tag: string | null): Known {
  const known = useSignal<Known>({ names: [], groups: [] });
  useEffect(() => {
    if (tag === null) return;
    let live = true;
    loadClients(tag)
      .then((a) => {
        if (live) known.value = { names: a.clients.map((c) => c.name), groups: a.groups.map((g) => g.name) };
      })
      // Only suggestions: the filters work as typed without them.
      .catch(() => undefined);
    return () => {
      live = false;
    };
  }, [tag]);
  return known.value;
}

/** Inputs for `client_name` and `group`; nothing without a clients provider. `idPrefix` keeps the datalist ids apart. */
export function ClientFilterFields({ name, group, onName, onGroup, idPrefix }: { name: string; group: string; onName: (v: string) => void; onGroup: (v: string) => void; idPrefix: string }) {
  const tag = clientsTag();
  const known = useKnown(tag);
  if (tag === null) return null;
  // A group from a link or an older configuration stays choosable.
  const groups = group !== "" && !known.groups.includes(group) ? [...known.groups, group] : known.groups;
  return (
    <>
      <label>
        Client name <input type="search" value={name} onInput={(e) => onName(e.currentTarget.value)} list={`${idPrefix}-client-names`} placeholder="annas-phone" data-testid={`${idPrefix}-client-name`} />
        <datalist id={`${idPrefix}-client-names`}>
          {known.names.map((n) => (
            <option key={n} value={n} />
          ))}
        </datalist>
      </label>
      <label>
        Group{" "}
        <select value={group} onChange={(e) => onGroup(e.currentTarget.value)} data-testid={`${idPrefix}-group`}>
          <option value="">any</option>
          {groups.map((g) => (
            <option key={g} value={g}>
              {g}
            </option>
          ))}
        </select>
      </label>
    </>
  );
}
