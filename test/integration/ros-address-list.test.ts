// ros_address_list against a RouterOS-shaped REST server (test/helpers/routeros.ts; no RouterOS runs
// here) over HTTPS with the test CA, driven by real DNS queries through Sluice from a local upstream:
// what is added (families, TTL clamp, comments, NOERROR A/AAAA only), the ledger sparing calls, batches,
// retries of transient failures, the bounded intake, sync mode, and TLS and credential failures.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { replyTo } from "../../src/dns/message.js";
import { answerIps, query, rcodeOf } from "../helpers/dns.js";
import { makePki, type Pki } from "../helpers/pki.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { startFakeRouter, type FakeRouter } from "../helpers/routeros.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";

let pki: Pki;
let caFile: string;
let upstream: Responder;
/** Answers by name: `<n>.multi.test` gets n addresses 10.0.<i>.1; others per the table. */
const ANSWERS: Record<string, { ips: string[]; ttl: number }> = {
  "a.test": { ips: ["192.0.2.1", "192.0.2.1", "192.0.2.2"], ttl: 30 },
  "long.test": { ips: ["192.0.2.3"], ttl: 86_400 },
  "v6.test": { ips: ["2001:db8::1", "2001:db8:0:0::1"], ttl: 120 },
  "one.test": { ips: ["198.51.100.7"], ttl: 300 },
};

beforeAll(async () => {
  const dir = tempDir();
  pki = makePki(dir);
  caFile = join(dir, "ca.pem");
  writeFileSync(caFile, pki.ca);
  upstream = await startResponder((q) => {
    const name = q.questions[0].name.replace(/\.$/, "");
    if (name === "nx.test") return replyTo(q, 3);
    if (name === "fail.test") return replyTo(q, 2);
    const multi = /^(\d+)\.multi\.test$/.exec(name);
    if (multi) return answerWith(q, Array.from({ length: Number(multi[1]) }, (_, i) => `10.0.${i}.1`), 300);
    const n = /^n(\d+)\.test$/.exec(name);
    if (n) return answerWith(q, [`10.9.${Math.floor(Number(n[1]) / 250)}.${Number(n[1]) % 250}`], 300);
    const a = ANSWERS[name];
    if (!a) return replyTo(q, 3);
    const wantV6 = q.questions[0].type === 28;
    return answerWith(q, a.ips.filter((ip) => ip.includes(":") === wantV6), a.ttl);
  });
});
afterAll(async () => {
  await upstream.close();
});

function yaml(router: FakeRouter, extra: string, opts: { ca?: boolean } = {}): string {
  return `api:
  http: 127.0.0.1:0
plugins:
  - tag: ros
    type: ros_address_list
    args:
      address: "${router.url}"
      username: api-user
      password: secret
${opts.ca === false ? "" : `      ca: "${caFile}"\n`}      address_list4: policy4
      address_list6: policy6
      batch_interval: 5ms
      retry_interval: 5ms
${extra}
  - tag: main
    type: sequence
    args:
      - exec: $ros
      - exec: forward 127.0.0.1:${upstream.port}
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;
}

interface Status {
  state: string;
  recovered: boolean;
  queue: { depth: number; capacity: number; retry: number; dropped: number };
  entries: { dynamic: number; persistent: number; foreign: number };
  batches: number;
  scans: number;
  last_error: string | null;
}
const status = async (s: RunningSluice): Promise<Status> => (await (await s.api("/api/plugins/ros/sync/status")).json()) as Status;
async function metric(s: RunningSluice, name: string): Promise<number> {
  const text = await (await s.api("/api/metrics")).text();
  const line = text.split("\n").find((l) => l.startsWith(`ros_address_list_${name}{`) && l.includes('plugin_tag="ros"'));
  return line ? Number(line.split(" ").pop()) : 0;
}
/** Waits (polling, 10 s at most) until `ok` holds. */
async function until(what: string, ok: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
/** The manager at rest: recovered, idle, nothing waiting. */
async function settled(s: RunningSluice): Promise<Status> {
  let st = await status(s);
  await until(`the manager at rest (${JSON.stringify(st)})`, async () => {
    st = await status(s);
    return st.recovered && st.state === "idle" && st.queue.depth === 0 && st.queue.retry === 0;
  });
  return st;
}

const running: { s: RunningSluice; router: FakeRouter }[] = [];
async function start(extra = "", opts: { ca?: boolean; router?: FakeRouter; clockShift?: { ms: number }; password?: string } = {}): Promise<{ s: RunningSluice; router: FakeRouter }> {
  const router = opts.router ?? (await startFakeRouter({ tls: pki.server }));
  let text = yaml(router, extra, opts);
  if (opts.password !== undefined) text = text.replace("password: secret", `password: ${opts.password}`);
  const s = await startSluice(text, {}, { clockShift: opts.clockShift });
  const r = { s, router };
  running.push(r);
  return r;
}
afterAll(async () => {
  for (const r of running) {
    r.router.release();
    await r.s.stop().catch(() => undefined);
    await r.router.close();
  }
});

describe("ros_address_list", () => {
  test("A and AAAA answers: addresses deduplicated, TTL clamped, owned comments; the answer is unchanged", async () => {
    const { s, router } = await start();
    const a = await query(s.udpPort, "a.test", "A");
    expect(answerIps(a).sort()).toEqual(["192.0.2.1", "192.0.2.1", "192.0.2.2"]);
    await query(s.udpPort, "long.test", "A");
    await query(s.udpPort, "v6.test", "AAAA");
    await until("three IPv4 rows and one IPv6 row", () => router.rows(4).length === 3 && router.rows(6).length === 1);
    const rows = router.rows().map((r) => [r.family, r.list, r.address, r.timeoutSet, r.comment]);
    expect(rows).toEqual(
      expect.arrayContaining([
        [4, "policy4", "192.0.2.1", 60, "sluice;plugin=ros;kind=D;domain=a.test"],
        [4, "policy4", "192.0.2.2", 60, "sluice;plugin=ros;kind=D;domain=a.test"],
        [4, "policy4", "192.0.2.3", 3600, "sluice;plugin=ros;kind=D;domain=long.test"],
        [6, "policy6", "2001:db8::1", 120, "sluice;plugin=ros;kind=D;domain=v6.test"],
      ]),
    );
    // NXDOMAIN, SERVFAIL and answers to other types give nothing.
    expect(rcodeOf(await query(s.udpPort, "nx.test", "A"))).toBe(3);
    expect(rcodeOf(await query(s.udpPort, "fail.test", "A"))).toBe(2);
    await query(s.udpPort, "one.test", "TXT");
    const st = await settled(s);
    expect(router.rows()).toHaveLength(4);
    expect(st.entries).toEqual({ dynamic: 4, persistent: 0, foreign: 0 });
    expect(await metric(s, "observe_total")).toBe(4);
    expect(await metric(s, "added_total")).toBe(4);
    // Every call carried the credentials (the server answers 401 otherwise) and was one of the REST shapes.
    expect(router.calls.every((c) => c.status < 300)).toBe(true);
    expect(new Set(router.calls.map((c) => c.method))).toEqual(new Set(["GET", "PUT"]));
  });

  test("an address seen again costs no call until a quarter of the new TTL is left; then its timeout is extended", async () => {
    const clockShift = { ms: 0 };
    const { s, router } = await start("      fixed_ttl: 100", { clockShift });
    await query(s.udpPort, "one.test");
    await query(s.udpPort, "long.test");
    await until("the rows", () => router.rows().length === 2);
    await settled(s);
    const puts = (): number => router.calls.filter((c) => c.method === "PUT").length;
    const patches = (): string[] => router.calls.filter((c) => c.method === "PATCH").map((c) => JSON.stringify(c.body));
    for (let i = 0; i < 5; i++) await query(s.udpPort, "one.test");
    clockShift.ms = 70_000; // 30 s of 100 left: not yet
    await query(s.udpPort, "one.test");
    await settled(s);
    expect([puts(), patches()]).toEqual([2, []]);
    expect(await metric(s, "observe_total")).toBe(8);
    clockShift.ms = 80_000; // 20 s left, under a quarter
    await query(s.udpPort, "one.test");
    await until("the refresh", () => patches().length === 1);
    expect(patches()).toEqual([JSON.stringify({ timeout: "1m40s" })]);
    expect(router.rows().map((r) => r.timeoutSet)).toEqual([100, 100]);
    await settled(s);
    expect(await metric(s, "refreshed_total")).toBe(1);
    // A row the router let expire is added again.
    router.advance(200_000);
    clockShift.ms = 300_000;
    await query(s.udpPort, "one.test");
    await until("the row again", () => router.rows().length === 1);
    expect(puts()).toBe(3);
    // The batch also forgot the row of long.test, whose timeout ran out meanwhile.
    expect((await settled(s)).entries).toEqual({ dynamic: 1, persistent: 0, foreign: 0 });
  });

  test("observations made while the start-up scan is held go out together, batch_size at a time", async () => {
    const router = await startFakeRouter({ tls: pki.server });
    router.hold();
    const { s } = await start("      batch_size: 20", { router });
    await router.waitHeld(1); // the first list's scan
    for (let i = 0; i < 45; i++) await query(s.udpPort, `n${i}.test`);
    expect((await status(s)).queue.depth).toBe(45);
    router.release();
    const st = await settled(s);
    expect(router.rows(4)).toHaveLength(45);
    expect(st.batches).toBe(3);
    expect(router.calls.filter((c) => c.method === "PUT")).toHaveLength(45);
  });

  test("transient failures are retried with backoff; a refused call or used-up retries give the address up", async () => {
    const { s, router } = await start("      retries: 3");
    await settled(s);
    router.failNext(3, 503, "PUT");
    await query(s.udpPort, "one.test");
    await until("the row after three failures", () => router.rows().length === 1);
    let st = await settled(s);
    expect(st.last_error).toMatch(/PUT .*\/rest\/ip\/firewall\/address-list: 503 Service Unavailable: injected failure/);
    expect(await metric(s, "retry_total")).toBe(3);
    expect(await metric(s, "sync_error_total")).toBe(3);
    // More failures than retries: given up.
    router.failNext(10, 503, "PUT");
    await query(s.udpPort, "long.test");
    await until("given up", async () => (await metric(s, "failed_total")) === 1);
    // A refusal (400) is not retried.
    router.failNext(1, 400, "PUT");
    await query(s.udpPort, "n1.test");
    await until("refused", async () => (await metric(s, "failed_total")) === 2);
    st = await settled(s);
    expect(await metric(s, "retry_total")).toBe(6);
    expect(router.rows().map((r) => r.address)).toEqual(["198.51.100.7"]);
    expect(st.entries.dynamic).toBe(1);
  });

  test("a call the router does not answer within `timeout` counts as a timeout and is retried", async () => {
    const { s, router } = await start("      timeout: 100ms\n      retries: 1");
    await settled(s);
    router.hold();
    await query(s.udpPort, "one.test");
    await until("two timed-out attempts", async () => (await metric(s, "sync_timeout_total")) === 2);
    expect(await metric(s, "retry_total")).toBe(1);
    await until("given up", async () => (await metric(s, "failed_total")) === 1);
    expect((await status(s)).last_error).toMatch(/PUT .*: no answer within 100ms/);
    router.release();
  });

  test("a full intake drops (and counts) addresses without slowing the query", async () => {
    const router = await startFakeRouter({ tls: pki.server });
    router.hold();
    const { s } = await start("      queue_capacity: 3", { router });
    await router.waitHeld(1);
    const started = performance.now();
    const answer = await query(s.udpPort, "10.multi.test");
    expect(answerIps(answer)).toHaveLength(10);
    expect(performance.now() - started).toBeLessThan(1000);
    await query(s.udpPort, "2.multi.test"); // both already waiting: coalesced, not dropped
    expect((await status(s)).queue).toEqual({ depth: 3, capacity: 3, retry: 0, dropped: 7 });
    expect(await metric(s, "dropped_total")).toBe(7);
    expect(await metric(s, "queue_depth")).toBe(3);
    router.release();
    await settled(s);
    expect(router.rows().map((r) => r.address).sort()).toEqual(["10.0.0.1", "10.0.1.1", "10.0.2.1"]);
  });

  test("async: false answers once its addresses are in the list, or at wait_timeout", async () => {
    const { s, router } = await start("      async: false\n      wait_timeout: 200ms");
    await settled(s);
    await query(s.udpPort, "one.test");
    // No waiting for the background: the row is there when the answer is.
    expect(router.rows().map((r) => r.address)).toEqual(["198.51.100.7"]);
    router.hold();
    const answer = await query(s.udpPort, "long.test");
    expect(answerIps(answer)).toEqual(["192.0.2.3"]);
    expect(await metric(s, "wait_timeout_total")).toBe(1);
    router.release();
    await until("the held row", () => router.rows().length === 2);
  });

  test("TLS: a router certificate not from `ca` is refused; insecure_skip_verify accepts it, tls.ca too; a wrong password is reported", async () => {
    const noCa = await start("", { ca: false });
    await until("a TLS failure", async () => /TLS: /.test((await status(noCa.s)).last_error ?? ""));
    expect((await status(noCa.s)).recovered).toBe(false);
    expect(noCa.router.calls).toEqual([]);
    // DNS goes on regardless.
    expect(answerIps(await query(noCa.s.udpPort, "one.test"))).toEqual(["198.51.100.7"]);

    const insecure = await start("      insecure_skip_verify: true", { ca: false });
    await query(insecure.s.udpPort, "one.test");
    await until("the row", () => insecure.router.rows().length === 1);

    // OxiDNS's form of the CA, with its connection timeouts.
    const oxi = await start(`      tls: { ca: "${caFile}" }\n      connect_timeout: 5\n      receive_timeout: 5`, { ca: false });
    await query(oxi.s.udpPort, "one.test");
    await until("the row", () => oxi.router.rows().length === 1);

    const badPassword = await start("", { password: "wrong" });
    await until("a refusal", async () => /refused the username or password/.test((await status(badPassword.s)).last_error ?? ""));
    expect(badPassword.router.calls.every((c) => c.status === 401)).toBe(true);
  });
});
