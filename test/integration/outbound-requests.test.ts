// Attack (issue 22, defect 8): server-side request forgery through redirects. A download item (or an
// upgrade asset) that redirects to the management API used to run `GET /api/plugins/<cache>/flush`
// and empty the cache. The shared outbound GET (src/net/http-get.ts) now refuses every hop to this
// process's own API listener, and a redirect to any other local-only address unless it is the very
// address and port the configured URL connected to, judged on the resolved address (a name that
// resolves to loopback counts). Its deadline covers the whole request: a peer trickling one byte at a
// time is cut off at the deadline, not kept alive by each byte. All over real sockets on 127.0.0.1.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { httpGet, HttpError } from "../../src/net/http-get.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { query, rcodeOf } from "../helpers/dns.js";
import { startFileServer, type FileServer } from "../helpers/file-server.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";

let files: FileServer;
let other: FileServer;
let up: Responder;
let s: RunningSluice;

beforeAll(async () => {
  files = await startFileServer();
  other = await startFileServer();
  other.set("x.txt", "full:x.example\n");
  files.set("same.txt", "full:same.example\n");
  up = await startResponder((q) => answerWith(q, ["192.0.2.10"], 300));
  s = await startSluice(`
api:
  http: 127.0.0.1:0
plugins:
  - { tag: c, type: cache, args: { size: 1000 } }
  - tag: dl
    type: download
    args:
      startup_if_missing: false
      timeout: 5s
      downloads:
        - { url: "${files.url}/goto/flush.txt", dir: lists }
        - { url: "${files.url}/goto/other-port.txt", dir: lists }
        - { url: "${files.url}/goto/named.txt", dir: lists }
        - { url: "${files.url}/goto/same.txt", dir: lists }
        - { url: "${other.url}/files/x.txt", dir: lists }
  - tag: main
    type: sequence
    args:
      - exec: $c
      - matches: "!has_resp"
        exec: forward 127.0.0.1:${up.port}
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`);
  // What each redirect item is sent to (the API's address is known only now).
  files.redirect("flush.txt", `${s.apiUrl}/api/plugins/c/flush`);
  files.redirect("other-port.txt", `${other.url}/files/x.txt`);
  files.redirect("named.txt", `http://localhost:${other.port}/files/x.txt`);
  files.redirect("same.txt", `${files.url}/files/same.txt`);
});
afterAll(async () => {
  await s.stop();
  await files.close();
  await other.close();
  await up.close();
});

const entries = async (): Promise<number> => ((await (await s.api("/api/plugins/c/entries?limit=1")).json()) as { total_entries: number }).total_entries;
const download = async (index: number): Promise<{ ok: boolean; failed: number }> =>
  (await (await s.api("/api/plugins/dl/download", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ index }) })).json()) as { ok: boolean; failed: number };
const lastError = async (index: number): Promise<string | null> =>
  ((await (await s.api("/api/plugins/dl/downloads")).json()) as { items: { last_error: string | null }[] }).items[index].last_error;

describe("a download item's redirects", () => {
  test("to the management API's cache flush route: refused, and the cache keeps its entries", async () => {
    const names = Array.from({ length: 20 }, (_, i) => `n${i}.example`);
    for (const n of names) expect(rcodeOf(await query(s.port("udp"), n))).toBe(0);
    const before = await entries();
    const upstreamBefore = up.seen.length;
    expect(before).toBe(20);

    const result = await download(0);
    const error = await lastError(0);
    expect(result).toMatchObject({ failed: 1 });
    expect(files.hits("/goto/flush.txt")).toBe(1);
    expect(error).toMatch(/is this program's own management API; outbound requests never go there/);

    // Asked again: every name still answered from the cache (the upstream sees nothing new).
    for (const n of names) expect(rcodeOf(await query(s.port("udp"), n))).toBe(0);
    const after = await entries();
    expect(after).toBe(20);
    expect(up.seen.length).toBe(upstreamBefore);
    console.log(`SSRF via download redirect to ${s.apiUrl}/api/plugins/c/flush: refused ("${error}"); cache entries before ${before}, after ${after}; upstream queries during re-ask ${up.seen.length - upstreamBefore}`);
  });

  test("to another local service (another loopback port, or a name resolving to loopback): refused; within the configured address: followed", async () => {
    expect(await download(1)).toMatchObject({ failed: 1 });
    expect(await lastError(1)).toMatch(new RegExp(`a redirect to the local address 127\\.0\\.0\\.1:${other.port}, other than the configured URL's, is refused`));
    // `localhost` is looked up: whichever loopback address it gives (127.0.0.1 or ::1), it is refused.
    expect(await download(2)).toMatchObject({ failed: 1 });
    expect(await lastError(2)).toMatch(new RegExp(`a redirect to the local address (127\\.0\\.0\\.1|\\[::1\\]):${other.port}, other than the configured URL's, is refused`));
    expect(other.hits("/files/x.txt")).toBe(0);

    expect(await download(3)).toMatchObject({ failed: 0 });
    expect(files.hits("/files/same.txt")).toBe(1);
    // The operator's own URL on loopback is fetched as configured.
    expect(await download(4)).toMatchObject({ failed: 0 });
    expect(other.hits("/files/x.txt")).toBe(1);
  });
});

describe("the shared GET (the upgrade's and config-from's path)", () => {
  let trickle: http.Server;
  let trickleUrl: string;
  const closedAfter: number[] = [];
  beforeAll(async () => {
    // Headers at once, then one byte every 100 ms of a declared 10 000: 1 000 s if nobody stops it.
    trickle = http.createServer((req, res) => {
      if (req.url === "/to-api") {
        res.writeHead(302, { location: `${s.apiUrl}/api/plugins/c/flush` }).end();
        return;
      }
      const started = performance.now();
      res.writeHead(200, { "content-length": 10_000 });
      const timer = setInterval(() => res.write("x"), 100);
      res.on("close", () => {
        clearInterval(timer);
        closedAfter.push(performance.now() - started);
      });
    });
    await new Promise<void>((r) => trickle.listen(0, "127.0.0.1", r));
    trickleUrl = `http://127.0.0.1:${(trickle.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => trickle.close(() => r())));

  const failureOf = async (p: Promise<unknown>): Promise<HttpError> => {
    const err = await p.then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(HttpError);
    return err as HttpError;
  };

  test("a trickling body is cut off at the deadline, not kept alive by each byte", async () => {
    const started = performance.now();
    let received = 0;
    const err = await failureOf(httpGet(`${trickleUrl}/slow`, { timeoutMs: 800, maxBytes: 1 << 20, settings: { timeout: "test.timeout", maxBytes: "test.max" } }, (c) => (received += c.length)));
    const gaveUpMs = performance.now() - started;
    await new Promise((r) => setTimeout(r, 200));
    console.log(`trickling peer (1 byte / 100 ms): gave up after ${gaveUpMs.toFixed(0)} ms with a deadline of 800 ms, ${received} bytes received, server saw the close after ${closedAfter[0]?.toFixed(0)} ms`);
    expect(err.kind).toBe("deadline");
    expect(err.message).toMatch(/no answer within 800ms \(test\.timeout\)/);
    expect(received).toBeGreaterThan(0);
    expect(gaveUpMs).toBeGreaterThanOrEqual(790);
    expect(gaveUpMs).toBeLessThan(800 + 2500);
    expect(closedAfter[0]).toBeLessThan(800 + 2500);
  });

  test("an upgrade asset URL that redirects to the API, or points at it: refused before any request reaches it", async () => {
    const redirected = await failureOf(httpGet(`${trickleUrl}/to-api`, { timeoutMs: 5000, maxBytes: 1 << 20, token: null, socks5: null }, () => undefined));
    expect(redirected.kind).toBe("refused");
    expect(redirected.message).toMatch(/own management API/);
    const direct = await failureOf(httpGet(`${s.apiUrl}/api/plugins/c/entries`, { timeoutMs: 5000, maxBytes: 1 << 20, token: null, socks5: null }, () => undefined));
    expect(direct.kind).toBe("refused");
    // `localhost` is looked up, and every address it gives is judged: one of them is the listener.
    const named = await failureOf(httpGet(`http://localhost:${new URL(s.apiUrl).port}/api/health`, { timeoutMs: 5000, maxBytes: 1 << 20 }, () => undefined));
    expect(named.kind).toBe("refused");
    expect(await entries()).toBe(20);
  });
});
