// The UDP servers' send-side lookup: address literals pass straight through (no regexp, no next
// tick), host names still resolve.
import { expect, test } from "vitest";
import { literalFamily, literalFirst } from "../../src/plugins/servers/listeners.js";

test("address literals are recognised without resolving", () => {
  expect(literalFamily("127.0.0.1")).toBe(4);
  expect(literalFamily("::1")).toBe(6);
  expect(literalFamily("::ffff:192.0.2.1")).toBe(6);
  expect(literalFamily("fe80::1%eth0")).toBe(6);
  expect(literalFamily("localhost")).toBe(0);
  expect(literalFamily("1password.com")).toBe(0);
  expect(literalFamily("")).toBe(0);
});

test("a literal is answered at once, a host name through the resolver", async () => {
  let sync: [string, number] | null = null;
  literalFirst("192.0.2.7", 4, (err, address, family) => {
    expect(err).toBeNull();
    sync = [address, family];
  });
  expect(sync).toEqual(["192.0.2.7", 4]);
  const resolved = await new Promise<[string, number]>((resolve, reject) =>
    literalFirst("localhost", 4, (err, address, family) => (err ? reject(err) : resolve([address, family]))),
  );
  expect(resolved).toEqual(["127.0.0.1", 4]);
});
