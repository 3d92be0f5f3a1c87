// examples/cluster run as printed (cluster.sh with ports chosen here): redis-server, PostgreSQL, three
// Sluice instances (A primary, B and C following it) and dnsdist with PROXY protocol and chashed,
// all on 127.0.0.1, in front of a counting upstream started by the test. Checked: queries through
// dnsdist are answered (with the real client passed on); a name cached by A is served from Redis by
// B (the upstream sees one query); a matcher switched on A changes answers on B and C within a
// second; a configuration saved on the primary reaches the replicas and a broken one does not; the
// query log read from any instance shows the queries of all three (asked directly and through
// dnsdist), and stopping PostgreSQL keeps every query answered while the log answers 503, then
// catches up when it returns; killing Redis keeps every query answered and the instances recover
// when it returns; killing one instance leaves dnsdist serving from the others. Everything is torn
// down by PID.
import { execFile, execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { answerIps, query, rcodeOf } from "../helpers/dns.js";
import { metricValue } from "../helpers/proc.js";
import { freePort } from "../helpers/ports.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { tempDir } from "../helpers/sluice.js";
import { requireTool } from "../helpers/tools.js";

const run = promisify(execFile);
const SCRIPT = join(import.meta.dirname, "..", "..", "examples", "cluster", "cluster.sh");
const PASSWORD = "example-test-pw";
const AUTH = { Authorization: `Basic ${Buffer.from(`admin:${PASSWORD}`).toString("base64")}` };

// The example's script drives these; a missing one fails the file (npm test installs them).
for (const tool of ["redis-server", "redis-cli", "dnsdist", "dig", "curl", "initdb"]) requireTool(tool);

const dir = tempDir("sluice-cluster-");
const env: Record<string, string> = {};
let up: Responder;
let ports: Record<string, number>;

const members = ["a", "b", "c"] as const;
type Member = (typeof members)[number];
const dnsPort = (m: Member): number => ports[`SLUICE_${m.toUpperCase()}_DNS_PORT`];
const api = (m: Member, path: string, init: RequestInit = {}): Promise<Response> =>
  fetch(`http://127.0.0.1:${ports[`SLUICE_${m.toUpperCase()}_API_PORT`]}${path}`, { ...init, headers: { ...AUTH, ...(init.headers ?? {}) } });
const dnsdist = (): number => ports.DNSDIST_PORT;
const script = (...args: string[]): Promise<{ stdout: string; stderr: string }> => run("bash", [SCRIPT, ...args], { env: { ...process.env, ...env }, timeout: 120_000 });
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const upstreamSaw = (name: string): number => up.seen.filter((s) => s.query.questions[0]?.name.toLowerCase() === name).length;
const metric = async (m: Member, name: string, labels = ""): Promise<number> => metricValue(await (await api(m, "/api/metrics")).text(), name, labels) || 0;
const health = async (m: Member): Promise<Record<string, string>> => ((await (await api(m, "/api/health")).json()) as { checks: Record<string, string> }).checks;

async function until(what: string, fn: () => Promise<boolean>, ms: number): Promise<number> {
  const started = Date.now();
  while (!(await fn().catch(() => false))) {
    if (Date.now() - started > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(25);
  }
  return Date.now() - started;
}

/**
 * Whether a process still runs. A zombie has exited: the script's processes outlive it, so PID 1
 * collects them, which some container inits do only every second or two.
 */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

/** Asks every name through dnsdist; the ones that got no answer or a wrong one. */
async function unanswered(names: string[]): Promise<string[]> {
  const bad: string[] = [];
  for (const name of names) {
    try {
      const m = await query(dnsdist(), name, "A", { timeoutMs: 2000 });
      if (answerIps(m)[0] !== "192.0.2.1") bad.push(`${name}: rcode ${rcodeOf(m)}`);
    } catch {
      bad.push(`${name}: no answer`);
    }
  }
  return bad;
}

/** The query log as instance `m` reads it (names containing `qname`), once it holds at least `n` records. */
async function qlog(m: Member, n: number, qname = "qlog-"): Promise<{ name: string; instance: string }[]> {
  let records: { name: string; instance: string }[] = [];
  await until(
    `${n} records in the query log of ${m}`,
    async () => {
      const res = await api(m, `/api/plugins/recorder/records?limit=500&qname=${qname}`);
      if (res.status !== 200) return false;
      const page = (await res.json()) as { records: { instance: string; questions_json: { name: string }[] }[] };
      records = page.records.map((r) => ({ name: r.questions_json[0]?.name ?? "", instance: r.instance }));
      return records.length >= n;
    },
    20_000,
  );
  return records;
}

async function saveOnPrimary(content: string, validate: boolean): Promise<Response> {
  const current = (await (await api("a", "/api/config")).json()) as { version: string };
  return api("a", "/api/config", {
    method: "PUT",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ content, base_version: current.version, validate, reload: validate }),
  });
}

describe("examples/cluster", () => {
  beforeAll(async () => {
    up = await startResponder((q) => answerWith(q, ["192.0.2.1"], 300));
    ports = {};
    for (const key of ["DNSDIST_PORT", "REDIS_PORT", "PG_PORT", ...members.flatMap((m) => [`SLUICE_${m.toUpperCase()}_DNS_PORT`, `SLUICE_${m.toUpperCase()}_API_PORT`])]) {
      let p = await freePort();
      while (Object.values(ports).includes(p)) p = await freePort();
      ports[key] = p;
    }
    Object.assign(env, Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)])), {
      CLUSTER_DIR: dir,
      SLUICE_API_PASSWORD: PASSWORD,
      SLUICE_UPSTREAM: `127.0.0.1:${up.port}`,
    });
    await script("start");
  }, 150_000);

  afterAll(async () => {
    const pids = ["redis", "postgres", "a", "b", "c", "dnsdist"].map((p) => {
      try {
        return Number(readFileSync(join(dir, "pids", `${p}.pid`), "utf8"));
      } catch {
        return 0;
      }
    });
    await script("stop");
    // Every process it started has exited.
    for (const pid of pids.filter((p) => p > 0)) expect(running(pid), `process ${pid}`).toBe(false);
    await up.close();
  }, 60_000);

  test("queries through dnsdist are answered, spread about evenly, and each instance is told the real client (PROXY protocol)", async () => {
    const accepted = async (m: Member): Promise<number> => metric(m, "server_proxy_header_total", 'protocol="udp",result="accepted"');
    const before = await Promise.all(members.map(accepted));
    const names = Array.from({ length: 300 }, (_, i) => `through${i}.example`);
    expect(await unanswered(names)).toEqual([]);
    expect(answerIps(await query(dnsdist(), "tcp-through.example", "A", { tcp: true }))).toEqual(["192.0.2.1"]);
    // chashed with weight 1000 per server spreads names about evenly; each instance took its clients from dnsdist's headers.
    const spread = (await Promise.all(members.map(accepted))).map((n, i) => n - (before[i] ?? 0));
    console.log(`cluster spread of 300 names over a/b/c: ${spread.join(" / ")}`);
    expect(spread.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(300);
    // An even split is 100 each; the default weight of 1 gave 77 / 8 / 5 of 90 (a share of 6 %).
    for (const [i, n] of spread.entries()) expect(n, members[i]).toBeGreaterThanOrEqual(60);
  });

  test("a name cached by A is served from Redis by B: the upstream sees one query", async () => {
    expect(answerIps(await query(dnsPort("a"), "shared.example"))).toEqual(["192.0.2.1"]);
    expect(upstreamSaw("shared.example")).toBe(1);
    await until("the entry in redis", async () => execFileSync("redis-cli", ["-p", String(ports.REDIS_PORT), "EXISTS", "sluice:cache:1|1|0||shared.example"], { encoding: "utf8" }).trim() === "1", 3000);
    expect(answerIps(await query(dnsPort("b"), "shared.example"))).toEqual(["192.0.2.1"]);
    expect(answerIps(await query(dnsPort("c"), "shared.example"))).toEqual(["192.0.2.1"]);
    expect(upstreamSaw("shared.example")).toBe(1);
    expect(await metric("b", "cache_redis_read_total", 'result="hit"')).toBeGreaterThanOrEqual(1);
  });

  test("a matcher switched on A changes answers on B and C within a second", async () => {
    expect(rcodeOf(await query(dnsPort("b"), "shared.example"))).toBe(0);
    const res = await api("a", "/api/plugins/blocked/mode", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ mode: "always_true", duration: "5m" }) });
    expect(res.status).toBe(200);
    for (const m of ["b", "c"] as const) {
      const took = await until(`the mode on ${m}`, async () => rcodeOf(await query(dnsPort(m), "shared.example")) === 3, 1000);
      expect(took).toBeLessThan(1000);
    }
    await api("b", "/api/plugins/blocked/mode", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ mode: "normal" }) });
    for (const m of members) await until(`normal on ${m}`, async () => rcodeOf(await query(dnsPort(m), "shared.example")) === 0, 1000);
  });

  test("a configuration saved on the primary reaches the replicas; a broken one does not", async () => {
    const original = readFileSync(join(dir, "a", "sluice.yaml"), "utf8");
    const changed = original.replace(`args: ["domain:ads.example"]`, `args: ["domain:ads.example", "domain:more.example"]`);
    expect(changed).not.toBe(original);
    expect((await saveOnPrimary(changed, true)).status).toBe(200);
    for (const m of ["b", "c"] as const) await until(`the new configuration on ${m}`, async () => rcodeOf(await query(dnsPort(m), "x.more.example")) === 3, 10_000);
    expect(readFileSync(join(dir, "b", "sluice.yaml"), "utf8")).toBe(changed);

    const broken = changed.replace("type: qname", "type: no_such_matcher");
    expect((await saveOnPrimary(broken, false)).status).toBe(200);
    for (const m of ["b", "c"] as const) {
      await until(`the refusal on ${m}`, async () => {
        const s = (await (await api(m, "/api/reload/status")).json()) as { status: string; last_error: string | null };
        return s.status === "failed" && /no_such_matcher/.test(s.last_error ?? "");
      }, 10_000);
      expect(readFileSync(join(dir, m, "sluice.yaml"), "utf8")).toBe(changed);
      expect(rcodeOf(await query(dnsPort(m), "x.more.example"))).toBe(3);
    }
    // The primary's own file is put right again, and the replicas follow.
    expect((await saveOnPrimary(original, true)).status).toBe(200);
    for (const m of ["b", "c"] as const) await until(`the original on ${m}`, async () => rcodeOf(await query(dnsPort(m), "x.more.example")) === 0, 10_000);
  });

  test("the query log read from any instance shows the queries of all three", async () => {
    const direct = members.map((m) => `qlog-${m}.example`);
    for (const [i, m] of members.entries()) expect(answerIps(await query(dnsPort(m), direct[i]))).toEqual(["192.0.2.1"]);
    const balanced = Array.from({ length: 30 }, (_, i) => `qlog-via${i}.example`);
    expect(await unanswered(balanced)).toEqual([]);
    for (const m of members) {
      const records = await qlog(m, direct.length + balanced.length);
      expect(new Set(records.map((r) => r.instance)), m).toEqual(new Set(members));
      expect(records.map((r) => r.name).sort(), m).toEqual([...direct, ...balanced].map((n) => `${n}.`).sort());
      // Each query asked directly is recorded by the instance that answered it.
      for (const [i, name] of direct.entries()) expect(records.find((r) => r.name === `${name}.`)?.instance).toBe(members[i]);
    }
  });

  test("stopping PostgreSQL keeps every query answered; the query log answers 503, then catches up", async () => {
    await script("stop-one", "postgres");
    const names = Array.from({ length: 20 }, (_, i) => `qlog-nopg${i}.example`);
    expect(await unanswered(names)).toEqual([]);
    await until("503 from the query log", async () => (await api("b", "/api/plugins/recorder/records")).status === 503, 10_000);
    await script("start-one", "postgres");
    // Recorded while it was down (the queue holds them), written once it is back.
    const records = await qlog("c", names.length, "qlog-nopg");
    expect(records.map((r) => r.name).sort()).toEqual(names.map((n) => `${n}.`).sort());
  });

  test("killing Redis keeps every query answered; the instances recover when it returns", async () => {
    await script("stop-one", "redis");
    for (const m of members) await until(`redis down on ${m}`, async () => (await health(m)).redis === "down", 5000);
    const names = Array.from({ length: 30 }, (_, i) => `noredis${i}.example`);
    expect(await unanswered(names)).toEqual([]);
    // Names asked before are still answered from each instance's own cache.
    expect(await unanswered(["shared.example"])).toEqual([]);
    await script("start-one", "redis");
    for (const m of members) await until(`redis back on ${m}`, async () => (await health(m)).redis === "ok", 15_000);
    await query(dnsPort("a"), "afterredis.example");
    await until("writes to redis again", async () => execFileSync("redis-cli", ["-p", String(ports.REDIS_PORT), "EXISTS", "sluice:cache:1|1|0||afterredis.example"], { encoding: "utf8" }).trim() === "1", 3000);
  });

  test("killing one instance leaves dnsdist serving from the others", async () => {
    await script("stop-one", "c");
    // dnsdist marks it down after two failed health checks a second apart; then nothing is lost.
    await until("dnsdist serving every name from A and B", async () => (await unanswered(Array.from({ length: 20 }, (_, i) => `probe${Date.now()}-${i}.example`))).length === 0, 15_000);
    const names = Array.from({ length: 50 }, (_, i) => `withoutc${i}.example`);
    expect(await unanswered(names)).toEqual([]);
  });
});
