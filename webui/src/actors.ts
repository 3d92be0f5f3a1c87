// The control plane's actor stream (GET /api/actors/stream), one per tab, shared by every page part
// that shows server state: a part loads once, then loads again when an actor it cares about changes
// (a cron job starts or ends, a download batch runs, a reload happens) instead of polling. The stream
// is open while at least one part follows it; after a reconnect every follower loads again (changes
// may have been missed meanwhile).

import { useEffect, useRef } from "preact/hooks";
import { onSignOut } from "./api";
import type { ActorFrame } from "./shapes";
import { openStream, type EventStream } from "./sse";

/** Which actor frames a follower loads again for: by the actor's id, and (when it needs to) what the frame says. */
export type ActorMatch = (id: string, frame: ActorFrame) => boolean;

type Follower = { match: ActorMatch; changed: () => void };

const followers = new Set<Follower>();
let stream: EventStream | null = null;

function open(): void {
  let opened = false;
  const own = openStream("api/actors/stream", {
    onEvent(e) {
      if (e.event !== "actor") return;
      let frame: ActorFrame;
      try {
        frame = JSON.parse(e.data) as ActorFrame;
      } catch {
        return;
      }
      for (const f of followers) if (f.match(frame.id, frame)) f.changed();
    },
    onState(state) {
      // Stopped for good (signed out, refused): the next follower opens a new one.
      if (state === "closed" && stream === own) stream = null;
      if (state !== "open") return;
      // The first connection starts with every snapshot; a later one may follow missed changes.
      if (opened) for (const f of followers) f.changed();
      opened = true;
    },
  });
  stream = own;
}

// Signed out: the connection (made with the old credentials) closes and nobody follows it any more;
// a page of the next session opens a new one.
onSignOut(() => {
  followers.clear();
  stream?.close();
  stream = null;
});

/** Calls `changed` whenever an actor whose frame `match` accepts changes; returns the unsubscribe. */
export function followActors(match: ActorMatch, changed: () => void): () => void {
  const f = { match, changed };
  followers.add(f);
  if (stream === null) open();
  return () => {
    followers.delete(f);
    if (followers.size === 0) {
      stream?.close();
      stream = null;
    }
  };
}

/**
 * Runs `load` now and again after each change of an actor `match` accepts: one load at a time, and a
 * change during a load runs one more afterwards. Returns the stop.
 */
export function loadOnChange(match: ActorMatch, load: () => Promise<void> | void): () => void {
  let running = false;
  let again = false;
  let live = true;
  const run = (): void => {
    if (!live) return;
    if (running) {
      again = true;
      return;
    }
    running = true;
    void Promise.resolve()
      .then(load)
      // Callers show their own errors; the next change loads again.
      .catch(() => undefined)
      .finally(() => {
        running = false;
        if (again) {
          again = false;
          run();
        }
      });
  };
  run();
  const stop = followActors(match, run);
  return () => {
    live = false;
    stop();
  };
}

/** loadOnChange for a component: from mount (and each change of `key`) until unmount. */
export function useActorLoad(key: string, match: ActorMatch, load: () => Promise<void> | void): void {
  const latest = useRef({ match, load });
  latest.current = { match, load };
  useEffect(
    () =>
      loadOnChange(
        (id, frame) => latest.current.match(id, frame),
        () => latest.current.load(),
      ),
    [key],
  );
}
