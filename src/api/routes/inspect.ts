// State inspection: every actor's id, state value and a context summary (GET /api/actors), and the
// same as a stream (GET /api/actors/stream): the current snapshots first, then each change.

import type { FastifyInstance } from "fastify";
import type { AnyActorRef } from "xstate";
import { listActors } from "../../../actors/inspect.js";
import type { ActorTransition } from "../../bus.js";
import { errorSchema } from "../errors.js";
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

export function registerInspectRoutes(api: FastifyInstance, { host }: RouteContext): void {
  api.get("/api/actors", { schema: { role: "viewer", summary: "Every actor in the control plane with its state", tags: ["observability"], response: { 200: actorsSchema } } }, async () => ({
    ok: true,
    actors: listActors(host.actor as AnyActorRef),
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
        sink.send(listActors(host.actor as AnyActorRef).map(frame));
        return () => host.bus.off("actor.transition", onTransition);
      });
    },
  );
}
