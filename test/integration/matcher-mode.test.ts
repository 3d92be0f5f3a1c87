// Matcher runtime mode through the API (GET status, POST mode): normal / always_false / always_true,
// applied before each reference's own negation, switched while the service runs (no reload), timed
// modes that return to normal by themselves, and a reload that resets every mode.
import { afterAll, beforeAll, expect, test } from "vitest";
import { query, rcodeOf } from "../helpers/dns.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

let s: RunningSluice;
beforeAll(async () => {
  s = await startSluice(`
api:
  http: 127.0.0.1:0
plugins:
  - tag: blocked
    type: qname
    args: ["domain:ads.test"]
  - tag: main
    type: sequence
    args:
      - { matches: "qtype A", exec: jump positive }
      - { matches: "qtype AAAA", exec: jump negative }
  - tag: positive
    type: sequence
    args:
      - { matches: $blocked, exec: reject NXDOMAIN }
      - exec: reject REFUSED
  - tag: negative
    type: sequence
    args:
      - { matches: "!$blocked", exec: reject SERVFAIL }
      - exec: reject NOTIMP
${serversYaml()}
`);
});
afterAll(() => s.stop());

/** rcodes for [ads.test A, other.test A, ads.test AAAA, other.test AAAA]. */
async function branches(): Promise<number[]> {
  const out: number[] = [];
  for (const [name, type] of [["ads.test", "A"], ["other.test", "A"], ["ads.test", "AAAA"], ["other.test", "AAAA"]]) {
    out.push(rcodeOf(await query(s.udpPort, name, type)));
  }
  return out;
}

async function setMode(body: unknown, raw = false): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await s.api("/api/plugins/blocked/mode", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: raw ? (body as string) : JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

async function status(): Promise<Record<string, unknown>> {
  return (await (await s.api("/api/plugins/blocked/status")).json()) as Record<string, unknown>;
}

test("$tag and !$tag change branch on the wire as the mode flips, without a reload", async () => {
  const generation = s.app.generation;
  expect(await status()).toEqual({ ok: true, matcher: "blocked", mode: "normal", until_ms: null });
  // normal: $blocked matches only ads.test; !$blocked only other.test
  expect(await branches()).toEqual([3, 5, 4, 2]);

  expect(await setMode({ mode: "always_false" })).toEqual({ status: 200, json: { ok: true, matcher: "blocked", mode: "always_false", until_ms: null } });
  // base false: $blocked never matches, !$blocked always does
  expect(await branches()).toEqual([5, 5, 2, 2]);

  expect((await setMode({ mode: "always_true" })).json.mode).toBe("always_true");
  // base true: the opposite
  expect(await branches()).toEqual([3, 3, 4, 4]);

  // idempotent
  expect(await setMode({ mode: "always_true" })).toMatchObject({ status: 200, json: { mode: "always_true" } });
  expect(await branches()).toEqual([3, 3, 4, 4]);
  expect((await status()).mode).toBe("always_true");

  expect((await setMode({ mode: "normal" })).json.mode).toBe("normal");
  expect(await branches()).toEqual([3, 5, 4, 2]);
  // The same configuration served all of it.
  expect(s.app.generation).toBe(generation);
});

test("a mode with a duration returns to normal by itself; status shows until when", async () => {
  const before = Date.now();
  const set = await setMode({ mode: "always_false", duration: "1s" });
  expect(set.status).toBe(200);
  expect(set.json.until_ms).toBeGreaterThanOrEqual(before + 1000);
  expect(set.json.until_ms).toBeLessThan(before + 3000);
  expect(await branches()).toEqual([5, 5, 2, 2]);
  expect((await status()).until_ms).toBe(set.json.until_ms);
  const deadline = Date.now() + 5000;
  while ((await status()).mode !== "normal" && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  expect(await status()).toEqual({ ok: true, matcher: "blocked", mode: "normal", until_ms: null });
  expect(Date.now()).toBeGreaterThanOrEqual(before + 1000);
  expect(await branches()).toEqual([3, 5, 4, 2]);
  // A mode set without a duration replaces a timed one and stays.
  await setMode({ mode: "always_true", duration: "1s" });
  await setMode({ mode: "always_true" });
  await new Promise((r) => setTimeout(r, 1300));
  expect(await status()).toMatchObject({ mode: "always_true", until_ms: null });
  await setMode({ mode: "normal" });
});

test("a missing or unsupported mode, a bad duration or a body that is not JSON is a 400 invalid_matcher_runtime_mode", async () => {
  for (const [body, raw] of [[{}, false], [{ mode: "sometimes" }, false], [{ mode: "always_true", duration: "forever" }, false], [{ mode: "always_true", duration: "8d" }, false], [{ mode: "normal", extra: 1 }, false], ["mode=normal", true], ["{", true]] as const) {
    const r = await setMode(body, raw);
    expect(r.status, JSON.stringify(body)).toBe(400);
    expect(r.json).toMatchObject({ ok: false, code: "invalid_matcher_runtime_mode" });
  }
  expect((await status()).mode).toBe("normal");
});

test("only declared matchers have mode routes: not executors, not quick setups, not unknown tags", async () => {
  for (const path of ["/api/plugins/main/status", "/api/plugins/qs.match.positive.0.0.qname/status", "/api/plugins/nope/mode"]) {
    const res = await s.api(path, { method: path.endsWith("mode") ? "POST" : "GET", headers: { "content-type": "application/json" }, body: path.endsWith("mode") ? "{}" : undefined });
    expect(res.status, path).toBe(404);
    expect(await res.json()).toMatchObject({ ok: false, code: "plugin_route_not_found" });
  }
});

test("a reload puts every matcher back to normal", async () => {
  await setMode({ mode: "always_true" });
  expect(await branches()).toEqual([3, 3, 4, 4]);
  const generation = s.app.generation;
  expect((await s.api("/api/reload", { method: "POST" })).status).toBe(202);
  const deadline = Date.now() + 5000;
  while (s.app.generation === generation && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  expect(s.app.generation).toBe(generation + 1);
  expect(await status()).toMatchObject({ mode: "normal" });
  expect(await branches()).toEqual([3, 5, 4, 2]);
});
