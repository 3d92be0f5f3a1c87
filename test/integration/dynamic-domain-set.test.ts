// dynamic_domain_set over real sockets: rules added, removed and cleared through its HTTP routes take
// effect on the next DNS query; a request with bad rules names each and changes nothing; the bound
// refuses what does not fit; rules expire by the injected clock; and the rules survive a reload of the
// configuration (POST /api/reload, also with changed args) and a restart in the same directory.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import { query, rcodeOf } from "../helpers/dns.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";
import { until } from "../model/harness.js";

const NXDOMAIN = 3;

function config(setArgs = "path: lists/blocked.txt, max_entries: 5, flush_interval_ms: 20, cleanup_interval_seconds: 0.05"): string {
  return `api:
  http: 127.0.0.1:0
plugins:
  - tag: blocked
    type: dynamic_domain_set
    args: { ${setArgs} }
  - tag: outer
    type: domain_set
    args: { exps: ["full:static.test"], sets: [blocked] }
  - tag: main
    type: sequence
    args:
      - { matches: "qname $blocked", exec: reject NXDOMAIN }
      - { matches: "qname $outer", exec: reject REFUSED }
      - exec: black_hole 192.0.2.1
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;
}

let running: RunningSluice | null = null;
afterEach(async () => {
  await running?.stop();
  running = null;
});

async function start(yaml = config(), opts: { clockShift?: { ms: number }; dir?: string } = {}): Promise<RunningSluice> {
  running = await startSluice(yaml, {}, opts);
  return running;
}

type Json = Record<string, unknown>;
async function call(s: RunningSluice, method: string, path: string, body?: unknown): Promise<{ status: number; json: Json }> {
  const res = await s.api(`/api/plugins/blocked/${path}`, body === undefined ? { method } : { method, headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as Json };
}
const rcode = async (s: RunningSluice, name: string): Promise<number> => rcodeOf(await query(s.udpPort, name));
const listed = async (s: RunningSluice, q = ""): Promise<string[]> => ((await call(s, "GET", `rules${q}`)).json.rules as { rule: string }[]).map((r) => r.rule);
const fileOf = (s: RunningSluice): string => readFileSync(join(s.dir, "lists", "blocked.txt"), "utf8");
const ruleLines = (text: string): string[] => text.split("\n").filter((l) => l !== "" && !l.startsWith("#"));

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** POST /api/reload, then waits until it has succeeded and the previous generation's actors are gone (its set has stopped). */
async function reloadDone(s: RunningSluice): Promise<void> {
  const since = Date.now();
  const before = ((await (await s.api("/api/control")).json()) as { generation: number }).generation;
  expect((await s.api("/api/reload", { method: "POST" })).status).toBe(202);
  for (let i = 0; i < 500; i++) {
    const r = (await (await s.api("/api/reload/status")).json()) as { status: string; last_success_ms: number | null };
    if (r.status === "ok" && (r.last_success_ms ?? 0) >= since) break;
    await sleep(20);
  }
  for (let i = 0; i < 500; i++) {
    const actors = ((await (await s.api("/api/actors")).json()) as { actors: { id: string }[] }).actors;
    if (!actors.some((a) => a.id.startsWith(`runtime:${before}/`))) return;
    await sleep(20);
  }
  throw new Error("the reload did not finish");
}

describe("dynamic_domain_set routes", () => {
  test("add, remove and clear take effect on the next query, and the file follows", async () => {
    const s = await start();
    expect(await rcode(s, "ads.example")).toBe(0);
    // The file is created at start, empty of rules.
    expect(ruleLines(fileOf(s))).toEqual([]);

    const added = await call(s, "POST", "rules", { rules: ["ads.example", "full:one.test", { rule: "keyword:tracker", ttl: "1h" }] });
    expect(added).toEqual({ status: 200, json: { ok: true, added: 3, updated: 0, total: 3 } });
    expect(await rcode(s, "ads.example")).toBe(NXDOMAIN);
    expect(await rcode(s, "sub.ads.example")).toBe(NXDOMAIN); // bare = domain:
    expect(await rcode(s, "one.test")).toBe(NXDOMAIN);
    expect(await rcode(s, "sub.one.test")).toBe(0); // full: is exact
    expect(await rcode(s, "eu.tracker-cdn.test")).toBe(NXDOMAIN);
    // Another domain_set that includes it sees the same rules at once.
    expect(await rcode(s, "static.test")).toBe(5);

    const page = (await call(s, "GET", "rules")).json;
    expect(page).toMatchObject({ ok: true, next_cursor: null, total: 3 });
    const rules = page.rules as Json[];
    expect(rules.map((r) => [r.rule, r.source, r.expires_at_ms === null])).toEqual([
      ["domain:ads.example", "api", true],
      ["full:one.test", "api", true],
      ["keyword:tracker", "api", false],
    ]);
    expect(rules[2].ttl_left_ms).toBeGreaterThan(3_590_000);
    expect(rules[2].ttl_left_ms).toBeLessThanOrEqual(3_600_000);

    // Written within flush_interval_ms (20 ms here).
    await until("the file holds the rules", () => ruleLines(fileOf(s)).length === 3 || undefined);
    expect(ruleLines(fileOf(s))).toEqual(["domain:ads.example", "full:one.test", "keyword:tracker"]);

    expect(await call(s, "DELETE", "rules", { rules: ["ads.example", "full:nope.test"] })).toEqual({
      status: 200,
      json: { ok: true, removed: 1, missing: ["full:nope.test"], total: 2 },
    });
    expect(await rcode(s, "ads.example")).toBe(0);
    expect(await call(s, "DELETE", "rules", { rule: "keyword:tracker" })).toMatchObject({ status: 200, json: { removed: 1 } });
    expect(await call(s, "POST", "rules", { rule: "full:two.test", ttl: 60 })).toMatchObject({ status: 200, json: { added: 1 } });
    expect(await call(s, "DELETE", "rules", { rules: "full:two.test" })).toMatchObject({ status: 200, json: { removed: 1 } });
    expect(await rcode(s, "eu.tracker-cdn.test")).toBe(0);

    expect(await call(s, "POST", "rules/clear")).toEqual({ status: 200, json: { ok: true, removed: 1, total: 0 } });
    expect(await rcode(s, "one.test")).toBe(0);
    await until("the file is empty", () => ruleLines(fileOf(s)).length === 0 || undefined);
    // Clearing is POST only: a GET names the method to use.
    expect((await call(s, "GET", "rules/clear")).status).toBe(405);
  });

  test("a request with bad rules names each one and changes nothing", async () => {
    const s = await start();
    const bad = await call(s, "POST", "rules", { rules: ["good.test", "bad name.test", "regexp:(", { rule: "fine.test", ttl: "soon" }, "unknown:x.test"] });
    expect(bad.status).toBe(400);
    expect(bad.json.code).toBe("invalid_rules");
    expect(bad.json.message).toMatch(/^4 of 5 rules are invalid; nothing was changed: rules\[1\]: .*bad name\.test.*; rules\[2\]: .*regexp.*; rules\[3\]: ttl: .*soon.*; rules\[4\]: .*unknown/);
    expect((bad.json.errors as Json[]).map((e) => [e.index, e.rule])).toEqual([
      [1, "bad name.test"],
      [2, "regexp:("],
      [3, "fine.test"],
      [4, "unknown:x.test"],
    ]);
    expect(await listed(s)).toEqual([]);
    expect(await rcode(s, "good.test")).toBe(0);
    // A bad request-wide ttl, a comma, a control character: refused the same way.
    expect((await call(s, "POST", "rules", { rules: ["good.test"], ttl: "-1" })).json.code).toBe("invalid_rules");
    expect((await call(s, "POST", "rules", { rules: ["a.test,b.test"] })).json.message).toMatch(/comma/);
    expect((await call(s, "POST", "rules", { rules: ["regexp:a\nb"] })).json.message).toMatch(/control character/);
    expect((await call(s, "DELETE", "rules", { rules: ["ok.test", "no way"] })).json).toMatchObject({ code: "invalid_rules", errors: [{ index: 1, rule: "no way" }] });
    // The body's shape is checked before the rules: `rules` or `rule`, not both.
    expect((await call(s, "POST", "rules", { rules: ["x.test"], rule: "y.test" })).json.code).toBe("invalid_request");
    expect((await call(s, "POST", "rules", { ttl: "1h" })).json.code).toBe("invalid_request");
    expect((await call(s, "GET", "rules?limit=501")).json.code).toBe("invalid_query");
    expect((await call(s, "GET", "rules?cursor=abc")).json.code).toBe("invalid_query");
    expect(await listed(s)).toEqual([]);
  });

  test("max_entries: an add that does not fit is refused whole (507); rules already there take no room", async () => {
    const s = await start();
    expect((await call(s, "POST", "rules", { rules: ["a.test", "b.test", "c.test", "d.test"] })).status).toBe(200);
    const full = await call(s, "POST", "rules", { rules: ["e.test", "f.test"] });
    expect(full).toMatchObject({ status: 507, json: { ok: false, code: "dynamic_set_full" } });
    expect(await rcode(s, "e.test")).toBe(0);
    expect(await listed(s)).toEqual(["domain:a.test", "domain:b.test", "domain:c.test", "domain:d.test"]);
    expect((await call(s, "POST", "rules", { rules: ["e.test", "a.test"], ttl: 60 })).json).toEqual({ ok: true, added: 1, updated: 1, total: 5 });
    expect((await call(s, "POST", "rules", { rules: ["a.test", "b.test"] })).status).toBe(200);
    expect((await call(s, "GET", "rules/status")).json).toMatchObject({ rules: 5, max_entries: 5, by_source: { api: 5, learned: 0, bootstrap: 0, file: 0 } });
  });

  test("paging with the cursor, filtering with q, and rule_kind for bare names", async () => {
    const s = await start(config("path: lists/blocked.txt, flush_interval_ms: 20"));
    const names = Array.from({ length: 7 }, (_, i) => `n${i}.page.test`);
    expect((await call(s, "POST", "rules", { rules: names, rule_kind: "full" })).json).toMatchObject({ added: 7 });
    const seen: string[] = [];
    let cursor: string | null = "";
    while (cursor !== null) {
      const page = (await call(s, "GET", `rules?limit=3${cursor ? `&cursor=${cursor}` : ""}`)).json;
      expect(page.total).toBe(7);
      seen.push(...(page.rules as { rule: string }[]).map((r) => r.rule));
      cursor = page.next_cursor as string | null;
    }
    expect(seen).toEqual(names.map((n) => `full:${n}`));
    expect(await listed(s, "?q=N3.PAGE")).toEqual(["full:n3.page.test"]);
    expect((await call(s, "DELETE", "rules", { rules: ["n3.page.test"], rule_kind: "full" })).json).toMatchObject({ removed: 1 });
  });

  test("rules expire by the set's clock: absent to queries and listings at once, then swept from the file", async () => {
    const clockShift = { ms: 0 };
    const s = await start(config(), { clockShift });
    await call(s, "POST", "rules", { rules: [{ rule: "short.test", ttl: "10m" }, { rule: "regexp:^ads[0-9]+\\.", ttl: "10m" }, "long.test"] });
    expect(await rcode(s, "short.test")).toBe(NXDOMAIN);
    expect(await rcode(s, "ads12.x.test")).toBe(NXDOMAIN);
    await until("written", () => ruleLines(fileOf(s)).length === 3 || undefined);
    clockShift.ms = 11 * 60_000;
    expect(await rcode(s, "short.test")).toBe(0);
    expect(await rcode(s, "ads12.x.test")).toBe(0);
    expect(await rcode(s, "long.test")).toBe(NXDOMAIN);
    expect(await listed(s)).toEqual(["domain:long.test"]);
    // The sweep (every 50 ms here) removes them, and the next write leaves them out of the file.
    let status: Json = {};
    for (let i = 0; i < 200 && !(status.expired === 2 && status.unsaved_changes === false); i++) {
      await new Promise((r) => setTimeout(r, 10));
      status = (await call(s, "GET", "rules/status")).json;
    }
    expect(status).toMatchObject({ rules: 1, expired: 2, unsaved_changes: false, last_write_error: null });
    expect(ruleLines(fileOf(s))).toEqual(["domain:long.test"]);
  });

  test("the rules survive a reload (also with changed args) and a restart in the same directory", async () => {
    // Written only every hour: what the reload hands over is the live rules, not the file.
    let s = await start(config("path: lists/blocked.txt, flush_interval_ms: 3600000"));
    await call(s, "POST", "rules", { rules: ["kept.test", { rule: "temp.test", ttl: "1h" }] });
    expect(ruleLines(fileOf(s))).toEqual([]);
    await reloadDone(s);
    expect(s.logs.some((l) => l.msg === "dynamic_domain_set carries on with the live rules")).toBe(true);
    expect(await rcode(s, "kept.test")).toBe(NXDOMAIN);
    expect(await listed(s)).toEqual(["domain:kept.test", "domain:temp.test"]);
    // The old generation's set wrote the file when it stopped.
    expect(ruleLines(fileOf(s))).toEqual(["domain:kept.test", "domain:temp.test"]);

    // A reload whose args differ: the new generation still starts from the live rules.
    writeFileSync(join(s.dir, "sluice.yaml"), config("path: lists/blocked.txt, max_entries: 50, flush_interval_ms: 20"));
    await reloadDone(s);
    expect((await call(s, "GET", "rules/status")).json).toMatchObject({ rules: 2, max_entries: 50 });

    // A stop writes the file; the next start in the same directory reads it, expiry included.
    const dir = s.dir;
    const before = (await call(s, "GET", "rules")).json.rules as Json[];
    await s.app.stop();
    running = null;
    s = await start(config(), { dir });
    expect(await rcode(s, "kept.test")).toBe(NXDOMAIN);
    expect(await rcode(s, "temp.test")).toBe(NXDOMAIN);
    const after = (await call(s, "GET", "rules")).json.rules as Json[];
    expect(after.map((r) => [r.rule, r.expires_at_ms, r.added_at_ms, r.source])).toEqual(before.map((r) => [r.rule, r.expires_at_ms, r.added_at_ms, r.source]));
  });

  test("a file edited by hand is read by a configuration reload and by POST reload; a bad line keeps the rules and says where", async () => {
    const s = await start();
    await call(s, "POST", "rules", { rules: ["api.test"] });
    await until("written", () => ruleLines(fileOf(s)).length === 1 || undefined);
    writeFileSync(join(s.dir, "lists", "blocked.txt"), `${fileOf(s)}# by hand\nhand.test, full:two.test\n`);
    await reloadDone(s);
    expect(await listed(s)).toEqual(["domain:api.test", "domain:hand.test", "full:two.test"]);
    const page = (await call(s, "GET", "rules")).json.rules as Json[];
    expect(page.map((r) => r.source)).toEqual(["api", "file", "file"]);
    expect(await rcode(s, "hand.test")).toBe(NXDOMAIN);
    writeFileSync(join(s.dir, "lists", "blocked.txt"), `${fileOf(s)}full:three.test\n`);
    expect((await s.api("/api/plugins/blocked/reload", { method: "POST" })).status).toBe(200);
    expect(await rcode(s, "three.test")).toBe(NXDOMAIN);

    writeFileSync(join(s.dir, "lists", "blocked.txt"), "ok.test\nbad:rule.test\n");
    const failed = await s.api("/api/plugins/blocked/reload", { method: "POST" });
    expect(failed.status).toBe(400);
    expect((await failed.json()) as Json).toMatchObject({ code: "provider_reload_failed", message: expect.stringMatching(/lists\/blocked\.txt:2: rule 'bad:rule\.test' has an unknown kind/) as unknown });
    expect(await rcode(s, "hand.test")).toBe(NXDOMAIN);
    expect((await (await s.api("/api/plugins/blocked/reload/status")).json()) as Json).toMatchObject({ provider: "blocked", status: "idle", reloads: 1, failures: 1 });
  });

  test("bootstrap_rules fill a set whose file does not exist yet, and only then", async () => {
    let s = await start(config('path: lists/blocked.txt, bootstrap_rules: ["boot.test", "full:x.boot.test"]'));
    expect(await listed(s)).toEqual(["domain:boot.test", "full:x.boot.test"]);
    expect(ruleLines(fileOf(s))).toEqual(["domain:boot.test", "full:x.boot.test"]);
    await call(s, "DELETE", "rules", { rules: ["boot.test"] });
    const dir = s.dir;
    await s.app.stop();
    running = null;
    s = await start(config('path: lists/blocked.txt, bootstrap_rules: ["boot.test", "full:x.boot.test"]'), { dir });
    expect(await listed(s)).toEqual(["full:x.boot.test"]);
  });
});
