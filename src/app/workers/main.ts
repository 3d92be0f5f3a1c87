// A data-plane worker (forked by ./pool.ts through node:cluster): the same App as a single process,
// without the API or cluster membership. Its listeners share the primary's handles; it builds the
// configuration file's generations itself (the primary says when: its own is ready), replays the
// changes the primary's actors made, sends its recorder batches and log lines and, asked, its metrics.

import { ActorGoneError } from "../../../actors/ask.js";
import { reloadWhenIdle } from "../../../actors/reload-wait.js";
import { describe, App } from "../app.js";
import { parseMessage } from "../../cluster/cluster.js";
import type { LogLevel } from "../../config/schema.js";
import { answer, ChannelHandlers, isChannelMessage, type ChannelMessage, type ProcessChannel } from "../../registry/process-role.js";
import { forwardLogs } from "./log-forward.js";
import { WORKER_ENV, type WorkerStart } from "./protocol.js";

function send(message: ChannelMessage): boolean {
  if (!process.connected || !process.send) return false;
  process.send(message, undefined, {}, () => undefined);
  return true;
}

function startOptions(): WorkerStart {
  const text = process.env[WORKER_ENV];
  if (!text) throw new Error(`${WORKER_ENV} is not set: this program is started by sluice's primary process`);
  return JSON.parse(text) as WorkerStart;
}

async function main(): Promise<number> {
  const start = startOptions();
  const handlers = new ChannelHandlers();
  const channel: ProcessChannel = { send, listen: (t, key, handler) => handlers.listen(t, key, handler) };
  let app: App | null = null;
  let stopping = false;
  const stop = (): void => {
    stopping = true;
    void app?.stop();
  };
  // The primary stops its workers itself; a signal to the whole group (a terminal's Ctrl-C, systemd) drains too.
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  process.on("SIGHUP", () => undefined);
  // Reloads asked for while one runs wait for it (the file may have changed since it was read).
  let reloads: Promise<unknown> = Promise.resolve();
  const reload = (): void => {
    const a = app;
    if (!a) return;
    reloads = reloads.then(() => reloadWhenIdle(a.actor, new AbortController().signal)).catch((err: unknown) => {
      if (!(err instanceof ActorGoneError)) a.log.warn({ target: "workers", err: describe(err) }, "the primary's reload could not be run here");
    });
  };
  /** What came before the App was up (the primary answers the first "ready" at once): taken once it is. */
  const early: ChannelMessage[] = [];
  const take = (m: ChannelMessage, a: App): void => {
    switch (m.t) {
      case "change": {
        // The shape and checks of the Redis cluster channel's messages.
        const change = parseMessage(JSON.stringify({ v: 1, from: "primary", instance: "primary", ...(m.change as object) }));
        if (change) void a.applyChange(change, "primary").catch((err: unknown) => a.log.warn({ target: "workers", plugin: change.tag, err: describe(err) }, "a change of the primary could not be applied here"));
        return;
      }
      case "reload":
        return reload();
      case "metrics?":
        void a.metrics.snapshot().then((snapshot) => answer(m, send, { snapshot }));
        return;
      case "stop":
        return stop();
    }
  };
  process.on("message", (m: unknown) => {
    if (!isChannelMessage(m)) return;
    // A plugin's message; a question (it has an id) that no plugin here takes is answered `none` at once.
    if (m.key !== "") {
      if (!handlers.dispatch(m, send) && typeof m.id === "number") answer(m, send, { none: true });
      return;
    }
    if (m.t === "stop" && !app) return stop();
    if (app) take(m, app);
    else early.push(m);
  });
  try {
    app = await App.start({
      configPath: start.configPath,
      baseDir: start.baseDir,
      logLevel: (start.logLevel ?? undefined) as LogLevel | undefined,
      worker: {
        index: start.index,
        channel,
        activated: (generation, servers) => send({ t: "ready", key: "", pid: process.pid, generation, servers }),
      },
    });
  } catch (err) {
    send({ t: "failed", key: "", error: describe(err) });
    return 1;
  }
  for (const m of early.splice(0)) take(m, app);
  const stopForwarding = forwardLogs(app.logRing, app.bus, send);
  if (stopping) void app.stop();
  const outcome = await app.done;
  // The last lines (the drain's) reach the primary before the process ends.
  stopForwarding();
  return outcome.error ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`sluice worker: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
