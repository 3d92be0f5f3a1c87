// CORS policy: an explicit `cors.allowed_origins` list, or one derived from the listen address.
//   0.0.0.0 / [::]      → any origin (Access-Control-Allow-Origin: *, no credentials)
//   a specific IP       → origins whose host is that IP, any scheme and port
//   127.0.0.1 / [::1]   → the same, plus localhost

import { parseListen } from "../config/listen.js";
import type { ApiConfig } from "../config/schema.js";

const METHODS = "GET, POST, PUT, PATCH, DELETE, OPTIONS";
const HEADERS = "Authorization, Content-Type, Accept, Last-Event-ID, X-Requested-With";

export type CorsHeaders = Record<string, string>;

/** The URL parser's form of a host, so `[FD00:0::1]` in the config matches the origin `http://[fd00::1]`. */
function canonicalHost(host: string): string {
  try {
    return new URL(`http://${host}`).hostname.replace(/^\[|\]$/g, "");
  } catch {
    return host.toLowerCase().replace(/^\[|\]$/g, "");
  }
}

export class CorsPolicy {
  private constructor(
    private readonly wildcard: boolean,
    private readonly exact: ReadonlySet<string>,
    private readonly hosts: ReadonlySet<string>,
  ) {}

  static from(config: ApiConfig): CorsPolicy {
    const list = config.cors?.allowed_origins ?? [];
    if (list.length > 0) return new CorsPolicy(list.includes("*"), new Set(list.filter((o) => o !== "*")), new Set());
    const addr = parseListen(config.listen);
    const host = canonicalHost(addr.family === 6 ? `[${addr.host}]` : addr.host);
    if (host === "0.0.0.0" || host === "::") return new CorsPolicy(true, new Set(), new Set());
    const hosts = new Set([host]);
    if (host === "127.0.0.1" || host === "::1") hosts.add("localhost");
    return new CorsPolicy(false, new Set(), hosts);
  }

  /**
   * True when this origin is allowed by name: an exact `allowed_origins` entry or the listen-derived
   * host match, never the `*` wildcard (the guard lets only these make state-changing requests).
   */
  allowsByName(origin: string): boolean {
    if (this.exact.has(origin)) return true;
    if (this.hosts.size === 0) return false;
    try {
      const host = new URL(origin).hostname.toLowerCase().replace(/^\[|\]$/g, "");
      return this.hosts.has(host);
    } catch {
      return false;
    }
  }

  /** Headers for a response to a request with this Origin (no Allow-* headers when not allowed). */
  headers(origin: string | undefined): CorsHeaders {
    if (origin !== undefined && this.allowsByName(origin)) {
      return {
        "access-control-allow-origin": origin,
        "access-control-allow-credentials": "true",
        "access-control-allow-methods": METHODS,
        "access-control-allow-headers": HEADERS,
        vary: "Origin",
      };
    }
    // Unless the answer is the same for every origin, caches must not reuse it for another origin.
    const vary: CorsHeaders = this.exact.size > 0 || this.hosts.size > 0 ? { vary: "Origin" } : {};
    if (this.wildcard) return { "access-control-allow-origin": "*", "access-control-allow-methods": METHODS, "access-control-allow-headers": HEADERS, ...vary };
    return vary;
  }
}
