// What the Clients page, the Overview and the Query log read from the `clients` provider
// (GET/POST/PUT/DELETE /api/plugins/<tag>/clients…, groups/<group>/pause): the named and seen clients,
// the groups with their pauses, and the changes the page makes. The provider is runtime-wide (one per
// configuration), so the dashboard reads the first plugin that serves GET clients.

import { api, pluginPath, send } from "./api";
import type { ClientsAnswer, GroupPaused, NamedClient, NamedClientAnswer } from "./shapes";

export type { ClientGroup, ClientsAnswer, NamedClient, SeenClient } from "./shapes";

/** The name rule of the provider (NAME_PATTERN of src/plugins/providers/clients/args.ts), for the form's `pattern`. */
export const NAME_PATTERN = "[A-Za-z0-9][A-Za-z0-9._\\-]{0,62}";
const NAME = new RegExp(`^${NAME_PATTERN}$`);

export const isClientName = (text: string): boolean => NAME.test(text);

/** A name to offer for a seen client: the first label of its hostname, when that is a valid name. */
export function suggestedName(hostname: string | null): string {
  const label = (hostname ?? "").replace(/\.$/, "").split(".")[0] ?? "";
  return isClientName(label) ? label.toLowerCase() : "";
}

export const loadClients = (tag: string): Promise<ClientsAnswer> => api<ClientsAnswer>(pluginPath(tag, "clients"));

/** What identifies a client the page names: its MAC when known, else its address; and the client id it presented, if any. */
export interface Identity {
  address: string;
  mac: string | null;
  id: string | null;
}

/** The body of POST clients for naming a seen client. */
export function nameBody(name: string, who: Identity, groups: string[]): { name: string; addresses?: string[]; macs?: string[]; ids?: string[]; groups: string[] } {
  return {
    name,
    ...(who.mac !== null ? { macs: [who.mac] } : { addresses: [who.address] }),
    ...(who.id !== null ? { ids: [who.id] } : {}),
    groups,
  };
}

export async function nameClient(tag: string, name: string, who: Identity, groups: string[]): Promise<NamedClient> {
  return (await send<NamedClientAnswer>("POST", pluginPath(tag, "clients"), nameBody(name, who, groups))).client;
}

export async function setGroups(tag: string, name: string, groups: string[]): Promise<NamedClient> {
  return (await send<NamedClientAnswer>("PUT", pluginPath(tag, `clients/${encodeURIComponent(name)}`), { groups })).client;
}

export async function removeClient(tag: string, name: string): Promise<void> {
  await send<{ ok: boolean }>("DELETE", pluginPath(tag, `clients/${encodeURIComponent(name)}`));
}

/** Pauses the group's `pause` matchers for `duration` ("15m", "1h", "5400s"); the answer's end time. */
export async function pauseGroup(tag: string, group: string, duration: string): Promise<number | null> {
  return (await send<GroupPaused>("POST", pluginPath(tag, `groups/${encodeURIComponent(group)}/pause`), { duration })).paused_until_ms;
}

export async function resumeGroup(tag: string, group: string): Promise<void> {
  await send<GroupPaused>("DELETE", pluginPath(tag, `groups/${encodeURIComponent(group)}/pause`));
}

/** The longest pause the route takes (7 d). */
export const MAX_PAUSE_MS = 7 * 86_400_000;

/** The duration of a pause that ends at `untilMs`, in whole seconds from `now`, or why it cannot be one. */
export function pauseUntil(untilMs: number | null, now: number): string | { error: string } {
  if (untilMs === null) return { error: "Choose when the pause ends." };
  const ms = untilMs - now;
  if (ms < 1000) return { error: "The end of the pause must be in the future." };
  if (ms > MAX_PAUSE_MS) return { error: "A pause lasts at most 7 days." };
  return `${Math.round(ms / 1000)}s`;
}
