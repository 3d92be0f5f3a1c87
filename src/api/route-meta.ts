// What a route declares about itself besides its request and response schemas: the least role it
// needs (in the schema, so OpenAPI shows it) and how its audit line reads (in its config).

import type { FastifyRequest } from "fastify";
import type { AuthRefusal, Principal } from "./auth/authenticator.js";
import type { RouteRole } from "../registry/roles.js";

/** The audit line of a request to this route (after it was answered), or false: never audited (a POST that changes nothing). */
export type AuditSummary = ((req: FastifyRequest) => string) | false;

declare module "fastify" {
  interface FastifySchema {
    /** The least role this route needs; `public`: no credentials (signing in). Every /api route declares one. */
    role?: RouteRole;
  }
  interface FastifyRequest {
    /** Who made the request, once authenticated (null before, and for refused and public requests). */
    principal: Principal | null;
    /** The refused credentials' attempt (for the audit line). */
    attempted?: AuthRefusal;
    /** The error code of the answer, when it was an error. */
    errorCode?: string;
  }
  interface FastifyContextConfig {
    /** The audit line for this route (default: method and path); false leaves it out of the audit trail. */
    audit?: AuditSummary;
  }
}
