// Who asked: what the runtime's `clients` provider makes of a query's origin, once per query before
// the sequence runs (src/plugins/providers/clients/). The data plane reads it from the context.

import type { DnsContext } from "./context.js";

/** The client a query came from, as the `clients` provider identified it. Shared between queries: read only. */
export interface ClientIdentity {
  /** The client's name (declared in the configuration or given through the API); null for a client only seen. */
  readonly name: string | null;
  /** The groups it is in: its own, then those whose addresses hold its address, in declaration order. */
  readonly groups: readonly string[];
  /** Its name and its groups, for the `client` matcher. */
  readonly memberOf: ReadonlySet<string>;
  /** One of its groups has its blocking paused: the pausable matchers answer false for it. */
  readonly paused: boolean;
}

/** The runtime-wide directory of clients (the `clients` provider). */
export interface ClientDirectory {
  /** Identifies the query's client (and counts it as seen); null when nothing is known of it. */
  identify(ctx: DnsContext): ClientIdentity | null;
  /** The declared matchers a group pause turns off for the paused groups' clients. */
  readonly pausable: ReadonlySet<string>;
}

/** A client id (DoH path, DoT server name, configuration): one DNS label of letters, digits and inner hyphens. */
const CLIENT_ID = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** The client id `text` names, lower-cased; null when it is not a valid DNS label. */
export function clientIdOf(text: string): string | null {
  const id = text.toLowerCase();
  return CLIENT_ID.test(id) ? id : null;
}
