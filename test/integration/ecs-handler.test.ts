// `ecs_handler` seen from the upstream (which subnet it is sent) and from the client (ECS in the
// answer only when its own subnet was forwarded; no OPT when it sent none).
import { afterAll, beforeAll, expect, test } from "vitest";
import { EDNS_OPTION } from "../../src/dns/constants.js";
import { decodeEcs, encodeEcs, findEcs, subnetFor } from "../../src/dns/ecs.js";
import { formatIP, parseIP } from "../../src/dns/ip.js";
import type { Edns, Message } from "../../src/dns/message.js";
import { answerIps, query, rcodeOf } from "../helpers/dns.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

/** "addr/source" of a message's ECS option, or null. */
function subnetOf(m: Message | Edns | null): string | null {
  const edns = m === null ? null : "udpSize" in m ? m : m.edns;
  const opt = findEcs(edns);
  if (!opt) return null;
  const ecs = decodeEcs(opt.data);
  return ecs ? `${formatIP(ecs.address)}/${ecs.sourcePrefix}` : "malformed";
}

/**
 * Like an ECS-aware authoritative server: echoes the subnet back with scope = source. Names
 * starting with `pushy.` get an ECS answer even when the query had none (a misbehaving server).
 */
function upstreamAnswer(q: Message): Message {
  const reply = answerWith(q, ["192.0.2.1"]);
  const opt = findEcs(q.edns);
  const pushed = q.questions[0].name.startsWith("pushy.") ? subnetFor(Uint8Array.from([10, 0, 0, 0]), 8) : null;
  const ecs = opt ? decodeEcs(opt.data) : pushed;
  if (reply.edns && ecs) reply.edns.options = [{ code: EDNS_OPTION.ECS, data: encodeEcs({ ...ecs, scopePrefix: ecs.sourcePrefix }) }];
  return reply;
}

const clientEcs = (cidr: string): Partial<Edns> => {
  const [ip, len] = cidr.split("/");
  return { options: [{ code: EDNS_OPTION.ECS, data: encodeEcs(subnetFor(parseIP(ip) as Uint8Array, Number(len))) }] };
};

let upstream: Responder;
let s: RunningSluice;
/** The query the upstream got last. */
const lastUpstreamQuery = (): Message => upstream.seen[upstream.seen.length - 1].query;

beforeAll(async () => {
  upstream = await startResponder(upstreamAnswer);
  s = await startSluice(`
plugins:
  - tag: strip
    type: ecs_handler
  - tag: trusting
    type: ecs_handler
    args: { forward: true }
  - tag: from_client
    type: ecs_handler
    args: { send: true, mask4: 16 }
  - tag: main
    type: sequence
    args:
      - { matches: "qname domain:strip.test", exec: $strip }
      - { matches: "qname domain:fwd.test", exec: $trusting }
      - { matches: "qname domain:send.test", exec: $from_client }
      - { matches: "qname domain:preset4.test", exec: ecs_handler 203.0.113.77/20 }
      - { matches: "qname domain:preset6.test", exec: "ecs_handler 2001:db8:1234:5678::1" }
      - exec: forward 127.0.0.1:${upstream.port}
${serversYaml()}
`);
});
afterAll(async () => {
  await s.stop();
  await upstream.close();
});

test("default: the client's subnet is stripped before the upstream and absent from the answer", async () => {
  const m = await query(s.udpPort, "strip.test", "A", { edns: clientEcs("198.51.100.0/24") });
  expect(subnetOf(lastUpstreamQuery())).toBeNull();
  expect(lastUpstreamQuery().edns).not.toBeNull();
  expect(answerIps(m)).toEqual(["192.0.2.1"]);
  expect(subnetOf(m)).toBeNull();
});

test("an ECS option the upstream sends anyway does not reach the client", async () => {
  const m = await query(s.udpPort, "pushy.strip.test", "A", { edns: clientEcs("198.51.100.0/24") });
  expect(subnetOf(lastUpstreamQuery())).toBeNull();
  expect(answerIps(m)).toEqual(["192.0.2.1"]);
  expect(m.edns).not.toBeNull();
  expect(subnetOf(m)).toBeNull();
  // Without the handler the same upstream answer carries it.
  expect(subnetOf(await query(s.udpPort, "pushy.other.test", "A", { edns: 1232 }))).toBe("10.0.0.0/8");
});

test("forward: true passes the client's subnet upstream and the upstream's ECS back", async () => {
  const m = await query(s.udpPort, "fwd.test", "A", { edns: clientEcs("198.51.100.0/24") });
  expect(subnetOf(lastUpstreamQuery())).toBe("198.51.100.0/24");
  expect(subnetOf(m)).toBe("198.51.100.0/24");
  expect(decodeEcs(findEcs(m.edns)?.data ?? Buffer.alloc(0))?.scopePrefix).toBe(24);
});

test("forward: true with a client that sent no subnet adds nothing", async () => {
  await query(s.udpPort, "fwd.test", "A", { edns: 1232 });
  expect(subnetOf(lastUpstreamQuery())).toBeNull();
});

test("send: true sends the client address cut to mask4, and keeps ECS out of the answer", async () => {
  const m = await query(s.udpPort, "send.test", "A", { edns: 1232 });
  expect(subnetOf(lastUpstreamQuery())).toBe("127.0.0.0/16");
  expect(subnetOf(m)).toBeNull();
  expect(m.edns).not.toBeNull();
  // A client's own subnet is replaced by ours when it is not trusted.
  await query(s.udpPort, "send.test", "A", { edns: clientEcs("198.51.100.0/24") });
  expect(subnetOf(lastUpstreamQuery())).toBe("127.0.0.0/16");
});

test("quick setup `ecs_handler <ip>/<len>` sends the preset cut to that length (IPv4)", async () => {
  const m = await query(s.udpPort, "preset4.test", "A", { edns: 1232 });
  expect(subnetOf(lastUpstreamQuery())).toBe("203.0.112.0/20");
  expect(subnetOf(m)).toBeNull();
});

test("quick setup with a bare IPv6 preset uses mask6 (48)", async () => {
  await query(s.udpPort, "preset6.test", "A", { edns: 1232 });
  expect(subnetOf(lastUpstreamQuery())).toBe("2001:db8:1234::/48");
});

test("a client without EDNS: the upstream gets an OPT with the subnet, the client gets no OPT back", async () => {
  const m = await query(s.udpPort, "preset4.test", "A");
  const up = lastUpstreamQuery();
  expect(up.edns?.udpSize).toBe(1232);
  expect(subnetOf(up)).toBe("203.0.112.0/20");
  expect(rcodeOf(m)).toBe(0);
  expect(answerIps(m)).toEqual(["192.0.2.1"]);
  expect(m.edns).toBeNull();
});

test("names the handler does not cover go upstream with the client's subnet untouched", async () => {
  const m = await query(s.tcpPort, "other.test", "A", { edns: clientEcs("198.51.100.0/24"), tcp: true });
  expect(subnetOf(lastUpstreamQuery())).toBe("198.51.100.0/24");
  expect(subnetOf(m)).toBe("198.51.100.0/24");
});
