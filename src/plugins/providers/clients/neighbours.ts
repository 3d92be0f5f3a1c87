// The kernel's neighbour table (ARP and NDP) on Linux, for the MAC address of a client on the local
// network: `ip -j neigh show`, run with a timeout and a bound on its output. Entries the kernel could
// not resolve (FAILED, INCOMPLETE) and entries without a link-layer address are left out.

import { execFile } from "node:child_process";
import { macOf } from "./args.js";

/** The command that lists the table; a test may put a wrapper of that name first on PATH. */
const IP_COMMAND = "ip";
const TIMEOUT_MS = 5000;
/** A table this large would be a router's for a big network; more is cut off (the read fails). */
const MAX_OUTPUT = 8 * 1024 * 1024;
const UNRESOLVED = new Set(["FAILED", "INCOMPLETE"]);

/** No `ip` tool: the table cannot be read here (not Linux, or iproute2 not installed). */
export class NoNeighbourTool extends Error {}

/** Address → MAC from `ip -j neigh show` output; throws on output that is not the table. */
export function parseNeighbours(json: string): Map<string, string> {
  // Some iproute2 versions print nothing at all for an empty table.
  if (json.trim() === "") return new Map();
  const rows = JSON.parse(json) as unknown;
  if (!Array.isArray(rows)) throw new Error("`ip -j neigh show` did not print a list");
  const table = new Map<string, string>();
  for (const row of rows as unknown[]) {
    if (typeof row !== "object" || row === null) continue;
    const { dst, lladdr, state } = row as { dst?: unknown; lladdr?: unknown; state?: unknown };
    if (typeof dst !== "string" || typeof lladdr !== "string") continue;
    if (Array.isArray(state) && state.some((s) => typeof s === "string" && UNRESOLVED.has(s))) continue;
    const mac = macOf(lladdr);
    // A link-local IPv6 neighbour is written with its zone elsewhere; queries arrive with the bare address.
    if (mac !== null) table.set(dst.split("%")[0], mac);
  }
  return table;
}

/** Reads the table; rejects with NoNeighbourTool when `ip` is missing. */
export function readNeighbourTable(): Promise<Map<string, string>> {
  return new Promise((resolve, reject) => {
    execFile(IP_COMMAND, ["-j", "neigh", "show"], { timeout: TIMEOUT_MS, maxBuffer: MAX_OUTPUT, encoding: "utf8" }, (err, stdout, stderr) => {
      if (err) {
        if ((err as NodeJS.ErrnoException).code === "ENOENT") return reject(new NoNeighbourTool("no `ip` command (iproute2) on PATH"));
        return reject(new Error(`ip -j neigh show: ${stderr.trim() || err.message}`));
      }
      try {
        resolve(parseNeighbours(stdout));
      } catch (e) {
        reject(new Error(`ip -j neigh show: ${(e as Error).message}`));
      }
    });
  });
}
