// The slicing that keeps long builds off DNS's back (src/engine/rules/slicer.ts): a build in steps
// gives the same result straight through or in slices, the sort in steps is a correct stable sort,
// and a sliced build leaves the event loop turns while it runs.
import { expect, test } from "vitest";
import { DomainTableBuilder } from "../../src/engine/rules/domain.js";
import { IpPrefixSetBuilder } from "../../src/engine/rules/ip.js";
import { finish, Slicer, sortSteps } from "../../src/engine/rules/slicer.js";

test("sortSteps sorts like Array.prototype.sort, stably, at every size around its run length", () => {
  for (const n of [0, 1, 2047, 2048, 2049, 5000, 20_001]) {
    const items = Array.from({ length: n }, (_, i) => ({ k: (i * 7919) % 97, i }));
    const sorted = finish(sortSteps(items.slice(), (a, b) => a.k - b.k));
    expect(sorted).toEqual(items.slice().sort((a, b) => a.k - b.k || a.i - b.i));
  }
});

test("an IP set and a domain table built in slices answer like ones built straight through", async () => {
  const ips = new IpPrefixSetBuilder();
  const ips2 = new IpPrefixSetBuilder();
  for (let i = 0; i < 30_000; i++) {
    const rule = i % 2 === 0 ? `10.${(i >> 8) & 255}.${i & 255}.0/${24 + (i % 9)}` : `2001:db8:${(i % 4096).toString(16)}::/48`;
    ips.add(rule);
    ips2.add(rule);
  }
  const straight = ips.build();
  const sliced = await ips2.buildSliced(new Slicer(1));
  for (let i = 0; i < 2000; i++) {
    const probe = new Uint8Array([10, i & 255, (i * 13) & 255, 1]);
    expect(sliced.contains(probe)).toBe(straight.contains(probe));
  }
  const words = Array.from({ length: 5000 }, (_, i) => `kw${i}x`);
  const d1 = new DomainTableBuilder<number>("domain");
  const d2 = new DomainTableBuilder<number>("domain");
  words.forEach((w, i) => (d1.add(`keyword:${w}`, i), d2.add(`keyword:${w}`, i)));
  const t1 = d1.build();
  const t2 = await d2.buildSliced(new Slicer(1));
  for (const name of ["a.kw17x.test", "kw4999x", "kw5000x", "nothing.test", "kw1x.kw0x"]) expect(t2.lookup(name)).toBe(t1.lookup(name));
});

test("a sliced build gives the event loop turns while it runs", async () => {
  const items = Array.from({ length: 400_000 }, (_, i) => (i * 2654435761) % 1_000_003);
  let ticks = 0;
  const timer = setInterval(() => ticks++, 1);
  const slicer = new Slicer(2);
  const steps = sortSteps(items, (a, b) => a - b);
  let sorted: number[];
  for (;;) {
    const r = steps.next();
    if (r.done === true) {
      sorted = r.value;
      break;
    }
    if (slicer.dueNow()) await slicer.pause();
  }
  clearInterval(timer);
  expect(sorted[0]).toBeLessThanOrEqual(sorted[1]);
  expect(sorted[sorted.length - 2]).toBeLessThanOrEqual(sorted[sorted.length - 1]);
  expect(ticks).toBeGreaterThan(0);
});
