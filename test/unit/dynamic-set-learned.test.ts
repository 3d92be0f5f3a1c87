// learn_domain with data-plane workers: a worker's learned rules go to the primary and back to every
// worker (src/plugins/providers/dynamic-domain-set/learned.ts). Here the two sides' stores and relays
// talk through a pair of ChannelHandlers, as the cluster channel would deliver the messages.
import { expect, test } from "vitest";
import { LearnedRelay, learnedRulesOf, LEARNED_MESSAGE } from "../../src/plugins/providers/dynamic-domain-set/learned.js";
import { DynamicRules } from "../../src/plugins/providers/dynamic-domain-set/store.js";
import { ChannelHandlers, type ChannelMessage, type ProcessRole } from "../../src/registry/process-role.js";

/** A primary and `n` workers whose channels deliver at once (structured clone as the IPC channel would). */
function instance(n: number, max = 100) {
  let now = 1_000_000;
  const clock = (): number => now;
  const primaryHandlers = new ChannelHandlers();
  const workerHandlers = Array.from({ length: n }, () => new ChannelHandlers());
  const primaryRole: ProcessRole = {
    kind: "primary",
    workers: n,
    channel: {
      send: (m) => workerHandlers.every((h) => h.dispatch(structuredClone(m), () => true)),
      listen: (t, key, handler) => primaryHandlers.listen(t, key, handler),
    },
    serverAddress: () => null,
    askWorkers: () => Promise.resolve([]),
  };
  const primary = { store: new DynamicRules(clock), relay: null as unknown as LearnedRelay };
  primary.relay = new LearnedRelay("dyn", primary.store, primaryRole, max, () => undefined);
  const workers = workerHandlers.map((handlers, i) => {
    const role: ProcessRole = {
      kind: "worker",
      index: i + 1,
      channel: { send: (m: ChannelMessage) => primaryHandlers.dispatch(structuredClone(m), () => true), listen: (t, key, handler) => handlers.listen(t, key, handler) },
    };
    const store = new DynamicRules(clock);
    return { store, relay: new LearnedRelay("dyn", store, role, max, () => undefined) };
  });
  return { primary, workers, advance: (ms: number) => (now += ms), now: clock };
}

/** What a worker's learn_domain does: the store's learn, and the key noted when it changed something. */
function learn(w: { store: DynamicRules; relay: LearnedRelay }, name: string, ttlMs: number | null, max = 100): string {
  const out = w.store.learn(name, "full", ttlMs, max);
  if (w.relay.collecting && (out === "added" || out === "refreshed")) w.relay.noted(`full:${name}`);
  return out;
}

test("a name one worker learned reaches the primary at its report, and from there every worker, with its end", () => {
  const { primary, workers, now } = instance(3);
  expect(learn(workers[0], "a.test", 60_000)).toBe("added");
  expect(workers[1].store.has("a.test")).toBe(false);
  expect(primary.store.has("a.test")).toBe(false);
  expect(workers[0].relay.report()).toBe(1);
  for (const s of [primary.store, ...workers.map((w) => w.store)]) {
    expect(s.has("a.test")).toBe(true);
    expect(s.learnedRule("full:a.test")).toEqual({ rule: "full:a.test", added_at_ms: now(), expires_at_ms: now() + 60_000 });
  }
  // The primary's file is behind; the learning worker's own copy did not change (its rule came back as it was).
  expect(primary.store.unsaved).toBe(true);
  // Nothing new: nothing is sent.
  expect(workers[0].relay.report()).toBe(0);
});

test("a refresh moves the end on everywhere; an older end does not pull it back", () => {
  const { primary, workers, advance, now } = instance(2);
  learn(workers[0], "b.test", 10_000);
  workers[0].relay.report();
  advance(6_000);
  // Less than half the ttl left: learned again, the end moves on.
  expect(learn(workers[1], "b.test", 10_000)).toBe("refreshed");
  workers[1].relay.report();
  const end = now() + 10_000;
  for (const s of [primary.store, workers[0].store, workers[1].store]) expect(s.learnedRule("full:b.test")?.expires_at_ms).toBe(end);
  expect(primary.store.adopt([{ rule: "full:b.test", added_at_ms: 0, expires_at_ms: end - 1 }], 100)).toEqual([]);
  expect(primary.store.learnedRule("full:b.test")?.expires_at_ms).toBe(end);
});

test("a rule the API put there stays the API's; max_entries bounds what is adopted; an expired one is left out", async () => {
  const { primary, workers, advance, now } = instance(1, 2);
  const parsed = { ok: true as const, key: "full:api.test", kind: "full" as const, pattern: "api.test", regexp: null };
  await primary.store.add([{ parsed, ttlMs: null }], "api", now());
  expect(primary.store.adopt([{ rule: "full:api.test", added_at_ms: now(), expires_at_ms: now() + 1000 }], 2)).toEqual([]);
  expect(primary.store.list({ cursor: 0, limit: 10, q: null }).rules.map((r) => [r.rule, r.source])).toEqual([["full:api.test", "api"]]);
  const taken = primary.store.adopt(
    [
      { rule: "full:one.test", added_at_ms: now(), expires_at_ms: 0 },
      { rule: "full:two.test", added_at_ms: now(), expires_at_ms: 0 },
    ],
    2,
  );
  expect(taken.map((r) => r.rule)).toEqual(["full:one.test"]);
  advance(10);
  expect(workers[0].store.adopt([{ rule: "full:old.test", added_at_ms: 0, expires_at_ms: now() - 1 }], 2)).toEqual([]);
});

test("messages that are not what Sluice sends are dropped whole", () => {
  expect(learnedRulesOf([{ rule: "full:a.test", added_at_ms: 1, expires_at_ms: 0 }])).toEqual([{ rule: "full:a.test", added_at_ms: 1, expires_at_ms: 0 }]);
  expect(learnedRulesOf("full:a.test")).toBeNull();
  expect(learnedRulesOf([{ rule: "a.test", added_at_ms: 1, expires_at_ms: 0 }])).toBeNull(); // not canonical
  expect(learnedRulesOf([{ rule: "keyword:a", added_at_ms: 1, expires_at_ms: 0 }])).toBeNull(); // never learned
  expect(learnedRulesOf([{ rule: "full:a.test", added_at_ms: "1", expires_at_ms: 0 }])).toBeNull();
  expect(learnedRulesOf([{ rule: "full:a.test", added_at_ms: 1, expires_at_ms: Infinity }])).toBeNull();
  const { primary } = instance(1);
  // Through the channel: nothing changes.
  const handlers = new ChannelHandlers();
  const relay = new LearnedRelay(
    "dyn",
    primary.store,
    { kind: "primary", workers: 1, channel: { send: () => true, listen: (t, key, h) => handlers.listen(t, key, h) }, serverAddress: () => null, askWorkers: () => Promise.resolve([]) },
    10,
    () => undefined,
  );
  expect(handlers.dispatch({ t: LEARNED_MESSAGE, key: "dyn", rules: [{ rule: "full:a.test" }] }, () => true)).toBe(true);
  expect(primary.store.size).toBe(0);
  relay.close();
});

test("a channel's latest taker gets the messages; when it lets go, the one before it takes them again", () => {
  const handlers = new ChannelHandlers();
  const got: string[] = [];
  const offOld = handlers.listen("m", "k", () => got.push("old"));
  const offNew = handlers.listen("m", "k", () => got.push("new"));
  handlers.dispatch({ t: "m", key: "k" }, () => true);
  offNew();
  handlers.dispatch({ t: "m", key: "k" }, () => true);
  offNew();
  offOld();
  expect(handlers.dispatch({ t: "m", key: "k" }, () => true)).toBe(false);
  expect(got).toEqual(["new", "old"]);
});
