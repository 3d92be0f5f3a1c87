// The Clients page's two forms: naming a seen client (POST clients with its MAC when known, else its
// address, and the client id it presented) with the groups it joins, and changing the groups of a
// client named through the API (PUT clients/<name>). Each shows the server's refusal (a name taken,
// an unknown group) where it was asked.

import { useSignal } from "@preact/signals";
import { useEffect, useRef } from "preact/hooks";
import { refusalText } from "../api";
import { isClientName, NAME_PATTERN, nameClient, setGroups, suggestedName, type NamedClient, type SeenClient } from "../clients";
import { Notice } from "../components/ui";

/** One checkbox per group; `chosen` is kept in the groups' order. */
export function GroupPicker({ groups, chosen, onChange, label }: { groups: string[]; chosen: string[]; onChange: (next: string[]) => void; label: string }) {
  if (groups.length === 0) return <p class="hint">The configuration declares no groups.</p>;
  const toggle = (g: string, on: boolean): void => onChange(groups.filter((x) => (x === g ? on : chosen.includes(x))));
  return (
    <fieldset class="group-picker">
      <legend>{label}</legend>
      {groups.map((g) => (
        <label key={g} class="check">
          <input type="checkbox" checked={chosen.includes(g)} onChange={(e) => toggle(g, e.currentTarget.checked)} data-group={g} />
          <span class="mono">{g}</span>
        </label>
      ))}
    </fieldset>
  );
}

/**
 * Names a seen client. `focus` says which field takes the focus when the form opens: the name
 * ("Name…") or the groups ("Assign groups…", which needs a name too, offered from the hostname).
 */
export function NameForm({ tag, seen, groups, focus, onDone, onCancel }: { tag: string; seen: SeenClient; groups: string[]; focus: "name" | "groups"; onDone: (c: NamedClient) => void; onCancel: () => void }) {
  const name = useSignal(suggestedName(seen.hostname));
  const chosen = useSignal<string[]>([]);
  const busy = useSignal(false);
  const error = useSignal<string | null>(null);
  const form = useRef<HTMLFormElement>(null);

  useEffect(() => {
    const first = focus === "groups" && name.value !== "" ? form.current?.querySelector<HTMLInputElement>("input[type=checkbox]") : null;
    (first ?? form.current?.querySelector<HTMLInputElement>("input[name=client-name]"))?.focus();
  }, []);

  const submit = async (e: Event): Promise<void> => {
    e.preventDefault();
    const n = name.value.trim();
    if (!isClientName(n)) {
      error.value = "A name is 1 to 63 letters, digits, dots, dashes or underscores, starting with a letter or digit.";
      return;
    }
    busy.value = true;
    try {
      onDone(await nameClient(tag, n, seen, chosen.value));
    } catch (err) {
      error.value = refusalText(err);
    } finally {
      busy.value = false;
    }
  };

  const by = seen.mac !== null ? `MAC ${seen.mac}` : `address ${seen.address}`;
  return (
    <form ref={form} class="client-form" onSubmit={(e) => void submit(e)} aria-label={`Name the client at ${seen.address}`} data-testid="name-form">
      <label>
        Name{" "}
        <input name="client-name" value={name.value} onInput={(e) => (name.value = e.currentTarget.value)} pattern={NAME_PATTERN} required maxLength={63} placeholder="annas-phone" data-testid="name-input" />
      </label>
      <GroupPicker groups={groups} chosen={chosen.value} onChange={(g) => (chosen.value = g)} label="Groups" />
      <p class="hint">
        Identified by its {by}
        {seen.id !== null && <> and its client id {seen.id}</>}.
      </p>
      <div class="inline-form">
        <button type="submit" class="primary" disabled={busy.value} data-testid="name-save">
          Save
        </button>
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
      </div>
      {error.value && <Notice tone="error">{error.value}</Notice>}
    </form>
  );
}

/** The groups of a client named through the API. */
export function GroupsForm({ tag, client, groups, onDone, onCancel }: { tag: string; client: NamedClient; groups: string[]; onDone: (c: NamedClient) => void; onCancel: () => void }) {
  const chosen = useSignal<string[]>(client.groups);
  const busy = useSignal(false);
  const error = useSignal<string | null>(null);
  const form = useRef<HTMLFormElement>(null);

  useEffect(() => {
    form.current?.querySelector<HTMLInputElement>("input")?.focus();
  }, []);

  const submit = async (e: Event): Promise<void> => {
    e.preventDefault();
    busy.value = true;
    try {
      onDone(await setGroups(tag, client.name, chosen.value));
    } catch (err) {
      error.value = refusalText(err);
    } finally {
      busy.value = false;
    }
  };

  return (
    <form ref={form} class="client-form" onSubmit={(e) => void submit(e)} aria-label={`Groups of ${client.name}`} data-testid="groups-form">
      <GroupPicker groups={groups} chosen={chosen.value} onChange={(g) => (chosen.value = g)} label={`Groups of ${client.name}`} />
      <div class="inline-form">
        <button type="submit" class="primary" disabled={busy.value}>
          Save groups
        </button>
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
      </div>
      {error.value && <Notice tone="error">{error.value}</Notice>}
    </form>
  );
}
