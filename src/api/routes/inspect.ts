// State inspection: every actor's id, state value and a context summary (GET /api/actors), and the
// same as a stream (GET /api/actors/stream): the current snapshots first, then each change.

import type { FastifyInstance } from "fastify";
import type { AnyActorRef } from "xstate";
import { listActors, type ActorInfo } from "../../../actors/inspect.js";
import type { ActorTransition } from "../../bus.js";
import { errorSchema } from "../errors.js";
import type { ApiHost } from "../host.js";
import { actorsSchema } from "../schemas.js";
import type { RouteContext } from "../server.js";
import { EventStreams, requireEventStream } from "../sse.js";

/** One SSE frame for an actor's state. */
const frame = (a: Pick<ActorTransition, "id" | "status" | "state" | "context"> & { parent?: string | null }): string =>
  `event: actor\ndata: ${JSON.stringify({ id: a.id, status: a.status, state: a.state ?? null, context: a.context })}\n\n`;

const STREAM_DESCRIPTION =
  "Server-Sent Events. First one `event: actor` frame per actor in the control plane (its current snapshot), then one " +
  "each time an actor's status, state value or shown context changes. Data: `{id, status, state, context}` as in " +
  "GET /api/actors. A `: heartbeat` comment at once and every api.http.sse_heartbeat; a client that falls far behind " +
  "skips frames and gets `event: dropped` with the count.";

/** Actors outside the app's system that the API owns (the audit trail's), listed after the app's. */
const apiActors = new WeakMap<ApiHost, Set<AnyActorRef>>();

/** Lists `actor` in /api/actors (and its stream's opening snapshot) beside the app's; returns its removal. */
export function showActor(host: ApiHost, actor: AnyActorRef): () => void {
  let set = apiActors.get(host);
  if (!set) apiActors.set(host, (set = new Set()));
  set.add(actor);
  return () => set.delete(actor);
}

const everyActor = (host: ApiHost): ActorInfo[] => [...listActors(host.actor as AnyActorRef), ...[...host.workerActors(), ...(apiActors.get(host) ?? [])].flatMap((a) => listActors(a))];

export function registerInspectRoutes(api: FastifyInstance, { host }: RouteContext): void {
  api.get("/api/actors", { schema: { role: "viewer", summary: "Every actor in the control plane with its state", tags: ["observability"], response: { 200: actorsSchema } } }, async () => ({
    ok: true,
    actors: everyActor(host),
  }));

  const streams = new EventStreams(api, () => host.sseHeartbeatMs());
  api.get(
    "/api/actors/stream",
    {
      exposeHeadRoute: false,
      schema: {
        role: "viewer",
        summary: "Every actor's state, then each change (Server-Sent Events)",
        description: STREAM_DESCRIPTION,
        tags: ["observability"],
        response: { 200: { type: "string", description: "text/event-stream" }, 406: errorSchema },
      },
    },
    (req, reply) => {
      requireEventStream(req);
      streams.start(req, reply, (sink) => {
        // Subscribed before the snapshot list is read, in one synchronous step: no change falls between them.
        const onTransition = (t: ActorTransition): void => sink.send([frame(t)]);
        host.bus.on("actor.transition", onTransition);
        sink.send(everyActor(host).map(frame));
        return () => host.bus.off("actor.transition", onTransition);
      });
    },
  );
}
