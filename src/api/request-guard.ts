// Host and Origin checks in front of the API and the WebUI, so a web page cannot drive the API
// through the user's browser.
//  - Host (DNS rebinding): on a loopback listener only `localhost` and loopback addresses; on any
//    other listener IP literals; anywhere the names in `api.http.allowed_hosts` (`*`: any).
//    No Host header (HTTP/1.0) passes. 403 `forbidden_host`.
//  - Origin (CSRF), /api/* only: a state-changing request (not GET/HEAD/OPTIONS, or a route marked
//    `changesState`) that carries an Origin passes only when the CORS policy allows that origin by
//    name (never by `*`) or the origin's host is the request's own (the WebUI on this listener).
//    `Origin: null` never passes. A request without Origin that the browser marks cross-site or
//    same-site (`Sec-Fetch-Site`: an <img>, a link, a no-cors fetch) is refused for every method.
//    403 `forbidden_origin`. Requests without Origin or Sec-Fetch-Site (curl, scripts) pass.

import { isIPv4, isIPv6 } from "node:net";
import { parseListen } from "../config/listen.js";
import { hostOfHeader, normaliseAllowedHost } from "../config/hosts.js";
import type { ApiConfig } from "../config/schema.js";
import type { CorsPolicy } from "./cors.js";

declare module "fastify" {
  interface FastifyContextConfig {
    /** A GET route with side effects: the Origin check treats it like a POST. */
    changesState?: boolean;
  }
}

export interface RequestRefusal {
  code: "forbidden_host" | "forbidden_origin";
  message: string;
}

export interface GuardedRequest {
  method: string;
  headers: { host?: string; origin?: string; "sec-fetch-site"?: string | string[] };
  changesState?: boolean;
}

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);
const isIpLiteral = (host: string): boolean => isIPv4(host) || isIPv6(host);

/** 127.0.0.0/8, ::1, and IPv4-mapped 127.x in any spelling. */
export function isLoopback(ip: string): boolean {
  if (isIPv4(ip)) return ip.startsWith("127.");
  if (!isIPv6(ip)) return false;
  const canonical = new URL(`http://[${ip}]`).hostname.slice(1, -1);
  return canonical === "::1" || /^::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}$/.test(canonical);
}

function originHost(origin: string): string | null {
  try {
    return new URL(origin).hostname.toLowerCase().replace(/^\[|\]$/g, "");
  } catch {
    return null;
  }
}

const shown = (text: string): string => JSON.stringify(text.length > 100 ? `${text.slice(0, 100)}…` : text);

export class RequestGuard {
  private constructor(
    private readonly loopbackListener: boolean,
    private readonly anyHost: boolean,
    private readonly names: ReadonlySet<string>,
    private readonly cors: CorsPolicy,
  ) {}

  static from(config: ApiConfig, cors: CorsPolicy): RequestGuard {
    const entries = (config.allowed_hosts ?? []).map(normaliseAllowedHost).filter((h): h is string => h !== null);
    return new RequestGuard(isLoopback(parseListen(config.listen).host), entries.includes("*"), new Set(entries), cors);
  }

  /** Host check for every request (API and WebUI); null when it may go on. */
  host(header: string | undefined): RequestRefusal | null {
    if (header === undefined || this.anyHost) return null;
    const host = hostOfHeader(header);
    if (host !== null) {
      if (this.names.has(host)) return null;
      if (this.loopbackListener ? host === "localhost" || isLoopback(host) : isIpLiteral(host)) return null;
    }
    const allowed = this.loopbackListener ? "localhost or a loopback address" : "an IP address";
    return {
      code: "forbidden_host",
      message: `Host ${shown(header)} is not served here (DNS rebinding defence): use ${allowed}, or list the name in api.http.allowed_hosts`,
    };
  }

  /** Origin check for /api/* requests; null when it may go on. */
  origin(req: GuardedRequest): RequestRefusal | null {
    if (req.method === "OPTIONS") return null;
    const origin = req.headers.origin;
    if (origin === undefined) {
      const site = req.headers["sec-fetch-site"];
      if (site !== "cross-site" && site !== "same-site") return null;
      return { code: "forbidden_origin", message: `a ${site} browser request without an Origin header cannot reach the API` };
    }
    if (SAFE_METHODS.has(req.method) && req.changesState !== true) return null;
    if (origin !== "null") {
      if (this.cors.allowsByName(origin)) return null;
      const own = req.headers.host === undefined ? null : hostOfHeader(req.headers.host);
      // The WebUI served by this listener: the Host check has already vouched for this name.
      if (own !== null && originHost(origin) === own) return null;
    }
    return {
      code: "forbidden_origin",
      message: `${req.method} from origin ${shown(origin)} refused (cross-site request): list the origin in api.http.cors.allowed_origins to allow it`,
    };
  }
}
