// `forward_edns0opt` seen from a client: chosen request options (cookie, padding) come back in the
// answer when the upstream left them out, without duplicating ones it did send; an OPT is added
// when the upstream dropped it, and never for a client without EDNS.
import { afterAll, beforeAll, expect, test } from "vitest";
import { EDNS_OPTION } from "../../src/dns/constants.js";
import type { Edns, EdnsOption, Message } from "../../src/dns/message.js";
import { answerIps, query } from "../helpers/dns.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

const COOKIE = Buffer.from("0123456789abcdef", "hex");
const SERVER_COOKIE = Buffer.from("0123456789abcdef" + "feedfacecafebeef", "hex");
const PADDING = Buffer.alloc(24);
const NSID: EdnsOption = { code: EDNS_OPTION.NSID, data: Buffer.alloc(0) };

const withOptions = (...options: EdnsOption[]): { edns: Partial<Edns> } => ({ edns: { options } });
const cookie: EdnsOption = { code: EDNS_OPTION.COOKIE, data: COOKIE };
const padding: EdnsOption = { code: EDNS_OPTION.PADDING, data: PADDING };

/** Answers with no options; `cookie.` names get the server's own cookie, `noopt.` names no OPT at all. */
function upstreamAnswer(q: Message): Message {
  const reply = answerWith(q, ["192.0.2.1"]);
  const first = q.questions[0].name.split(".")[0];
  if (first === "noopt") reply.edns = null;
  if (first === "cookie" && reply.edns) reply.edns.options = [{ code: EDNS_OPTION.COOKIE, data: SERVER_COOKIE }];
  return reply;
}

const codes = (m: Message): number[] | null => m.edns?.options.map((o) => o.code) ?? null;
const optionData = (m: Message, code: number): string | undefined => m.edns?.options.find((o) => o.code === code)?.data.toString("hex");

let upstream: Responder;
let s: RunningSluice;
beforeAll(async () => {
  upstream = await startResponder(upstreamAnswer);
  s = await startSluice(`
plugins:
  - tag: cookie_only
    type: forward_edns0opt
    args: { codes: [cookie] }
  - tag: main
    type: sequence
    args:
      - { matches: "qname domain:both.test", exec: "forward_edns0opt 10,12" }
      - { matches: "qname domain:one.test", exec: $cookie_only }
      - exec: forward 127.0.0.1:${upstream.port}
${serversYaml()}
`);
});
afterAll(async () => {
  await s.stop();
  await upstream.close();
});

test("without the plugin the upstream's answer has none of the client's options", async () => {
  const m = await query(s.udpPort, "plain.test", "A", withOptions(cookie, padding));
  expect(codes(m)).toEqual([]);
  // The upstream did receive them: forward passes the client's query through.
  const sent = upstream.seen[upstream.seen.length - 1].query;
  expect(sent.edns?.options.map((o) => o.code)).toEqual([EDNS_OPTION.COOKIE, EDNS_OPTION.PADDING]);
});

test("`forward_edns0opt 10,12` copies the cookie and the padding into the answer, and nothing else", async () => {
  const m = await query(s.udpPort, "both.test", "A", withOptions(NSID, cookie, padding));
  expect(answerIps(m)).toEqual(["192.0.2.1"]);
  expect(codes(m)).toEqual([EDNS_OPTION.COOKIE, EDNS_OPTION.PADDING]);
  expect(optionData(m, EDNS_OPTION.COOKIE)).toBe(COOKIE.toString("hex"));
  expect(optionData(m, EDNS_OPTION.PADDING)).toBe(PADDING.toString("hex"));
});

test("codes given by name; only the listed ones are copied", async () => {
  const m = await query(s.tcpPort, "one.test", "A", { ...withOptions(cookie, padding), tcp: true });
  expect(codes(m)).toEqual([EDNS_OPTION.COOKIE]);
});

test("an option the upstream answered itself is kept, not duplicated", async () => {
  const m = await query(s.udpPort, "cookie.both.test", "A", withOptions(cookie, padding));
  expect(codes(m)).toEqual([EDNS_OPTION.COOKIE, EDNS_OPTION.PADDING]);
  expect(optionData(m, EDNS_OPTION.COOKIE)).toBe(SERVER_COOKIE.toString("hex"));
});

test("an upstream answer without OPT gets one (the client used EDNS), carrying the options and the DO bit", async () => {
  const m = await query(s.udpPort, "noopt.both.test", "A", { edns: { options: [cookie], flags: 0x8000 } });
  expect(m.edns).not.toBeNull();
  expect(m.edns?.flags).toBe(0x8000);
  expect(codes(m)).toEqual([EDNS_OPTION.COOKIE]);
});

test("a client without EDNS, or without the listed options, gets the answer unchanged", async () => {
  expect((await query(s.udpPort, "noopt.both.test", "A")).edns).toBeNull();
  expect(codes(await query(s.udpPort, "noopt.both.test", "A", withOptions(NSID)))).toBeNull();
  expect(codes(await query(s.udpPort, "both.test", "A", withOptions()))).toEqual([]);
});
