// GET /api/backup: the archive `sluice backup` writes (src/backup/), built from the running
// generation's configuration and streamed as an attachment. The copies, the SQLite online backups,
// the hashing and the gzip all run asynchronously (libuv's threads, SQLite a batch of pages at a
// time): DNS keeps being answered while it is built. Admin only: it holds the tokens and sessions.

import { createReadStream } from "node:fs";
import type { FastifyInstance } from "fastify";
import { buildBackup } from "../../backup/create.js";
import { backupPlan } from "../../backup/plan.js";
import { loadConfigFile, type SluiceConfig } from "../../config/load.js";
import { analyzeConfig, type Analysis } from "../../registry/analyze.js";
import { ApiError, errorSchema } from "../errors.js";
import type { ApiHost } from "../host.js";
import type { RouteContext } from "../server.js";

const backupQuery = {
  type: "object",
  properties: { queries: { type: "string", enum: ["true", "false"], description: "true: add the query recorders' SQLite databases (they can be large)" } },
} as const;

const stamp = (d: Date): string => d.toISOString().replace(/[-:]/g, "").replace(/\.\d+Z$/, "Z").replace("T", "-");

function withQueries(query: unknown): boolean {
  const q = (query ?? {}) as Record<string, unknown>;
  for (const key of Object.keys(q)) if (key !== "queries") throw new ApiError("invalid_query", `querystring.${key} is not a parameter of this route (queries is)`);
  if (q.queries === undefined) return false;
  if (q.queries !== "true" && q.queries !== "false") throw new ApiError("invalid_query", "querystring.queries must be true or false");
  return q.queries === "true";
}

function configOnDisk(host: ApiHost): { config: SluiceConfig; analysis: Analysis } {
  const config = loadConfigFile(host.configPath(), { env: host.env });
  return { config, analysis: analyzeConfig(config, host.catalog) };
}

export function registerBackupRoutes(api: FastifyInstance, { host }: RouteContext): void {
  api.get(
    "/api/backup",
    {
      attachValidation: true,
      config: { audit: (req) => `download a backup${(req.query as Record<string, unknown>).queries === "true" ? " with the query databases" : ""}` },
      schema: {
        role: "admin",
        summary: "A backup archive (.tar.gz) of the configuration and every data file it names, as `sluice backup` writes it",
        tags: ["config"],
        querystring: backupQuery,
        response: { 200: { type: "string", description: "application/gzip: a tar archive with sluice-backup/manifest.json" }, 400: errorSchema, 500: errorSchema },
      },
    },
    async (req, reply) => {
      const queries = withQueries(req.query);
      const now = new Date(host.now());
      let built;
      try {
        // The running generation's configuration; between generations (starting, stopping) the file on disk, read as a reload reads it.
        const running = host.liveRuntime() ?? configOnDisk(host);
        built = await buildBackup(backupPlan(running.config, running.analysis, host.baseDir, { queries }), { withQueries: queries, now });
      } catch (err) {
        throw new ApiError("backup_failed", `the backup could not be built: ${(err as Error).message}`);
      }
      const stream = createReadStream(built.archive);
      stream.on("close", () => void built.cleanup());
      return reply
        .type("application/gzip")
        .header("content-disposition", `attachment; filename="sluice-backup-${stamp(now)}.tar.gz"`)
        .header("cache-control", "no-store")
        .send(stream);
    },
  );
}
