// A server plugin as the primary of several processes holds it: the workers listen and answer
// (src/app/workers/), so the primary's instance opens no socket. It stays in the runtime, so the
// API lists it with its plugin actor, readiness counts it, and its address is where the workers
// listen (the real port when the configuration said 0) once one has said.

import { parseListen } from "../config/listen.js";
import type { ServerAddress } from "./process-role.js";
import type { ServerPlugin } from "./types.js";

export function remoteServer(type: string, tag: string, args: unknown, where: (tag: string) => ServerAddress | null): ServerPlugin {
  const listen = typeof args === "object" && args !== null ? (args as { listen?: unknown }).listen : undefined;
  const configured = typeof listen === "string" ? parseListen(listen) : null;
  const fallback: ServerAddress = { protocol: type.replace(/_server$/, ""), address: configured?.host ?? "", port: configured?.port ?? 0 };
  return {
    address: () => where(tag) ?? fallback,
    start: () => Promise.resolve(),
  };
}
