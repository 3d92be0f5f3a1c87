import { afterEach, expect, test } from "vitest";
import { bootstrapResolver } from "../../src/engine/upstream/bootstrap.js";
import { Upstream } from "../../src/engine/upstream/upstream.js";
import { answerIps, buildQuery } from "../helpers/dns.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

async function responder(...args: Parameters<typeof startResponder>): Promise<Responder> {
  const r = await startResponder(...args);
  cleanups.push(() => r.close());
  return r;
}

test("a hostname upstream is resolved through the bootstrap server and the address is cached", async () => {
  const upstreamDns = await responder((q) => answerWith(q, ["192.0.2.42"]));
  const bootstrap = await responder((q) => (q.questions[0].name.toLowerCase() === "dns.test" && q.questions[0].type === 1 ? answerWith(q, ["127.0.0.1"], 1) : answerWith(q, [], 1, 3)));
  const u = new Upstream({ addr: `udp://dns.test:${upstreamDns.port}`, name: "dns.test", bootstrap: `127.0.0.1:${bootstrap.port}` });
  cleanups.push(() => u.close());
  for (let i = 0; i < 3; i++) {
    const a = await u.exchange(buildQuery(`b${i}.example`), null);
    expect(answerIps(a.message)).toEqual(["192.0.2.42"]);
  }
  // A 1-second TTL is raised to the 60-second floor: one bootstrap query for all three.
  expect(bootstrap.seen).toHaveLength(1);
  expect(bootstrap.seen[0].query.questions[0]).toMatchObject({ name: "dns.test", type: 1 });
  expect(upstreamDns.seen).toHaveLength(3);
});

test("bootstrap_version 6 asks for AAAA", async () => {
  const bootstrap = await responder((q) => answerWith(q, q.questions[0].type === 28 ? ["::1"] : [], 300));
  const resolver = bootstrapResolver("v6.test", 6, [{ host: "127.0.0.1", port: bootstrap.port, family: 4 }], 2000);
  cleanups.push(() => resolver.close());
  expect(await resolver.resolve()).toBe("::1");
  expect(bootstrap.seen[0].query.questions[0].type).toBe(28);
});

test("an expired address keeps serving while one refresh fetches the new one", async () => {
  let ip = "127.0.0.1";
  const bootstrap = await responder((q) => answerWith(q, [ip], 0));
  const resolver = bootstrapResolver("refresh.test", 4, [{ host: "127.0.0.1", port: bootstrap.port, family: 4 }], 2000, 150);
  cleanups.push(() => resolver.close());
  expect(resolver.current()).toBeNull();
  expect(await resolver.resolve()).toBe("127.0.0.1");
  expect(resolver.current()).toBe("127.0.0.1");
  ip = "127.0.0.2";
  await new Promise((r) => setTimeout(r, 250));
  // Expired: the stale address is still handed out (no query waits) and a refresh starts.
  expect(resolver.current()).toBe("127.0.0.1");
  expect(resolver.current()).toBe("127.0.0.1");
  expect(await resolver.resolve()).toBe("127.0.0.2");
  expect(bootstrap.seen).toHaveLength(2);
});

test("a bootstrap that cannot resolve the name fails the exchange with a message naming it", async () => {
  const bootstrap = await responder((q) => answerWith(q, [], 60, 3));
  const u = new Upstream({ addr: "udp://missing.test", name: "missing.test", bootstrap: `127.0.0.1:${bootstrap.port}`, timeoutMs: 2000 });
  cleanups.push(() => u.close());
  const err = await u.exchange(buildQuery("x.example"), null).catch((e: unknown) => e);
  expect((err as Error).message).toBe(`bootstrap 127.0.0.1:${bootstrap.port}: missing.test A answered NXDOMAIN`);
});

test("without bootstrap a hostname is resolved by the system resolver", async () => {
  const upstreamDns = await responder((q) => answerWith(q, ["192.0.2.88"]));
  const u = new Upstream({ addr: `tcp://localhost:${upstreamDns.port}`, name: "localhost" });
  cleanups.push(() => u.close());
  const a = await u.exchange(buildQuery("sys.example"), null);
  expect(answerIps(a.message)).toEqual(["192.0.2.88"]);
  expect(upstreamDns.seen[0].via).toBe("tcp");
});
