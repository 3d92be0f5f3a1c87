// The recorder's control plane: the `recorder:<tag>` actor (machines/recorder.machine.ts) bound to
// this instance — it starts the writer thread (the plugin's start-up), hands batches to it on its
// flush ticks, starts another after a crash, closes it when the plugin goes, runs the cleanups and
// the clears, and admits the API's reads — and the routes.

import { fromCallback, fromPromise } from "xstate";
import { recorderMachine, type RecorderEvent } from "../../../../machines/recorder.machine.js";
import type { PluginControl } from "../../../registry/control.js";
import type { QueryRecorder } from "./executor.js";
import { routes } from "./routes.js";

const errorText = (e: unknown): string => (e instanceof Error ? e.message : String(e));

export const recorderControl: PluginControl<QueryRecorder> = {
  concern: (recorder, env) => ({
    id: `recorder:${env.tag}`,
    // Ready once the first writer's database is open; one that cannot be opened fails the plugin.
    startup: true,
    logic: recorderMachine.provide({
      actors: {
        writer: fromCallback<RecorderEvent, { tag: string }>(({ sendBack }) => {
          let stopped = false;
          const tell = (e: RecorderEvent): void => {
            if (!stopped) sendBack(e);
          };
          recorder
            .startWriter((error) => tell({ type: "WRITER.EXITED", error: error ? error.message : null }))
            .then(
              () => tell({ type: "WRITER.READY" }),
              (err: unknown) => {
                env.log.warn({ err: errorText(err) }, "query recorder writer could not start");
                // At start-up this is the reason the plugin, and the start or reload, failed.
                tell({ type: "WRITER.EXITED", error: `query recorder '${env.tag}' could not open its store: ${errorText(err)}` });
              },
            );
          // Once the plugin is destroyed this finds the writer closed (destroy committed what was captured).
          return () => {
            stopped = true;
            void recorder.closeWriter();
          };
        }),
        clear: fromPromise(() => recorder.clear()),
        cleanup: fromPromise(() => recorder.cleanup()),
      },
      actions: { flush: () => recorder.flush() },
    }),
    input: { tag: env.tag, cleanupIntervalMs: recorder.options.cleanupIntervalMs, flushIntervalMs: recorder.options.flushIntervalMs, readers: recorder.readerLoad },
  }),
  routes,
};
