// State inspection: every actor's id, state value and a context summary.

import type { FastifyInstance } from "fastify";
import type { AnyActorRef } from "xstate";
import { listActors } from "../../../actors/inspect.js";
import { actorsSchema } from "../schemas.js";
import type { RouteContext } from "../server.js";

export function registerInspectRoutes(api: FastifyInstance, { host }: RouteContext): void {
  api.get("/api/actors", { schema: { summary: "Every actor in the control plane with its state", tags: ["observability"], response: { 200: actorsSchema } } }, async () => ({
    ok: true,
    actors: listActors(host.actor as AnyActorRef),
  }));
}
