// Certificates of the DoT and DoH servers: PEM files named by `cert` and `key` (resolved against
// the working directory), read when the server is created, so a reload picks up renewed files.

import { readFile } from "node:fs/promises";
import tls from "node:tls";
import { ArgError, type ArgProblem } from "../../registry/types.js";

export interface TlsArgs {
  cert?: string;
  key?: string;
}

export const tlsArgProperties = {
  cert: { type: "string", minLength: 1 },
  key: { type: "string", minLength: 1 },
} as const;

/** `cert` and `key` come together. */
export function checkTlsArgs(args: TlsArgs): ArgProblem[] {
  if ((args.cert === undefined) === (args.key === undefined)) return [];
  const missing = args.cert === undefined ? "cert" : "key";
  return [{ path: [missing], message: `${missing} is needed too: TLS takes a certificate (cert) and its private key (key)` }];
}

async function readPem(path: string, field: "cert" | "key", given: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    throw new ArgError(`cannot read ${field} '${given}': ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, [field]);
  }
}

/** The secure context for `cert`/`key`, or null when the server is not TLS. */
export async function loadSecureContext(args: TlsArgs, resolvePath: (p: string) => string): Promise<tls.SecureContext | null> {
  if (args.cert === undefined || args.key === undefined) return null;
  // Read together; when both fail the certificate's problem is the one told, whichever read ended first.
  const [certRead, keyRead] = await Promise.allSettled([readPem(resolvePath(args.cert), "cert", args.cert), readPem(resolvePath(args.key), "key", args.key)]);
  if (certRead.status === "rejected") throw certRead.reason;
  if (keyRead.status === "rejected") throw keyRead.reason;
  const [cert, key] = [certRead.value, keyRead.value];
  try {
    return tls.createSecureContext({ cert, key, minVersion: "TLSv1.2" });
  } catch (err) {
    throw new ArgError(`cert '${args.cert}' and key '${args.key}' are not a usable PEM certificate and matching key: ${(err as Error).message}`, ["cert"]);
  }
}
