// The instance of a `clients` provider: its directory (what queries read) and the work of its concern
// actor (machines/clients.machine.ts): the start-up load of the state file, its writes, the neighbour
// table reads and the host-name lookups. The actor decides when; this file only does.

import type { ClientsLoaded, ClientsWrite, ClientsWritten, GroupPause, NamedClient } from "../../../../machines/clients.machine.js";
import type { BootstrapAddress } from "../../../engine/upstream/address.js";
import type { Logger } from "../../../observability/logger.js";
import { RouteError } from "../../../registry/control.js";
import type { ControlHandle, ProviderPlugin } from "../../../registry/types.js";
import { clientProblems, NAME_PATTERN } from "./args.js";
import type { Directory, SeenClient } from "./directory.js";
import type { ProcessRole } from "../../../registry/process-role.js";
import { eachLimited, lookupPtr } from "./hostnames.js";
import { NoNeighbourTool, readNeighbourTable } from "./neighbours.js";
import { attachHolder, detachHolder, ownsState, predecessorOf, readStateFile, stateText, withStateLock, writeStateFile, type HandedState, type StateHolder } from "./state.js";

export interface ClientsSettings {
  /** state_file as configured (messages) and resolved against the working directory. */
  shownPath: string;
  path: string;
  stateIntervalMs: number;
  neighbourRefreshMs: number;
  /** The PTR resolver (null: no host names). */
  hostnames: BootstrapAddress | null;
  hostnameIntervalMs: number;
}

const NAME = new RegExp(NAME_PATTERN);

/** A worker's seen clients, new queries only, to the primary's provider of the same tag. */
const SEEN_MESSAGE = "clients.seen";

/** Seen clients as a worker sent them, checked field by field. */
function seenFrom(value: unknown): SeenClient[] {
  if (!Array.isArray(value)) return [];
  const text = (v: unknown): string | null => (typeof v === "string" ? v : null);
  const out: SeenClient[] = [];
  for (const v of value as unknown[]) {
    if (typeof v !== "object" || v === null) continue;
    const o = v as Record<string, unknown>;
    const [key, address] = [text(o.key), text(o.address)];
    const numbers = [o.first_seen_ms, o.last_seen_ms, o.queries];
    if (key === null || address === null || !numbers.every((n) => typeof n === "number" && Number.isFinite(n))) continue;
    out.push({ name: text(o.name), key, address, mac: text(o.mac), id: text(o.id), hostname: text(o.hostname), first_seen_ms: o.first_seen_ms as number, last_seen_ms: o.last_seen_ms as number, queries: o.queries as number });
  }
  return out;
}

export class ClientsProvider implements ProviderPlugin, StateHolder {
  /** What the actor last handed to the directory, for the generation a reload makes. */
  private named: NamedClient[] = [];
  private pauses: GroupPause[] = [];
  /** The text last written, so a state interval with nothing new writes nothing. */
  private lastWritten: string | null = null;
  private lastNeighbourError: string | null = null;
  /** A data-plane worker: each seen client's query count the primary has been told of. */
  private readonly reported = new WeakMap<SeenClient, number>();
  /** The primary of data-plane workers: stops taking their seen clients. */
  private readonly unlisten: () => void = () => undefined;

  constructor(
    readonly tag: string,
    readonly directory: Directory,
    readonly settings: ClientsSettings,
    private readonly log: Logger,
    /** Unix ms: the process clock plus services.clockShift. */
    readonly now: () => number,
    private readonly self: ControlHandle,
    private readonly role: ProcessRole,
  ) {
    attachHolder(settings.path, this);
    // The workers see the queries; the primary keeps the list the API shows and the file holds.
    if (role.kind === "primary") this.unlisten = role.channel.listen(SEEN_MESSAGE, tag, (m) => this.directory.mergeSeen(seenFrom(m.seen)));
  }

  /** This generation alone changes and writes the state (a reload under way has made a newer one). */
  ownsState(): boolean {
    return ownsState(this.settings.path, this);
  }

  handOver(): HandedState {
    return { named: this.named, pauses: this.pauses, seen: this.directory.seen() };
  }

  publishNamed(named: readonly NamedClient[]): void {
    this.named = [...named];
    this.directory.setNamed(named.map((c) => ({ ...c, source: "api" })));
  }

  publishPaused(pauses: readonly GroupPause[]): void {
    this.pauses = [...pauses];
    this.directory.setPaused(new Set(pauses.map((p) => p.group)));
  }

  /** Start-up: the state of the generation a reload replaces, or the file's; the seen clients go back into the directory. */
  load(): Promise<ClientsLoaded> {
    const { path, shownPath } = this.settings;
    return withStateLock(path, async () => {
      const before = predecessorOf(path, this);
      let state: HandedState = { named: [], pauses: [], seen: [] };
      let rewrite = false;
      if (before !== null) {
        state = before.handOver();
        rewrite = true;
      } else {
        const read = await readStateFile(path, shownPath);
        if (read !== null) {
          state = read.state;
          if (read.skipped.length > 0) this.log.warn({ path: shownPath, skipped: read.skipped }, "entries of the clients state file that are not what Sluice writes were left out");
          rewrite = read.skipped.length > 0;
        }
      }
      const named = this.admit(state.named);
      const groups = new Set(this.directory.groups().map((g) => g.name));
      const pauses = state.pauses.filter((p) => groups.has(p.group));
      if (named.length < state.named.length || pauses.length < state.pauses.length) rewrite = true;
      this.publishNamed(named);
      this.directory.restoreSeen(state.seen);
      // A worker tells the primary only of queries it answered itself.
      if (this.role.kind === "worker") for (const s of this.directory.seen()) this.reported.set(s, s.queries);
      this.log.info({ path: shownPath, named: named.length, pauses: pauses.length, seen: state.seen.length, from: before !== null ? "reload" : "file" }, "clients state loaded");
      return { named, pauses, now_ms: this.now(), rewrite, ...(await this.firstNeighbours()) };
    });
  }

  /** The start-up's read of the neighbour table (a failure is logged; the refreshes try again). */
  private async firstNeighbours(): Promise<{ neighbours: number | null; neighbour_tool: boolean }> {
    if (this.settings.neighbourRefreshMs <= 0) return { neighbours: null, neighbour_tool: true };
    try {
      const neighbours = await this.readNeighbours();
      return { neighbours, neighbour_tool: neighbours !== null };
    } catch {
      return { neighbours: null, neighbour_tool: true };
    }
  }

  /**
   * The named clients the configuration still allows: a group no longer declared leaves the client's
   * groups; a name now declared (or a group's), or identifiers that are no longer valid, leave it out.
   */
  private admit(list: readonly NamedClient[]): NamedClient[] {
    const groups = new Set(this.directory.groups().map((g) => g.name));
    const taken = new Set([...this.directory.clients().filter((c) => c.source === "config").map((c) => c.name), ...groups]);
    const out: NamedClient[] = [];
    for (const c of list) {
      const kept = { ...c, groups: c.groups.filter((g) => groups.has(g)) };
      if (kept.groups.length < c.groups.length) this.log.warn({ client: c.name, groups: c.groups.filter((g) => !groups.has(g)) }, "a named client's groups are no longer declared; it leaves them");
      const problems = clientProblems(kept, groups);
      if (!NAME.test(c.name) || taken.has(c.name) || problems.length > 0) {
        const why = taken.has(c.name) ? "the configuration declares that name now" : (problems[0]?.message ?? "not a name");
        this.log.warn({ client: c.name, reason: why }, "a client named through the API is left out");
        continue;
      }
      taken.add(c.name);
      out.push(kept);
    }
    return out;
  }

  /** Writes the state and the seen clients, unless the file holds them already or a newer generation owns it. */
  persist(write: ClientsWrite): Promise<ClientsWritten> {
    if (this.role.kind === "worker") return Promise.resolve(this.reportSeen(this.role));
    const { path, shownPath } = this.settings;
    return withStateLock(path, async () => {
      if (!this.ownsState()) return { at_ms: this.now(), written: false };
      const text = stateText({ named: write.named, pauses: write.pauses, seen: this.directory.seen() });
      if (text === this.lastWritten) return { at_ms: this.now(), written: false };
      try {
        await writeStateFile(path, text);
      } catch (err) {
        this.log.warn({ path: shownPath, err: (err as Error).message }, "writing the clients state file failed; the changes are in effect and the next write tries again");
        throw new RouteError("clients_state_write_failed", `the change is in effect, but writing ${shownPath} failed: ${(err as Error).message}; it is written again with the next change or within state_interval`);
      }
      this.lastWritten = text;
      return { at_ms: this.now(), written: true };
    });
  }

  /** Reads the neighbour table into the directory: its entries, or null when there is no `ip` tool (logged once). */
  async readNeighbours(): Promise<number | null> {
    try {
      const table = await readNeighbourTable();
      if (!sameTable(table, this.directory.neighbourTable())) this.directory.setNeighbours(table);
      this.lastNeighbourError = null;
      return table.size;
    } catch (err) {
      if (err instanceof NoNeighbourTool) {
        this.log.info({ reason: err.message }, "the neighbour table is not read: MAC addresses come only from the EDNS option of trusted forwarders");
        return null;
      }
      const message = (err as Error).message;
      if (message !== this.lastNeighbourError) this.log.warn({ err: message }, "reading the neighbour table failed; the last table stays in use");
      this.lastNeighbourError = message;
      throw err;
    }
  }

  /** PTR names for the clients seen since the last round; how many were learned. */
  async resolveHostnames(): Promise<number> {
    const server = this.settings.hostnames;
    const fresh = this.directory.takeFresh().filter((s) => s.hostname === null);
    if (server === null || fresh.length === 0) return 0;
    let learned = 0;
    await eachLimited(fresh, async (s) => {
      const name = await lookupPtr(server, s.address);
      if (name === null) return;
      this.directory.setHostname(s.key, name);
      learned++;
    });
    if (learned > 0) this.log.debug({ learned, asked: fresh.length }, "clients: host names learned");
    return learned;
  }

  /**
   * A data-plane worker's write (each state_interval, and after a change): the primary writes the file;
   * the worker sends it the queries of its seen clients since the last time, which the primary adds to its own.
   */
  private reportSeen(role: Extract<ProcessRole, { kind: "worker" }>): ClientsWritten {
    const news: SeenClient[] = [];
    for (const s of this.directory.seen()) {
      const told = this.reported.get(s) ?? 0;
      if (s.queries <= told) continue;
      news.push({ ...s, queries: s.queries - told });
      this.reported.set(s, s.queries);
    }
    if (news.length > 0) role.channel.send({ t: SEEN_MESSAGE, key: this.tag, seen: news });
    return { at_ms: this.now(), written: false };
  }

  /** Waits for the concern's last write, then lets go of the state file. */
  async destroy(): Promise<void> {
    this.unlisten();
    await this.self.ask({ type: "CLIENTS.STOP" }).catch(() => undefined);
    detachHolder(this.settings.path, this);
  }
}

function sameTable(a: ReadonlyMap<string, string>, b: ReadonlyMap<string, string>): boolean {
  if (a.size !== b.size) return false;
  for (const [k, v] of a) if (b.get(k) !== v) return false;
  return true;
}
