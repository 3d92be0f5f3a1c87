// The synthesised SOA of negative answers (src/dns/negative.ts) and the `reject` builtin on a context
// without a question (a cron run's context may be rewritten to have none): no SOA then, since its
// owner is a pointer to the question name.
import { expect, test } from "vitest";
import { QTYPE, RCODE } from "../../src/dns/constants.js";
import { decodeMessage, type Message } from "../../src/dns/message.js";
import { negativeSoaBlock } from "../../src/dns/negative.js";
import { readSoa } from "../../src/dns/rdata.js";
import { DnsContext } from "../../src/engine/context.js";
import { parseExecExpr } from "../../src/engine/expr.js";
import { builtinAction } from "../../src/engine/sequence.js";

const query = (questions: Message["questions"]): Message => ({ id: 7, flags: 0x0100, questions, answers: [], authorities: [], additionals: [], edns: null });

test("one SOA owned by a pointer to the question name, TTL and MINIMUM the given TTL; made once per TTL", () => {
  const block = negativeSoaBlock(42);
  expect(block.count).toBe(1);
  expect(block.bytes.subarray(0, 12).toString("hex")).toBe("c00c" + "0006" + "0001" + "0000002a" + block.bytes.readUInt16BE(10).toString(16).padStart(4, "0"));
  expect(readSoa(block.bytes.subarray(12))).toEqual({ mname: "ns.sluice.invalid", rname: "hostmaster.sluice.invalid", serial: 1, refresh: 1800, retry: 900, expire: 604800, minimum: 42 });
  expect(negativeSoaBlock(42)).toBe(block);
  expect(negativeSoaBlock(43)).not.toBe(block);
});

test("reject nxdomain answers a question with the SOA, and a context without one without it", () => {
  const action = builtinAction(parseExecExpr("reject nxdomain ttl=9", []), null);
  const withQuestion = new DnsContext(query([{ name: "Blocked.Test", type: QTYPE.TXT, class: 1 }]), null, "127.0.0.1", 1, "internal");
  void action(withQuestion, () => 0);
  const answered = decodeMessage(withQuestion.response?.toWire() ?? Buffer.alloc(0));
  expect(answered.flags & 0x0f).toBe(RCODE.NXDOMAIN);
  expect(answered.authorities.map((r) => [r.name, r.type, r.ttl])).toEqual([["Blocked.Test", QTYPE.SOA, 9]]);

  const bare = new DnsContext(query([]), null, "127.0.0.1", 1, "internal");
  void action(bare, () => 0);
  const reply = decodeMessage(bare.response?.toWire() ?? Buffer.alloc(0));
  expect(reply.flags & 0x0f).toBe(RCODE.NXDOMAIN);
  expect(reply.questions).toEqual([]);
  expect(reply.authorities).toEqual([]);
});
