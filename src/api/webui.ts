// The static WebUI at / (outside /api, never behind Basic Auth): files from `webui.root`, or the
// built-in dashboard (dist/webui, built by `npm run build`), the index for directories, and the index
// again for unknown paths (single-page apps route on the client).

import { createReadStream, existsSync } from "node:fs";
import { stat } from "node:fs/promises";
import { dirname, extname, join, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import type { FastifyReply, FastifyRequest } from "fastify";
import { errorBody } from "./errors.js";

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".map": "application/json",
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".svg": "image/svg+xml",
  ".ico": "image/x-icon",
  ".wasm": "application/wasm",
  ".txt": "text/plain; charset=utf-8",
  ".woff": "font/woff",
  ".woff2": "font/woff2",
};

/** The directory holding package.json, from src/api (tests) and dist/src/api (the built program) alike. */
function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "package.json")) && dirname(dir) !== dir) dir = dirname(dir);
  return dir;
}

/** Where `npm run build` puts the built-in dashboard (webui/ → dist/webui). */
export const BUILTIN_WEBUI_ROOT = join(packageRoot(), "dist", "webui");
export const BUILTIN_WEBUI_INDEX = "index.html";

/**
 * Headers for the built-in dashboard: its own scripts and same-origin API calls only, and no framing
 * by another site (its buttons change state, so a framing page could trick a click).
 */
const BUILTIN_HEADERS: Record<string, string> = {
  "content-security-policy":
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-frame-options": "DENY",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
};

export class WebUi {
  private readonly root: string;

  constructor(
    root: string,
    private readonly index: string,
    /** The built-in dashboard: its security headers, and a 404 that says how to build it. */
    private readonly builtin = false,
  ) {
    this.root = resolve(root);
  }

  /** The file a URL path names inside the root, or null when it would leave the root. */
  private locate(urlPath: string): string | null {
    let decoded: string;
    try {
      decoded = decodeURIComponent(urlPath);
    } catch {
      return null;
    }
    if (decoded.includes("\0")) return null;
    const segments = decoded.split(/[/\\]+/).filter((s) => s.length > 0);
    if (segments.some((s) => s === "." || s === "..")) return null;
    const full = resolve(join(this.root, ...segments));
    return full === this.root || full.startsWith(this.root + sep) ? full : null;
  }

  private async file(path: string): Promise<string | null> {
    try {
      const st = await stat(path);
      if (st.isFile()) return path;
      if (st.isDirectory()) {
        const index = join(path, this.index);
        return (await stat(index)).isFile() ? index : null;
      }
    } catch {
      /* not there */
    }
    return null;
  }

  async serve(req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    if (req.method !== "GET" && req.method !== "HEAD") {
      return reply.code(405).header("allow", "GET, HEAD").send(errorBody("method_not_allowed", "the WebUI serves GET and HEAD only"));
    }
    const located = this.locate(req.url.split("?")[0]);
    if (located === null) return reply.code(404).send(errorBody("not_found", "no such file"));
    const path = (await this.file(located)) ?? (await this.file(join(this.root, this.index)));
    if (path === null) {
      const message = this.builtin ? `the built-in dashboard is not built (no ${join(this.root, this.index)}): run npm run build` : "no such file, and no WebUI index";
      return reply.code(404).send(errorBody("not_found", message));
    }
    const isIndex = path.endsWith(sep + this.index);
    if (this.builtin) void reply.headers(BUILTIN_HEADERS);
    void reply
      .type(TYPES[extname(path).toLowerCase()] ?? "application/octet-stream")
      .header("cache-control", isIndex ? "no-cache" : "public, max-age=31536000, immutable");
    return reply.send(req.method === "HEAD" ? "" : createReadStream(path));
  }
}
