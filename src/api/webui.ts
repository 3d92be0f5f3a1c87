// The static WebUI at / (outside /api, never behind Basic Auth): files from `webui.root`, the index
// for directories, and the index again for unknown paths (single-page apps route on the client).

import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { extname, join, resolve, sep } from "node:path";
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

export class WebUi {
  private readonly root: string;

  constructor(
    root: string,
    private readonly index: string,
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
    if (path === null) return reply.code(404).send(errorBody("not_found", "no such file, and no WebUI index"));
    const isIndex = path.endsWith(sep + this.index);
    void reply
      .type(TYPES[extname(path).toLowerCase()] ?? "application/octet-stream")
      .header("cache-control", isIndex ? "no-cache" : "public, max-age=31536000, immutable");
    return reply.send(req.method === "HEAD" ? "" : createReadStream(path));
  }
}
