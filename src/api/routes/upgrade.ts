// The upgrade routes (spec: Upgrade), registered only in builds with the `upgrade` feature:
// check asks the release host and changes nothing; apply hands the task to the `upgrade` actor
// (one at a time: its guard refuses a second with 409 upgrade_in_progress) and answers 202; status
// reads the actor. Check and apply run code choices another host supplies, so (issue 22) they are
// refused on a listener others can reach without auth (403 upgrade_requires_auth), without an
// `upgrade` section (409 upgrade_not_configured), and for bodies naming a source (repository,
// socks5, ...: 400 upgrade_field_not_allowed). The body's release_host_token goes into the task's
// settings only. Installed by a distribution package (src/upgrade/layout.ts packageMarker), apply
// answers 409 upgrade_managed_by_package: the package manager owns the files.

import { bodyField } from "../../registry/control.js";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { sendIfAccepted } from "../../../actors/ask.js";
import { upgradeRestartRequired, upgradeState, type UpgradeEvent } from "../../../machines/upgrade.machine.js";
import { checkUpgrade } from "../../upgrade/engine.js";
import { detectInstallDir, packageMarker } from "../../upgrade/layout.js";
import { resolveOptions, sourceField, upgradeRequestSchema, UpgradeConfigError, UpgradeNotConfiguredError, type UpgradeOptions, type UpgradeRequest } from "../../upgrade/options.js";
import { VERSION } from "../../version.js";
import { ApiError, errorResponses } from "../errors.js";
import { refusalError } from "../guards.js";
import type { ApiHost } from "../host.js";
import { upgradeAcceptedSchema, upgradeCheckSchema, upgradeStatusSchema } from "../schemas.js";
import type { ApiAccess, RouteContext } from "../server.js";
import { jsonBody, strictBody } from "../body.js";

/** The bodies are a handful of short fields. */
const BODY_LIMIT = 16 * 1024;

/** Until accounts exist: on a listener other machines can reach, only an authenticated API may upgrade. */
function checkAccess(access: ApiAccess): void {
  if (access.loopbackListener || access.authConfigured) return;
  throw new ApiError(
    "upgrade_requires_auth",
    "upgrade routes are refused on a non-loopback API listener without authentication: anyone who reaches it could install code; set api.http.auth (or TLS client certificates), or listen on 127.0.0.1",
  );
}

/** Installed by a package manager: it owns /usr/lib/sluice, so the self-upgrade never writes there. */
function checkNotPackaged(): void {
  const marker = packageMarker();
  if (marker) {
    throw new ApiError(
      "upgrade_managed_by_package",
      `this installation belongs to the ${marker.manager} package ${marker.package} ${marker.version}: upgrade it with the package manager (apt install ./sluice_<version>_<arch>.deb, or apt upgrade), not through Sluice`,
    );
  }
}

/** A body naming where code comes from is refused before anything else looks at it. */
function checkSource(body: unknown): void {
  const source = sourceField(body);
  if (source) throw new ApiError("upgrade_field_not_allowed", `${source.field} cannot be chosen by a request (it decides where code comes from or how it is trusted); set ${source.key} in the configuration instead`);
}

function options(host: ApiHost, req: FastifyRequest): UpgradeOptions {
  try {
    return resolveOptions(host.upgradeSettings(), req.body as UpgradeRequest, { baseDir: host.baseDir, outbound: host.outboundProfiles() });
  } catch (err) {
    if (err instanceof UpgradeNotConfiguredError) throw new ApiError("upgrade_not_configured", err.message);
    if (err instanceof UpgradeConfigError) throw new ApiError("invalid_upgrade_config", err.message);
    throw err;
  }
}

export function statusRecord(host: ApiHost): Record<string, unknown> {
  const snap = host.upgradeActor.getSnapshot();
  const c = snap.context;
  const state = upgradeState(snap.value);
  return {
    ok: state !== "failed",
    state,
    started_at_ms: c.started_at_ms,
    completed_at_ms: c.completed_at_ms,
    error: c.error,
    installed_version: c.installed_version,
    restart_required: upgradeRestartRequired(snap.value),
    current_version: VERSION,
    target_version: c.target_version,
    // The same test apply makes, so a client can tell before asking whether apply can work.
    installed_release: detectInstallDir(host.upgradeSettings()?.install_dir, host.baseDir) !== null,
    managed_by_package: packageMarker() !== null,
  };
}

export function registerUpgradeRoutes(api: FastifyInstance, { host, access, schemas }: RouteContext): void {
  api.get("/api/upgrade/status", { schema: { role: "viewer", summary: "The latest upgrade task: state, times, error, installed version", tags: ["upgrade"], response: { 200: upgradeStatusSchema } } }, async () => statusRecord(host));

  // Own scope: an empty body (or one without a JSON content type) is allowed and means no overrides.
  void api.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
    const preValidation = async (req: FastifyRequest): Promise<void> => {
      checkAccess(access());
      // An empty body is no overrides; anything else must be a JSON object of the spec's fields.
      req.body = jsonBody(req.body, "invalid_request");
      checkSource(req.body);
    };
    const common = { bodyLimit: BODY_LIMIT, validatorCompiler: schemas.validator(strictBody), preValidation };
    const refusals = ["invalid_request", "invalid_upgrade_config", "upgrade_field_not_allowed", "upgrade_requires_auth", "upgrade_not_configured"] as const;

    scope.post(
      "/api/upgrade/check",
      {
        ...common,
        config: { audit: () => "check for a newer release" },
        schema: {
          role: "admin",
          summary: "Compare the newest release with this one (downloads and changes nothing)",
          tags: ["upgrade"],
          body: upgradeRequestSchema,
          response: { 200: upgradeCheckSchema, ...errorResponses(...refusals, "upgrade_check_failed") },
        },
      },
      async (req) => {
        const o = options(host, req);
        try {
          return await checkUpgrade(o);
        } catch (err) {
          throw new ApiError("upgrade_check_failed", `upgrade check failed: ${(err as Error).message}`);
        }
      },
    );

    scope.post(
      "/api/upgrade/apply",
      {
        ...common,
        preValidation: async (req) => {
          await preValidation(req);
          checkNotPackaged();
        },
        config: { audit: (req) => `upgrade to ${bodyField(req.body, "version") || "the newest release"}` },
        schema: {
          role: "admin",
          summary: "Start an upgrade task: download, verify, unpack, smoke-test, switch, restart (poll /api/upgrade/status)",
          tags: ["upgrade"],
          body: upgradeRequestSchema,
          response: { 202: upgradeAcceptedSchema, ...errorResponses(...refusals, "upgrade_in_progress", "upgrade_not_installed", "upgrade_managed_by_package") },
        },
      },
      async (req, reply) => {
        const o = options(host, req);
        try {
          const event: UpgradeEvent = { type: "UPGRADE.APPLY", request: o, installed: o.installDir !== null };
          sendIfAccepted(host.upgradeActor, event);
        } catch (err) {
          throw refusalError(err);
        }
        return reply.code(202).send({ ok: true, action: "upgrade_apply", status: "accepted", message: "upgrade started; the service restarts when it is installed" });
      },
    );
  });
}
