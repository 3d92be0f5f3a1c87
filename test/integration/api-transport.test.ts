// The management API listener: address forms (shorthand and object, IPv4, IPv6, dual stack), HTTPS,
// mutual TLS, relative certificate paths, and configuration errors for half-configured TLS.
import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { ConfigError } from "../../src/config/diagnostics.js";
import { rawRequest } from "../helpers/http.js";
import { makePki, type Pki } from "../helpers/pki.js";
import { startSluice, tempDir } from "../helpers/sluice.js";
import { startInWorkdir } from "../helpers/workdir.js";

/** Whether a plain HTTP GET /api/healthz on host:port answers "ok", or the connection error code. */
async function healthz(host: string, port: number): Promise<string> {
  try {
    const res = await rawRequest({ host, port, path: "/api/healthz" });
    return `${res.status} ${res.text}`;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? (err as Error).message;
  }
}

describe("listen address forms", () => {
  test("shorthand string `api.http: 127.0.0.1:0` listens on 127.0.0.1 and logs the port", async () => {
    const s = await startSluice(`api: { http: "127.0.0.1:0" }\n`);
    try {
      const addr = s.app.apiServer?.address();
      expect(addr?.address).toBe("127.0.0.1");
      expect(addr?.protocol).toBe("http");
      expect(addr?.port).toBeGreaterThan(0);
      expect(s.apiUrl).toBe(`http://127.0.0.1:${addr?.port}`);
      expect(await healthz("127.0.0.1", addr?.port ?? 0)).toBe("200 ok");
      const line = s.logs.find((l) => l.msg === "management API listening");
      expect(line).toMatchObject({ target: "api", port: addr?.port, protocol: "http" });
    } finally {
      await s.stop();
    }
  });

  test("object form `api.http.listen` works the same", async () => {
    const s = await startSluice(`api:\n  http:\n    listen: "127.0.0.1:0"\n`);
    try {
      expect((await s.api("/api/healthz")).status).toBe(200);
    } finally {
      await s.stop();
    }
  });

  test("[::1]:0 listens on IPv6 loopback only", async () => {
    const s = await startSluice(`api: { http: "[::1]:0" }\n`);
    try {
      const port = s.app.apiServer?.address().port ?? 0;
      expect(s.app.apiServer?.address().address).toBe("::1");
      expect(s.apiUrl).toBe(`http://[::1]:${port}`);
      expect(await healthz("::1", port)).toBe("200 ok");
      expect(await healthz("127.0.0.1", port)).toBe("ECONNREFUSED");
    } finally {
      await s.stop();
    }
  });

  test("[::]:0 is IPv6 only (`:port` is the dual-stack form)", async () => {
    const s = await startSluice(`api: { http: "[::]:0" }\n`);
    try {
      const port = s.app.apiServer?.address().port ?? 0;
      expect(await healthz("::1", port)).toBe("200 ok");
      expect(await healthz("127.0.0.1", port)).toBe("ECONNREFUSED");
    } finally {
      await s.stop();
    }
  });

  test(":0 is dual stack: reachable on 127.0.0.1 and on ::1 at the same port", async () => {
    const s = await startSluice(`api: { http: ":0" }\n`);
    try {
      const port = s.app.apiServer?.address().port ?? 0;
      expect(s.app.apiServer?.address().address).toBe("::");
      expect(await healthz("127.0.0.1", port)).toBe("200 ok");
      expect(await healthz("::1", port)).toBe("200 ok");
    } finally {
      await s.stop();
    }
  });

  test("a bad listen address is a configuration error naming api.http.listen", async () => {
    for (const listen of ["localhost:0", "127.0.0.1", "127.0.0.1:99999", "[::1:0"]) {
      const err = await startInWorkdir(`api: { http: "${listen}" }\n`).then(
        (s) => s.stop().then(() => null),
        (e: unknown) => e,
      );
      expect(err, listen).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).message).toContain("api.http.listen");
      expect((err as ConfigError).diagnostics[0]?.line).toBe(1);
    }
  });
});

describe("HTTPS and mutual TLS", () => {
  let pki: Pki;
  beforeAll(() => {
    pki = makePki(tempDir("sluice-pki-"));
  });
  afterAll(() => rmSync(pki.dir, { recursive: true, force: true }));

  const pem = (): Record<string, Buffer> => ({
    "tls/ca.crt": pki.ca,
    "tls/server.crt": pki.server.cert,
    "tls/server.key": pki.server.key,
  });

  async function outcome(port: number, tls: { ca?: Buffer; cert?: Buffer; key?: Buffer }): Promise<string> {
    try {
      const res = await rawRequest({ port, path: "/api/healthz", tls });
      return `${res.status} ${res.text}`;
    } catch (err) {
      return `rejected: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`;
    }
  }

  test("ssl.cert + ssl.key (relative to the working dir, not the config dir) serve HTTPS that verifies against the CA", async () => {
    const s = await startInWorkdir(
      `api:\n  http:\n    listen: "127.0.0.1:0"\n    ssl: { cert: tls/server.crt, key: tls/server.key }\n`,
      pem(),
    );
    try {
      expect(s.app.apiServer?.address().protocol).toBe("https");
      expect(await outcome(s.port, { ca: pki.ca })).toBe("200 ok");
      // Without the CA the server certificate is not trusted: proof that TLS is really in use.
      expect(await outcome(s.port, {})).toMatch(/^rejected: (UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_GET_ISSUER_CERT_LOCALLY)/);
      // A plain HTTP request to the TLS port gets no HTTP answer.
      expect(await healthz("127.0.0.1", s.port)).not.toBe("200 ok");
      expect(s.logs.find((l) => l.msg === "management API listening")).toMatchObject({ protocol: "https", port: s.port });
    } finally {
      await s.stop();
    }
  });

  test("client_ca + require_client_cert: a client without a certificate, or with one from another CA, is refused at the TLS layer", async () => {
    const s = await startInWorkdir(
      `api:\n  http:\n    listen: "127.0.0.1:0"\n    ssl: { cert: tls/server.crt, key: tls/server.key, client_ca: tls/ca.crt, require_client_cert: true }\n`,
      pem(),
    );
    try {
      expect(await outcome(s.port, { ca: pki.ca })).toMatch(/^rejected: /);
      expect(await outcome(s.port, { ca: pki.ca, ...pki.stranger })).toMatch(/^rejected: /);
      expect(await outcome(s.port, { ca: pki.ca, ...pki.client })).toBe("200 ok");
    } finally {
      await s.stop();
    }
  });

  test("client_ca without require_client_cert: clients with and without a certificate both get through", async () => {
    const s = await startInWorkdir(
      `api:\n  http:\n    listen: "127.0.0.1:0"\n    ssl: { cert: tls/server.crt, key: tls/server.key, client_ca: tls/ca.crt }\n`,
      pem(),
    );
    try {
      expect(await outcome(s.port, { ca: pki.ca })).toBe("200 ok");
      expect(await outcome(s.port, { ca: pki.ca, ...pki.client })).toBe("200 ok");
    } finally {
      await s.stop();
    }
  });

  test("half-configured TLS is a configuration error, never a silent fall-back to plain HTTP", async () => {
    const cases: [string, string][] = [
      ["{ cert: tls/server.crt }", "needs both cert and key"],
      ["{ key: tls/server.key }", "needs both cert and key"],
      ["{ client_ca: tls/ca.crt }", "need ssl.cert and ssl.key"],
      ["{ cert: tls/server.crt, key: tls/server.key, require_client_cert: true }", "require_client_cert needs ssl.client_ca"],
    ];
    for (const [ssl, message] of cases) {
      const err = await startInWorkdir(`api:\n  http:\n    listen: "127.0.0.1:0"\n    ssl: ${ssl}\n`, pem()).then(
        (s) => s.stop().then(() => null),
        (e: unknown) => e,
      );
      expect(err, ssl).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).message, ssl).toContain(message);
      expect((err as ConfigError).diagnostics[0]?.line, ssl).toBe(4);
    }
  });

  test("a missing certificate file stops startup with the field and the resolved path", async () => {
    const err = await startInWorkdir(`api:\n  http:\n    listen: "127.0.0.1:0"\n    ssl: { cert: tls/missing.crt, key: tls/server.key }\n`, pem()).then(
      (s) => s.stop().then(() => null),
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(/api\.http\.ssl\.cert: cannot read \/.*\/tls\/missing\.crt \(ENOENT\)/);
    expect((err as Error).message).not.toContain("/conf/tls/");
  });
});
