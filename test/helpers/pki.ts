// A throw-away PKI for TLS tests, made with the openssl CLI: a CA, a server certificate for
// IP 127.0.0.1, a client certificate from that CA, and a client certificate from a second CA.

import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { requireTool } from "./tools.js";

export interface Pki {
  dir: string;
  ca: Buffer;
  server: { cert: Buffer; key: Buffer };
  client: { cert: Buffer; key: Buffer };
  /** A client certificate signed by a CA the server does not trust. */
  stranger: { cert: Buffer; key: Buffer };
}

function openssl(dir: string, args: string[]): void {
  execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "ignore", "pipe"] });
}

/** Fails with a clear message when the openssl CLI is missing (npm test installs it). */
export function requireOpenssl(): void {
  requireTool("openssl");
}

const EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];

/** A self-signed CA `<name>.crt`/`<name>.key` in `dir` (a test that needs one CA and its own leaves makes only those). */
export function makeCa(dir: string, name: string): void {
  openssl(dir, ["req", "-x509", ...EC, "-keyout", `${name}.key`, "-out", `${name}.crt`, "-days", "2", "-subj", `/CN=${name}`,
    "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
}

/** A leaf certificate `<name>.crt`/`<name>.key` in `dir`, signed by the CA `<ca>.crt`, with extensions `ext`. */
export function makeLeaf(dir: string, ca: string, name: string, ext: string): void {
  writeFileSync(join(dir, `${name}.ext`), ext);
  openssl(dir, ["req", ...EC, "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=${name}`]);
  openssl(dir, ["x509", "-req", "-in", `${name}.csr`, "-CA", `${ca}.crt`, "-CAkey", `${ca}.key`, "-set_serial", String(Date.now()),
    "-days", "2", "-out", `${name}.crt`, "-extfile", `${name}.ext`]);
}

export function makePki(dir: string): Pki {
  requireOpenssl();
  makeCa(dir, "ca");
  makeCa(dir, "other-ca");
  makeLeaf(dir, "ca", "server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
  makeLeaf(dir, "ca", "client", "extendedKeyUsage=clientAuth\n");
  makeLeaf(dir, "other-ca", "stranger", "extendedKeyUsage=clientAuth\n");
  const read = (f: string): Buffer => readFileSync(join(dir, f));
  return {
    dir,
    ca: read("ca.crt"),
    server: { cert: read("server.crt"), key: read("server.key") },
    client: { cert: read("client.crt"), key: read("client.key") },
    stranger: { cert: read("stranger.crt"), key: read("stranger.key") },
  };
}
