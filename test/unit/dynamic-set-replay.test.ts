// A dynamic_domain_set change made through another cluster member's API, as this member replays it:
// checked (it comes from outside the process), and brought to now (an added rule keeps its end).
import { expect, test } from "vitest";
import { dynamicSetControl } from "../../src/plugins/providers/dynamic-domain-set/control.js";

const shared = dynamicSetControl.shared;
if (!shared) throw new Error("dynamic_domain_set declares no shared changes");
const replay = shared.replay.bind(shared);

test("adds, removes and clears are shared; nothing else is", () => {
  expect(shared.events).toEqual(["DYNSET.ADD", "DYNSET.REMOVE", "DYNSET.CLEAR"]);
  expect(replay({ type: "PROVIDER.RELOAD" }, 0)).toBeNull();
  expect(replay({ type: "DYNSET.CLEAR" }, 0)).toEqual({ type: "DYNSET.CLEAR" });
});

test("an add keeps each rule's end, leaves out a rule whose end has passed, and starts from now", () => {
  const event = { type: "DYNSET.ADD", at: 1000, rules: [{ rule: "domain:a.test", ttl_ms: null }, { rule: "full:b.test", ttl_ms: 5000 }, { rule: "keyword:c", ttl_ms: 500 }] };
  expect(replay(event, 2000)).toEqual({ type: "DYNSET.ADD", at: 2000, rules: [{ rule: "domain:a.test", ttl_ms: null }, { rule: "full:b.test", ttl_ms: 4000 }] });
  expect(replay({ ...event, rules: [{ rule: "keyword:c", ttl_ms: 500 }] }, 2000)).toBeNull();
});

test("what does not check out is dropped whole", () => {
  const add = (rules: unknown, at: unknown = 0): Record<string, unknown> => ({ type: "DYNSET.ADD", at, rules });
  expect(replay(add([{ rule: "a.test", ttl_ms: null }]), 0)).toBeNull(); // not canonical (bare)
  expect(replay(add([{ rule: "full:bad name", ttl_ms: null }]), 0)).toBeNull();
  expect(replay(add([{ rule: "full:a.test", ttl_ms: -1 }]), 0)).toBeNull();
  expect(replay(add([{ rule: "full:a.test", ttl_ms: null }], "soon"), 0)).toBeNull();
  expect(replay(add("full:a.test"), 0)).toBeNull();
  expect(replay({ type: "DYNSET.REMOVE", rules: ["full:a.test", "domain:b.test"] }, 0)).toEqual({ type: "DYNSET.REMOVE", rules: ["full:a.test", "domain:b.test"] });
  expect(replay({ type: "DYNSET.REMOVE", rules: ["full:a.test", 3] }, 0)).toBeNull();
});
