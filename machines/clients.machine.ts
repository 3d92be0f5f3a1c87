// The `clients` provider's control plane (clients:<tag>): the runtime changes of its directory — clients
// named through the API, group pauses — kept in a state file, the kernel's neighbour table read for MAC
// addresses, and PTR names looked up for newly seen clients. The work is provided by
// src/plugins/providers/clients/control.ts; queries never wait on this actor (the directory they read is
// a plain object the `publish…` actions update).
//
//   loading (the concern declares `startup`) ─▶ running ─▶ stopping ─▶ stopped
//
// A change (CLIENTS.NAME/UPDATE/REMOVE/PAUSE/RESUME) is taken at once by a targetless transition: the
// context changes, the directory gets it, and the change waits in `waiting` for the write that holds it
// (its answer comes then). `running` has four regions: `writer` writes the state file whenever the
// context is ahead of the file, and every state interval (the seen clients change with every query);
// `pauses` ends each group pause by a delayed transition to the nearest end; `neighbours` reads the
// kernel's neighbour table every refresh (or is `off`: "0s", or no `ip` tool); `hostnames` asks PTR
// names for the clients seen since its last round (or is `off` without a resolver).

import { and, assign, enqueueActions, fromPromise, raise, setup, stateIn } from "xstate";
import { reportStarted, reportStartFailed, type Answer, type Asked } from "./concern.js";

/** A client named through the API (the shape of a declared one). */
export interface NamedClient {
  name: string;
  addresses: string[];
  macs: string[];
  ids: string[];
  groups: string[];
}

/** The fields a CLIENTS.UPDATE replaces (absent ones stay). */
export type ClientChanges = Partial<Omit<NamedClient, "name">>;

export interface GroupPause {
  group: string;
  /** Unix ms (the provider's clock) when the pause ends by itself. */
  paused_until_ms: number;
}

/** What the state file keeps besides the seen clients (which the directory holds). */
export interface ClientsState {
  named: NamedClient[];
  pauses: GroupPause[];
}

export interface ClientsLoaded extends ClientsState {
  /** The provider's clock when the state was read: pauses that ended before are dropped. */
  now_ms: number;
  /** The file is to be written once at start: the state came from the generation a reload replaces, or entries were left out. */
  rewrite: boolean;
  /** The neighbour table's entries as the start-up read it (null: not read, or the read failed). */
  neighbours: number | null;
  /** false: there is no `ip` tool; the table is never read. */
  neighbour_tool: boolean;
}

/** One write of the state file; `final`: the last one, when the plugin stops. */
export interface ClientsWrite extends ClientsState {
  final: boolean;
}

export interface ClientsWritten {
  at_ms: number;
  /** false: nothing was written (the file held this already, or a newer generation owns it). */
  written: boolean;
}

/** `at`: when the change was asked (Unix ms on the provider's clock); a pause ends `duration_ms` after it. */
export type ClientsChange =
  | { type: "CLIENTS.NAME"; client: NamedClient; at: number }
  | { type: "CLIENTS.UPDATE"; name: string; changes: ClientChanges; at: number }
  | { type: "CLIENTS.REMOVE"; name: string; at: number }
  | { type: "CLIENTS.PAUSE"; group: string; duration_ms: number; at: number }
  | { type: "CLIENTS.RESUME"; group: string; at: number };

/** CLIENTS.PAUSES_CHANGED is raised by the machine itself: the pause timer starts again from the new nearest end. */
export type ClientsEvent = (ClientsChange & Asked) | ({ type: "CLIENTS.STOP" } & Asked) | { type: "CLIENTS.PAUSES_CHANGED" };

export interface ClientsInput {
  tag: string;
  /** Names of the clients declared in the configuration (not changed through the API). */
  declared: string[];
  /** Names of the declared groups. */
  groups: string[];
  stateIntervalMs: number;
  /** 0: the neighbour table is not read. */
  neighbourRefreshMs: number;
  /** 0: no host names are looked up. */
  hostnameIntervalMs: number;
}

interface WaitingAnswer {
  requestId: string;
  version: number;
  output: unknown;
}

export interface ClientsContext extends ClientsInput, ClientsState {
  /** The provider's clock as of the last change or pause end (pause timers count from it). */
  now_ms: number;
  /** Changes taken so far, and how many the file holds (or a failed write gave up on). */
  version: number;
  saved_version: number;
  /** The version the write under way holds. */
  writing_version: number;
  waiting: WaitingAnswer[];
  stopRequest: string | null;
  load_error: string | null;
  persists: number;
  last_persist_at_ms: number | null;
  last_persist_error: string | null;
  /** Entries of the last neighbour table read (null: not read, or off). */
  neighbours: number | null;
  /** false once a read found no `ip` tool. */
  neighbour_tool: boolean;
  last_neighbour_error: string | null;
  /** Host names learned by PTR lookups. */
  hostnames: number;
}

/** Without input (xstate's pure transition() builds the machine bare), delays must still be finite and not 0. */
const NO_INPUT: ClientsInput = { tag: "", declared: [], groups: [], stateIntervalMs: 60_000, neighbourRefreshMs: 0, hostnameIntervalMs: 0 };

const errorText = (e: unknown): string => (e instanceof Error ? e.message : String(e));
const outputOf = <T>(event: unknown): T => (event as { output: T }).output;
const nearestEnd = (pauses: readonly GroupPause[]): number => Math.min(...pauses.map((p) => p.paused_until_ms));

/** The context after a change: one more version, and the answer waiting for the write that holds it. */
function changed(context: ClientsContext, requestId: string, output: unknown, at: number): Pick<ClientsContext, "version" | "waiting" | "now_ms"> {
  const version = context.version + 1;
  return { version, waiting: [...context.waiting, { requestId, version, output }], now_ms: Math.max(context.now_ms, at) };
}

export const clientsMachine = setup({
  types: {
    context: {} as ClientsContext,
    events: {} as ClientsEvent,
    emitted: {} as Answer,
    input: {} as ClientsInput,
  },
  actors: {
    /** Reads the state file (or takes the state of the generation a reload replaces), restores the seen clients, reads the neighbour table once. */
    load: fromPromise<ClientsLoaded>(() => Promise.reject(new Error("not provided"))),
    /** Writes the state and the seen clients atomically. */
    persist: fromPromise<ClientsWritten, ClientsWrite>(() => Promise.reject(new Error("not provided"))),
    /** Reads the neighbour table into the directory; resolves with its entries, or null when the tool is missing. */
    readNeighbours: fromPromise<number | null>(() => Promise.resolve(null)),
    /** Looks up PTR names of the clients seen since the last round; resolves with how many were learned. */
    resolveHostnames: fromPromise<number>(() => Promise.resolve(0)),
  },
  guards: {
    /** Past its start-up and not stopping (HTTP 503 plugin_unavailable: the plugin is being made or replaced). */
    clientsRunning: stateIn("running"),
    /** No newer generation (a reload under way) has taken over the state file (provided; HTTP 503 plugin_unavailable). */
    clientsCurrent: () => true,
    /** No declared client, named client or group has the name (HTTP 409 client_exists). */
    clientNameFree: ({ context, event }) => {
      if (event.type !== "CLIENTS.NAME") return false;
      const name = event.client.name;
      return !context.declared.includes(name) && !context.groups.includes(name) && !context.named.some((c) => c.name === name);
    },
    /** The client is not declared in the configuration, where only the configuration changes it (HTTP 409 client_declared). */
    clientNotDeclared: ({ context, event }) => (event.type === "CLIENTS.UPDATE" || event.type === "CLIENTS.REMOVE") && !context.declared.includes(event.name),
    /** The client was named through the API (HTTP 404 client_not_found). */
    clientIsNamed: ({ context, event }) => (event.type === "CLIENTS.UPDATE" || event.type === "CLIENTS.REMOVE") && context.named.some((c) => c.name === event.name),
    /** The group is declared (HTTP 404 group_not_found). */
    groupKnown: ({ context, event }) => (event.type === "CLIENTS.PAUSE" || event.type === "CLIENTS.RESUME") && context.groups.includes(event.group),
    clientsUnsaved: ({ context }) => context.version > context.saved_version,
    clientsSaved: ({ context }) => context.version <= context.saved_version,
    clientsStopAsked: ({ context }) => context.stopRequest !== null,
    clientsWriterIdle: stateIn({ running: { writer: "idle" } }),
    clientsPaused: ({ context }) => context.pauses.length > 0,
    /** neighbour_refresh is not "0s", and the start-up read found the tool. */
    neighboursOn: ({ context }) => context.neighbourRefreshMs > 0 && context.neighbour_tool,
    /** The read found the tool (null: `ip` is missing, the region turns off). */
    neighboursFound: ({ event }) => outputOf<number | null>(event) !== null,
    hostnamesOn: ({ context }) => context.hostnameIntervalMs > 0,
  },
  delays: {
    stateInterval: ({ context }) => context.stateIntervalMs,
    neighbourRefresh: ({ context }) => context.neighbourRefreshMs,
    hostnameInterval: ({ context }) => context.hostnameIntervalMs,
    pauseEnds: ({ context }) => Math.max(0, nearestEnd(context.pauses) - context.now_ms),
  },
  actions: {
    /** Hands the named clients to the directory (provided). */
    publishNamed: () => {},
    /** Hands the paused groups to the directory (provided). */
    publishPaused: () => {},
    reportStarted: reportStarted<ClientsContext, ClientsEvent>(),
    reportStartFailed: reportStartFailed<ClientsContext, ClientsEvent>(),
    recordLoaded: assign(({ event }) => {
      const loaded = outputOf<ClientsLoaded>(event);
      // A pause that ended while the process was down (or the file was old) is not restored.
      const pauses = loaded.pauses.filter((p) => p.paused_until_ms > loaded.now_ms);
      const rewrite = loaded.rewrite || pauses.length < loaded.pauses.length;
      return { named: loaded.named, pauses, now_ms: loaded.now_ms, version: rewrite ? 1 : 0, saved_version: 0, neighbours: loaded.neighbours, neighbour_tool: loaded.neighbour_tool };
    }),
    recordLoadError: assign({ load_error: ({ event }) => errorText((event as { error?: unknown }).error) }),
    name: assign(({ context, event }) => {
      if (event.type !== "CLIENTS.NAME") return {};
      return { named: [...context.named, event.client], ...changed(context, event.requestId, event.client, event.at) };
    }),
    update: assign(({ context, event }) => {
      if (event.type !== "CLIENTS.UPDATE") return {};
      let updated: NamedClient | null = null;
      const named = context.named.map((c) => (c.name === event.name ? (updated = { ...c, ...event.changes, name: c.name }) : c));
      return { named, ...changed(context, event.requestId, updated, event.at) };
    }),
    remove: assign(({ context, event }) => {
      if (event.type !== "CLIENTS.REMOVE") return {};
      return { named: context.named.filter((c) => c.name !== event.name), ...changed(context, event.requestId, null, event.at) };
    }),
    pause: assign(({ context, event }) => {
      if (event.type !== "CLIENTS.PAUSE") return {};
      const pause: GroupPause = { group: event.group, paused_until_ms: event.at + event.duration_ms };
      return { pauses: [...context.pauses.filter((p) => p.group !== event.group), pause], ...changed(context, event.requestId, pause, event.at) };
    }),
    resume: assign(({ context, event }) => {
      if (event.type !== "CLIENTS.RESUME") return {};
      const output: { group: string; paused_until_ms: null } = { group: event.group, paused_until_ms: null };
      return { pauses: context.pauses.filter((p) => p.group !== event.group), ...changed(context, event.requestId, output, event.at) };
    }),
    restartPauseTimer: raise({ type: "CLIENTS.PAUSES_CHANGED" }),
    /** The nearest pause end has come: every pause ending then is over; the clock is now that end. */
    endPauses: assign(({ context }) => {
      const end = nearestEnd(context.pauses);
      return { pauses: context.pauses.filter((p) => p.paused_until_ms > end), now_ms: Math.max(context.now_ms, end), version: context.version + 1 };
    }),
    startWrite: assign({ writing_version: ({ context }) => context.version }),
    recordWritten: assign(({ context, event }) => {
      const done = outputOf<ClientsWritten>(event);
      return {
        saved_version: Math.max(context.saved_version, context.writing_version),
        persists: done.written ? context.persists + 1 : context.persists,
        last_persist_at_ms: done.written ? done.at_ms : context.last_persist_at_ms,
        last_persist_error: null,
      };
    }),
    /** A failed write gives up on the changes it held (they are in effect; the next write holds them again). */
    recordWriteFailed: assign(({ context, event }) => ({
      saved_version: Math.max(context.saved_version, context.writing_version),
      last_persist_error: errorText((event as { error?: unknown }).error),
    })),
    answerWritten: enqueueActions(({ context, enqueue }) => {
      for (const w of context.waiting) if (w.version <= context.writing_version) enqueue.emit({ type: "answer", requestId: w.requestId, ok: true, output: w.output } satisfies Answer);
      enqueue.assign({ waiting: context.waiting.filter((w) => w.version > context.writing_version) });
    }),
    answerWriteFailed: enqueueActions(({ context, event, enqueue }) => {
      const error = (event as { error?: unknown }).error;
      for (const w of context.waiting) if (w.version <= context.writing_version) enqueue.emit({ type: "answer", requestId: w.requestId, ok: false, error } satisfies Answer);
      enqueue.assign({ waiting: context.waiting.filter((w) => w.version > context.writing_version) });
    }),
    recordNeighbours: assign({ neighbours: ({ event }) => outputOf<number>(event), last_neighbour_error: null }),
    recordNeighboursOff: assign({ neighbours: null, neighbour_tool: false }),
    recordNeighbourError: assign({ last_neighbour_error: ({ event }) => errorText((event as { error?: unknown }).error) }),
    recordHostnames: assign(({ context, event }) => ({ hostnames: context.hostnames + outputOf<number>(event) })),
    recordStop: assign({ stopRequest: ({ event }) => (event.type === "CLIENTS.STOP" ? event.requestId : null) }),
    answerStopped: enqueueActions(({ context, enqueue }) => {
      if (context.stopRequest !== null) enqueue.emit({ type: "answer", requestId: context.stopRequest, ok: true, output: null } satisfies Answer);
    }),
  },
}).createMachine({
  id: "clients",
  initial: "loading",
  context: ({ input }) => ({
    ...((input as ClientsInput | undefined) ?? NO_INPUT),
    named: [],
    pauses: [],
    now_ms: 0,
    version: 0,
    saved_version: 0,
    writing_version: 0,
    waiting: [],
    stopRequest: null,
    load_error: null,
    persists: 0,
    last_persist_at_ms: null,
    last_persist_error: null,
    neighbours: null,
    neighbour_tool: true,
    last_neighbour_error: null,
    hostnames: 0,
  }),
  // The API's changes, answered in every state: taken only while running, by this generation, when the rule holds.
  // Targetless, so no region is left: the write and the timers under way carry on.
  on: {
    "CLIENTS.NAME": { guard: and(["clientsRunning", "clientsCurrent", "clientNameFree"]), actions: ["name", "publishNamed"] },
    "CLIENTS.UPDATE": { guard: and(["clientsRunning", "clientsCurrent", "clientNotDeclared", "clientIsNamed"]), actions: ["update", "publishNamed"] },
    "CLIENTS.REMOVE": { guard: and(["clientsRunning", "clientsCurrent", "clientNotDeclared", "clientIsNamed"]), actions: ["remove", "publishNamed"] },
    "CLIENTS.PAUSE": { guard: and(["clientsRunning", "clientsCurrent", "groupKnown"]), actions: ["pause", "publishPaused", "restartPauseTimer"] },
    "CLIENTS.RESUME": { guard: and(["clientsRunning", "clientsCurrent", "groupKnown"]), actions: ["resume", "publishPaused", "restartPauseTimer"] },
  },
  states: {
    // The plugin (and the runtime's next plugin) is ready once the state is in: the first query sees the names and pauses.
    loading: {
      invoke: {
        id: "load",
        src: "load",
        onDone: { target: "running", actions: ["recordLoaded", "publishNamed", "publishPaused", "reportStarted"] },
        onError: { target: "stopped", actions: ["recordLoadError", "reportStartFailed"] },
      },
      // Destroyed before the state was read: nothing is written back.
      on: { "CLIENTS.STOP": { target: "stopped", actions: "recordStop" } },
    },
    running: {
      type: "parallel",
      on: { "CLIENTS.STOP": { actions: "recordStop" } },
      // A stop waits until every change is written and no write is under way, then writes a last time.
      always: { guard: and(["clientsStopAsked", "clientsWriterIdle", "clientsSaved"]), target: "stopping" },
      states: {
        writer: {
          initial: "idle",
          states: {
            idle: {
              always: { guard: "clientsUnsaved", target: "writing" },
              after: { stateInterval: "writing" },
            },
            writing: {
              entry: "startWrite",
              invoke: {
                id: "persist",
                src: "persist",
                input: ({ context }): ClientsWrite => ({ named: context.named, pauses: context.pauses, final: false }),
                onDone: { target: "idle", actions: ["recordWritten", "answerWritten"] },
                onError: { target: "idle", actions: ["recordWriteFailed", "answerWriteFailed"] },
              },
            },
          },
        },
        pauses: {
          initial: "checking",
          on: { "CLIENTS.PAUSES_CHANGED": { target: ".checking" } },
          states: {
            checking: { always: [{ guard: "clientsPaused", target: "timing" }, { target: "none" }] },
            none: {},
            timing: { after: { pauseEnds: { target: "checking", actions: ["endPauses", "publishPaused"] } } },
          },
        },
        neighbours: {
          initial: "choosing",
          states: {
            // The start-up read the table once already (the first query knows the MACs).
            choosing: { always: [{ guard: "neighboursOn", target: "waiting" }, { target: "off" }] },
            waiting: { after: { neighbourRefresh: "reading" } },
            reading: {
              invoke: {
                id: "readNeighbours",
                src: "readNeighbours",
                onDone: [
                  { guard: "neighboursFound", target: "waiting", actions: "recordNeighbours" },
                  { target: "off", actions: "recordNeighboursOff" },
                ],
                onError: { target: "waiting", actions: "recordNeighbourError" },
              },
            },
            off: {},
          },
        },
        hostnames: {
          initial: "choosing",
          states: {
            choosing: { always: [{ guard: "hostnamesOn", target: "waiting" }, { target: "off" }] },
            waiting: { after: { hostnameInterval: "resolving" } },
            resolving: {
              invoke: { id: "resolveHostnames", src: "resolveHostnames", onDone: { target: "waiting", actions: "recordHostnames" }, onError: "waiting" },
            },
            off: {},
          },
        },
      },
    },
    // The last write: the seen clients as they are now (skipped when a newer generation owns the file).
    stopping: {
      entry: "startWrite",
      invoke: {
        id: "persist",
        src: "persist",
        input: ({ context }): ClientsWrite => ({ named: context.named, pauses: context.pauses, final: true }),
        onDone: { target: "stopped", actions: "recordWritten" },
        onError: { target: "stopped", actions: "recordWriteFailed" },
      },
    },
    // Not final: the actor lives until its plugin stops it, refusing changes.
    stopped: {
      entry: "answerStopped",
      on: { "CLIENTS.STOP": { actions: ["recordStop", "answerStopped"] } },
    },
  },
});
