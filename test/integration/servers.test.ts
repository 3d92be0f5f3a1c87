// udp_server / tcp_server behaviour a client can observe: truncation, malformed input, TCP framing.
import net from "node:net";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { FLAG, QTYPE, RCODE } from "../../src/dns/constants.js";
import { decodeMessage, encodeMessage } from "../../src/dns/message.js";
import { answerIps, query, buildQuery, rcodeOf, tcpExchange, udpExchange } from "../helpers/dns.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";

// 40 sinkhole addresses: about 680 bytes of answer, more than 512.
const many = Array.from({ length: 40 }, (_, i) => `10.1.0.${i + 1}`).join(" ");

let s: RunningSluice;
beforeAll(async () => {
  s = await startSluice(`
plugins:
  - tag: main
    type: sequence
    args:
      - { matches: "qtype A", exec: "black_hole ${many}" }
      - { matches: "qtype TXT", exec: "sleep 300" }
      - { matches: "qtype TXT", exec: reject 3 }
      - { matches: "qtype MX", exec: reject 2 }
      - { matches: "qtype NS", exec: mark 1 }
  - tag: udp
    type: udp_server
    args: { entry: main, listen: "127.0.0.1:0" }
  - tag: tcp
    type: tcp_server
    args: { entry: main, listen: "127.0.0.1:0", idle_timeout: 1s }
  - tag: dual
    type: udp_server
    args: { entry: main, listen: ":0" }
`);
});
afterAll(() => s.stop());

describe("UDP truncation", () => {
  test("without EDNS an answer over 512 bytes is cut: TC set, answers dropped", async () => {
    const raw = await udpExchange(s.udpPort, buildQuery("big.test", "A"));
    expect(raw).not.toBeNull();
    expect(raw!.length).toBeLessThanOrEqual(512);
    const m = decodeMessage(raw!);
    expect(m.flags & FLAG.TC).toBe(FLAG.TC);
    expect(m.answers).toHaveLength(0);
    expect(m.questions[0].name).toBe("big.test");
  });

  test("with EDNS the client's advertised size is honoured", async () => {
    const big = await query(s.udpPort, "big.test", "A", { edns: 4096 });
    expect(big.flags & FLAG.TC).toBe(0);
    expect(answerIps(big)).toHaveLength(40);
    expect(big.edns).not.toBeNull();
    const raw = await udpExchange(s.udpPort, buildQuery("big.test", "A", { edns: 600 }));
    const small = decodeMessage(raw!);
    expect(raw!.length).toBeLessThanOrEqual(600);
    expect(small.flags & FLAG.TC).toBe(FLAG.TC);
    expect(small.edns).not.toBeNull(); // OPT survives the cut
  });

  test("over TCP the same answer comes whole", async () => {
    const m = await query(s.tcpPort, "big.test", "A", { tcp: true });
    expect(m.flags & FLAG.TC).toBe(0);
    expect(answerIps(m)).toHaveLength(40);
  });
});

describe("malformed and unusual requests", () => {
  test("shorter than a header: dropped", async () => {
    expect(await udpExchange(s.udpPort, Buffer.from([1, 2, 3]), 300)).toBeNull();
  });

  test("a response packet (QR set) is never answered", async () => {
    const q = buildQuery("x.test", "A");
    q[2] |= 0x80;
    expect(await udpExchange(s.udpPort, q, 300)).toBeNull();
  });

  test("readable header but broken body: FORMERR with the same id", async () => {
    const q = buildQuery("x.test", "A", { id: 0x1234 });
    const broken = Buffer.concat([q, Buffer.from([0xde, 0xad])]); // trailing garbage
    const raw = await udpExchange(s.udpPort, broken);
    expect(raw!.readUInt16BE(0)).toBe(0x1234);
    expect(raw![3] & 0x0f).toBe(RCODE.FORMERR);
  });

  test("opcode other than QUERY: NOTIMP", async () => {
    const q = buildQuery("x.test", "A");
    q[2] = (q[2] & 0x87) | (2 << 3); // STATUS
    const raw = await udpExchange(s.udpPort, q);
    expect(decodeMessage(raw!).flags & 0x0f).toBe(RCODE.NOTIMP);
  });

  test("no question: FORMERR", async () => {
    const msg = encodeMessage({ id: 7, flags: 0x0100, questions: [], answers: [], authorities: [], additionals: [], edns: null });
    const raw = await udpExchange(s.udpPort, msg);
    expect(rcodeOf(decodeMessage(raw!))).toBe(RCODE.FORMERR);
  });

  test("EDNS version 1: BADVERS", async () => {
    const m = await query(s.udpPort, "x.test", "A", { edns: { version: 1 } });
    expect(rcodeOf(m)).toBe(RCODE.BADVERS);
  });

  test("no executor answered: empty NOERROR echoing the question", async () => {
    const m = await query(s.udpPort, "Mixed.Case.test", "NS");
    expect(rcodeOf(m)).toBe(0);
    expect(m.answers).toHaveLength(0);
    expect(m.questions).toEqual([{ name: "Mixed.Case.test", type: QTYPE.NS, class: 1 }]);
    expect(m.flags & FLAG.QR).toBe(FLAG.QR);
  });
});

describe("TCP", () => {
  test("several pipelined queries on one connection are answered as each completes", async () => {
    const slow = buildQuery("slow.test", "TXT", { id: 1 });
    const fast = [2, 3, 4, 5].map((id) => buildQuery(`f${id}.test`, "MX", { id }));
    const answers = await tcpExchange(s.tcpPort, [slow, ...fast], 5);
    const ids = answers.map((a) => a.readUInt16BE(0));
    expect(ids.slice(0, 4).sort()).toEqual([2, 3, 4, 5]); // fast ones overtake the slow one
    expect(ids[4]).toBe(1);
    expect(rcodeOf(decodeMessage(answers[4]))).toBe(3);
    expect(rcodeOf(decodeMessage(answers[0]))).toBe(2);
  });

  test("frames split across writes and several frames in one write", async () => {
    const q1 = buildQuery("a.test", "MX", { id: 11 });
    const q2 = buildQuery("b.test", "MX", { id: 12 });
    const framed = Buffer.concat([q1, q2].map((q) => Buffer.concat([Buffer.from([q.length >> 8, q.length & 0xff]), q])));
    const got = await new Promise<number[]>((resolve, reject) => {
      const sock = net.connect(s.tcpPort, "127.0.0.1");
      const ids: number[] = [];
      let buf = Buffer.alloc(0);
      sock.on("error", reject);
      sock.on("connect", () => {
        sock.write(framed.subarray(0, 5));
        setTimeout(() => sock.write(framed.subarray(5)), 50);
      });
      sock.on("data", (d: Buffer) => {
        buf = Buffer.concat([buf, d]);
        while (buf.length >= 2 && buf.length >= buf.readUInt16BE(0) + 2) {
          ids.push(buf.readUInt16BE(2));
          buf = buf.subarray(buf.readUInt16BE(0) + 2);
        }
        if (ids.length === 2) {
          sock.destroy();
          resolve(ids.sort());
        }
      });
    });
    expect(got).toEqual([11, 12]);
  });

  test("an idle connection is closed after idle_timeout", async () => {
    const started = Date.now();
    await new Promise<void>((resolve, reject) => {
      const sock = net.connect(s.tcpPort, "127.0.0.1");
      sock.on("error", reject);
      sock.on("close", () => resolve());
    });
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(900);
    expect(elapsed).toBeLessThan(3000);
  });
});

describe("listen forms", () => {
  test(":port listens dual-stack (IPv4 and IPv6 clients)", async () => {
    const port = s.port("dual");
    const v4 = await udpExchange(port, buildQuery("x.test", "MX"), 2000, "127.0.0.1");
    expect(rcodeOf(decodeMessage(v4!))).toBe(2);
    const v6 = await udpExchange(port, buildQuery("x.test", "MX"), 2000, "::1");
    expect(rcodeOf(decodeMessage(v6!))).toBe(2);
  });
});
