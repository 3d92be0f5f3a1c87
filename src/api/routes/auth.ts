// Signing in and out of the dashboard (/api/session) and the API tokens (/api/tokens).

import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { parseDuration } from "../../engine/duration.js";
import { bodyField } from "../../registry/control.js";
import { ApiError, errorResponses } from "../errors.js";
import type { AuthRefusal, Principal } from "../auth/authenticator.js";
import { MAX_TOKENS, type TokenView } from "../auth/credentials.js";
import { ROLES, type Role } from "../../registry/roles.js";
import { scopeProblem } from "../auth/scopes.js";
import type { AuthService } from "../auth/service.js";
import type { RouteContext } from "../server.js";

const bool = { type: "boolean" } as const;
const nullableInt = { type: ["integer", "null"] } as const;
const principalSchema = {
  type: "object",
  properties: { kind: { type: "string" }, name: { type: "string" }, role: { type: ["string", "null"] }, via: { type: "string" }, scopes: { type: ["array", "null"], items: { type: "string" } } },
} as const;
const sessionSchema = { type: ["object", "null"], properties: { user: { type: "string" }, role: { type: "string" }, expires_at_ms: { type: "integer" }, idle_timeout_ms: { type: "integer" } } } as const;
const tokenSchema = {
  type: "object",
  properties: {
    id: { type: "string" },
    name: { type: "string" },
    role: { type: ["string", "null"] },
    scopes: { type: ["array", "null"], items: { type: "string" } },
    created_at_ms: { type: "integer" },
    created_by: { type: "string" },
    expires_at_ms: nullableInt,
    last_used_at_ms: nullableInt,
  },
} as const;

/** A refusal of the authenticator as the API error it is (429/503 with Retry-After). */
export function refusalToError(r: AuthRefusal, reply: FastifyReply): ApiError {
  if (r.retryAfterMs !== undefined) {
    const seconds = Math.max(1, Math.ceil(r.retryAfterMs / 1000));
    void reply.header("retry-after", String(seconds));
    return new ApiError(r.code, r.message, { retry_after_s: seconds });
  }
  return new ApiError(r.code, r.message);
}

const publicPrincipal = (p: Principal): Record<string, unknown> => ({ kind: p.kind, name: p.name, role: p.role, via: p.via, scopes: p.scopes });

export function registerAuthRoutes(api: FastifyInstance, { host }: RouteContext, auth: AuthService, routeKeys: () => readonly string[]): void {
  const sessionInfo = (p: Principal): Record<string, unknown> | null => {
    const s = p.session;
    if (!s || p.role === null) return null;
    const lifetimes = auth.authenticator.current.sessions;
    return { user: s.user, role: p.role, expires_at_ms: auth.credentials.sessionExpiry(s, lifetimes), idle_timeout_ms: lifetimes.idleMs };
  };

  api.post(
    "/api/session",
    {
      bodyLimit: 8192,
      config: { audit: (req) => `sign in as ${bodyField(req.body, "username") || "?"}` },
      schema: {
        role: "public",
        summary: "Sign in: sets this listener's HttpOnly session cookie (the dashboard's way in)",
        tags: ["auth"],
        body: {
          type: "object",
          additionalProperties: false,
          required: ["username", "password"],
          properties: { username: { type: "string", minLength: 1, maxLength: 4096 }, password: { type: "string", maxLength: 16384 } },
        },
        response: { 200: { type: "object", properties: { ok: bool, session: sessionSchema } }, ...errorResponses("unauthorized", "too_many_attempts", "auth_not_configured", "auth_busy") },
      },
    },
    async (req: FastifyRequest, reply: FastifyReply) => {
      const { username, password } = req.body as { username: string; password: string };
      if (auth.authenticator.current.users.size === 0) throw new ApiError("auth_not_configured", "no users are configured (api.http.auth): the API needs no sign-in");
      const checked = await auth.authenticator.checkPassword(username, password, req.ip, "session");
      if ("code" in checked) throw refusalToError(checked, reply);
      const { id, session } = auth.credentials.startSession(checked.user);
      const principal: Principal = { kind: "user", name: checked.user, role: checked.role, via: "session", scopes: null, keys: [`session:${session.hash}`, `user:${checked.user}`], session };
      req.principal = principal;
      await saved(auth);
      const lifetimes = auth.authenticator.current.sessions;
      void reply.header("set-cookie", auth.sessionCookie(id, lifetimes.absoluteMs));
      return { ok: true, session: sessionInfo(principal) };
    },
  );

  api.get(
    "/api/session",
    // Every dashboard load asks this first: without credentials that is not an attempt worth a line in the trail.
    { config: { audit: false }, schema: { role: "metrics", summary: "Who this request is: the caller's name, role and how it signed in, and whether the API asks for credentials", tags: ["auth"], response: { 200: { type: "object", properties: { ok: bool, auth_required: bool, principal: principalSchema, session: sessionSchema } } } } },
    async (req: FastifyRequest) => {
      const p = req.principal;
      if (!p) throw new ApiError("unauthorized", "missing or wrong credentials");
      return { ok: true, auth_required: auth.authenticator.current.required, principal: publicPrincipal(p), session: sessionInfo(p) };
    },
  );

  api.delete(
    "/api/session",
    { config: { audit: () => "sign out" }, schema: { role: "metrics", summary: "Sign out: ends this session and clears its cookie (its event streams close)", tags: ["auth"], response: { 200: { type: "object", properties: { ok: bool, signed_out: bool } } } } },
    async (req: FastifyRequest, reply: FastifyReply) => {
      const s = req.principal?.session;
      void reply.header("set-cookie", auth.clearedCookie());
      if (!s) return { ok: true, signed_out: false };
      auth.credentials.endSession(s.hash);
      await saved(auth);
      auth.closeKey(`session:${s.hash}`, reply.raw);
      return { ok: true, signed_out: true };
    },
  );

  api.post(
    "/api/tokens",
    {
      bodyLimit: 64 * 1024,
      config: { audit: (req) => tokenSummary(req.body) },
      schema: {
        role: "admin",
        summary: "Make an API token with a role or a list of route scopes, optionally expiring; its secret is in this answer only",
        tags: ["auth"],
        body: {
          type: "object",
          additionalProperties: false,
          required: ["name"],
          properties: {
            name: { type: "string", minLength: 1, maxLength: 64, pattern: "^[A-Za-z0-9][A-Za-z0-9 ._@-]*$" },
            role: { type: "string", enum: [...ROLES] },
            scopes: { type: "array", minItems: 1, maxItems: 64, items: { type: "string", minLength: 1, maxLength: 256 } },
            expires_in: { type: ["integer", "string"], minimum: 1 },
            expires_at_ms: { type: "integer", minimum: 1 },
          },
        },
        response: { 201: { type: "object", properties: { ok: bool, token: tokenSchema, secret: { type: "string" } } }, ...errorResponses("token_exists", "too_many_tokens", "auth_state_write_failed") },
      },
    },
    async (req: FastifyRequest, reply: FastifyReply) => {
      const body = req.body as { name: string; role?: Role; scopes?: string[]; expires_in?: number | string; expires_at_ms?: number };
      if ((body.role === undefined) === (body.scopes === undefined)) throw new ApiError("invalid_request", "give the token a role or a list of scopes (one of the two)");
      if (body.expires_in !== undefined && body.expires_at_ms !== undefined) throw new ApiError("invalid_request", "give expires_in or expires_at_ms, not both");
      const problems = (body.scopes ?? []).map((s) => scopeProblem(s, routeKeys())).filter((p): p is string => p !== null);
      if (problems.length > 0) throw new ApiError("invalid_request", `body.scopes: ${problems.join("; ")}`);
      const now = host.now();
      let expires: number | null = body.expires_at_ms ?? null;
      if (body.expires_in !== undefined) {
        try {
          expires = now + parseDuration(body.expires_in);
        } catch (err) {
          throw new ApiError("invalid_request", `body.expires_in: ${(err as Error).message}`);
        }
      }
      if (expires !== null && expires <= now) throw new ApiError("invalid_request", "the token would have expired already");
      if (auth.credentials.hasActiveName(body.name)) throw new ApiError("token_exists", `a token named '${body.name}' exists: revoke it first or choose another name`);
      if (auth.credentials.activeTokens().length >= MAX_TOKENS) throw new ApiError("too_many_tokens", `at most ${MAX_TOKENS} tokens can be active: revoke some first`);
      const made = auth.credentials.createToken({ name: body.name, role: body.role ?? null, scopes: body.scopes ?? null, expires_at_ms: expires, created_by: req.principal?.name ?? "anonymous" });
      await saved(auth);
      return reply.code(201).send({ ok: true, token: made.token, secret: made.secret });
    },
  );

  api.get(
    "/api/tokens",
    { schema: { role: "admin", summary: "The active API tokens (never their secrets), with their last use", tags: ["auth"], response: { 200: { type: "object", properties: { ok: bool, tokens: { type: "array", items: tokenSchema } } } } } },
    async () => ({ ok: true, tokens: auth.credentials.activeTokens().sort((a: TokenView, b: TokenView) => b.created_at_ms - a.created_at_ms) }),
  );

  api.delete(
    "/api/tokens/:id",
    {
      config: {
        audit: (req) => {
          const id = (req.params as { id: string }).id;
          return `revoke token ${auth.credentials.tokenById(id)?.name ?? id}`;
        },
      },
      schema: {
        role: "admin",
        summary: "Revoke a token at once: its next request is refused and its open event streams close",
        tags: ["auth"],
        params: { type: "object", required: ["id"], properties: { id: { type: "string", maxLength: 64 } } },
        response: { 200: { type: "object", properties: { ok: bool, token: tokenSchema } }, ...errorResponses("token_not_found", "auth_state_write_failed") },
      },
    },
    async (req: FastifyRequest, reply: FastifyReply) => {
      const { id } = req.params as { id: string };
      const revoked = auth.credentials.revokeToken(id);
      if (!revoked) throw new ApiError("token_not_found", `no active token with id '${id}'`);
      auth.closeKey(`token:${id}`, reply.raw);
      await saved(auth);
      const { hash: _hash, revoked_at_ms: _at, ...view } = revoked;
      return { ok: true, token: view };
    },
  );
}

async function saved(auth: AuthService): Promise<void> {
  try {
    await auth.save();
  } catch (err) {
    throw new ApiError("auth_state_write_failed", `the auth state file could not be written: ${(err as Error).message}; the change holds until the process stops`);
  }
}

function tokenSummary(body: unknown): string {
  const scopes = bodyField(body, "scopes");
  return `create token ${bodyField(body, "name")} (${scopes ? `scopes: ${scopes}` : `role ${bodyField(body, "role")}`})`;
}
