// Checks of the `api.http` section that the schema cannot express: the listen address, allowed_hosts
// entries, the WebUI index name, and TLS settings that only work together (half-configured TLS must not fall back to HTTP).

import { authProblems } from "./auth.js";
import { auditProblems } from "./audit.js";
import { sseHeartbeatProblem } from "./heartbeat.js";
import { configLimitsProblems } from "./limits.js";
import { normaliseAllowedHost } from "./hosts.js";
import { listenProblem } from "./listen.js";
import type { ApiConfig } from "./schema.js";

export interface ApiProblem {
  /** Path below `api.http`. */
  path: string[];
  message: string;
}

export function apiProblems(http: ApiConfig): ApiProblem[] {
  const problems: ApiProblem[] = [];
  const listen = listenProblem(http.listen);
  if (listen) problems.push({ path: ["listen"], message: `api.http.listen: ${listen}` });
  (http.allowed_hosts ?? []).forEach((entry, i) => {
    if (normaliseAllowedHost(entry) === null) {
      problems.push({ path: ["allowed_hosts", String(i)], message: `api.http.allowed_hosts[${i}]: '${entry}' is not a host name (a name such as dash.home.arpa, [ipv6], or *)` });
    }
  });
  const index = typeof http.webui === "object" ? http.webui.index : undefined;
  if (index === "." || index === "..") problems.push({ path: ["webui", "index"], message: "api.http.webui.index must name a file" });
  const heartbeat = sseHeartbeatProblem(http.sse_heartbeat);
  if (heartbeat) problems.push({ path: ["sse_heartbeat"], message: heartbeat });
  for (const p of configLimitsProblems(http.limits)) problems.push({ path: ["limits", p.key], message: p.message });
  problems.push(...authProblems(http.auth));
  for (const p of auditProblems(http.audit)) problems.push({ path: ["audit", ...p.path], message: p.message });
  const ssl = http.ssl;
  if (!ssl) return problems;
  const tls = ssl.cert !== undefined && ssl.key !== undefined;
  if ((ssl.cert === undefined) !== (ssl.key === undefined)) {
    problems.push({ path: ["ssl"], message: "api.http.ssl needs both cert and key (HTTPS is used only when both are set)" });
  } else if (!tls && (ssl.client_ca !== undefined || ssl.require_client_cert === true)) {
    problems.push({ path: ["ssl"], message: "api.http.ssl.client_ca and require_client_cert need ssl.cert and ssl.key" });
  }
  if (ssl.require_client_cert === true && ssl.client_ca === undefined) {
    problems.push({ path: ["ssl", "require_client_cert"], message: "api.http.ssl.require_client_cert needs ssl.client_ca to verify client certificates against" });
  }
  return problems;
}
