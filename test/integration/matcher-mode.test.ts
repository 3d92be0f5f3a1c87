// Matcher runtime mode: normal / always_false / always_true, applied before each reference's own
// negation, switched while the service runs (no reload) and reset by a new runtime.
import { afterAll, beforeAll, expect, test } from "vitest";
import { ask, rcodeOf } from "../helpers/dns.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

let s: RunningSluice;
beforeAll(async () => {
  s = await startSluice(`
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
    out.push(rcodeOf(await ask(s.udpPort, name, type)));
  }
  return out;
}

test("$tag and !$tag change branch as the mode flips, without a reload", async () => {
  const runtime = s.app.runtime;
  expect(runtime.modes.get("blocked")).toBe("normal");
  // normal: $blocked matches only ads.test; !$blocked only other.test
  expect(await branches()).toEqual([3, 5, 4, 2]);

  expect(runtime.setMatcherMode("blocked", "always_false")).toBe(true);
  // base false: $blocked never matches, !$blocked always does
  expect(await branches()).toEqual([5, 5, 2, 2]);

  expect(runtime.setMatcherMode("blocked", "always_true")).toBe(true);
  // base true: the opposite
  expect(await branches()).toEqual([3, 3, 4, 4]);

  // idempotent
  expect(runtime.setMatcherMode("blocked", "always_true")).toBe(true);
  expect(await branches()).toEqual([3, 3, 4, 4]);

  expect(runtime.setMatcherMode("blocked", "normal")).toBe(true);
  expect(await branches()).toEqual([3, 5, 4, 2]);
  // The same runtime served all of it.
  expect(s.app.runtime).toBe(runtime);
});

test("only declared matchers have a mode (not executors, not quick setups)", () => {
  expect(s.app.runtime.setMatcherMode("main", "always_true")).toBe(false);
  expect(s.app.runtime.setMatcherMode("qs.match.positive.0.0.qname", "always_true")).toBe(false);
  expect(s.app.runtime.modes.get("main")).toBeUndefined();
});
