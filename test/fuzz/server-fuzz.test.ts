// Fuzzes the real program (dist/bundle/cli.js in a child process) over UDP and TCP with >100 000
// random and mutated packets, then checks it is alive, still answers correctly, and that every UDP
// reply was the right answer to the packet with its ID. Seeded: set SLUICE_FUZZ_SEED to replay.

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import dgram from "node:dgram";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { rcodeName } from "../../src/dns/constants.js";
import { decodeMessage } from "../../src/dns/message.js";
import { query, rcodeOf } from "../helpers/dns.js";
import { randInt, seededRandom } from "../helpers/wire.js";
import { checkReply, expectationFor } from "./oracle.js";
import { amplifyingQuery, fuzzPacket, mutatedQuery, type Rng } from "./packets.js";

const SEED = Number(process.env.SLUICE_FUZZ_SEED ?? 0x5100ce);
const UDP_PACKETS = 70_000;
const UDP_BATCH = 100;
const TCP_CONNECTIONS = 48;
const TCP_FRAMES = 700;
const CLI = join(import.meta.dirname, "..", "..", "dist", "bundle", "cli.js");

const CONFIG = `
log: { level: info }
plugins:
  - tag: main
    type: sequence
    args:
      - exec: mark 1
      - matches: [mark 1, qname domain:blocked.test]
        exec: reject 3
      - exec: reject 5
  - tag: udp
    type: udp_server
    args: { entry: main, listen: "127.0.0.1:0" }
  - tag: tcp
    type: tcp_server
    args: { entry: main, listen: "127.0.0.1:0" }
`;

let dir = "";
let child: ChildProcessWithoutNullStreams | null = null;
const logs: Record<string, unknown>[] = [];
let stderr = "";
let udpPort = 0;
let tcpPort = 0;

beforeAll(async () => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run npm run build`);
  dir = mkdtempSync(join(tmpdir(), "sluice-fuzz-"));
  writeFileSync(join(dir, "sluice.yaml"), CONFIG);
  const proc = spawn(process.execPath, [CLI, "start", "-c", "sluice.yaml", "-d", dir], { stdio: "pipe" });
  child = proc;
  proc.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  let partial = "";
  const ports = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no listening log lines in 15 s\n${stderr}`)), 15_000);
    proc.on("exit", (code) => reject(new Error(`sluice exited with ${code} during start\n${stderr}`)));
    proc.stdout.on("data", (d: Buffer) => {
      partial += d.toString();
      const lines = partial.split("\n");
      partial = lines.pop() ?? "";
      for (const line of lines.filter((l) => l.trim())) {
        const entry = JSON.parse(line) as Record<string, unknown>;
        logs.push(entry);
        if (entry.msg === "udp server listening") udpPort = entry.port as number;
        if (entry.msg === "tcp server listening") tcpPort = entry.port as number;
      }
      if (udpPort && tcpPort) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  await ports;
  console.log(`fuzz seed ${SEED} (replay with SLUICE_FUZZ_SEED=${SEED}); sluice pid ${proc.pid} udp ${udpPort} tcp ${tcpPort}`);
});

afterAll(async () => {
  const proc = child;
  if (proc?.pid !== undefined && proc.exitCode === null && proc.signalCode === null) {
    const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
    process.kill(proc.pid, "SIGTERM");
    const timer = setTimeout(() => proc.pid !== undefined && process.kill(proc.pid, "SIGKILL"), 5_000);
    await exited;
    clearTimeout(timer);
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function alive(): boolean {
  return child !== null && child.exitCode === null && child.signalCode === null;
}

interface UdpStats {
  sent: number;
  replies: number;
  expected: number;
  missing: number;
  /** Replies by rcode name, to show which paths the fuzz reached. */
  rcodes: Record<string, number>;
  problems: string[];
}

/** Sends packets in batches, giving each a unique ID so every reply maps back to its cause. */
async function fuzzUdp(rnd: Rng, extra: Buffer[]): Promise<UdpStats> {
  const sock = dgram.createSocket("udp4");
  await new Promise<void>((resolve) => sock.bind(0, "127.0.0.1", resolve));
  sock.setRecvBufferSize(8 * 1024 * 1024);
  const stats: UdpStats = { sent: 0, replies: 0, expected: 0, missing: 0, rcodes: {}, problems: [] };
  const byId = new Map<number, { packet: Buffer; replied: boolean; batch: number }>();
  let waiting = 0;
  let wake: (() => void) | null = null;
  sock.on("message", (reply) => {
    stats.replies++;
    const entry = reply.length >= 2 ? byId.get(reply.readUInt16BE(0)) : undefined;
    if (!entry) {
      stats.problems.push(`udp: reply ${reply.toString("hex").slice(0, 80)} matches no packet sent`);
      return;
    }
    if (entry.replied) stats.problems.push(`udp: two replies for id ${reply.readUInt16BE(0)}`);
    entry.replied = true;
    const problem = checkReply(entry.packet, reply, "udp");
    if (problem) stats.problems.push(problem);
    else {
      const name = rcodeName(rcodeOf(decodeMessage(reply)));
      stats.rcodes[name] = (stats.rcodes[name] ?? 0) + 1;
    }
    if (entry.batch === currentBatch && --waiting === 0 && wake) wake();
  });
  let nextId = 0;
  let currentBatch = -1;
  const total = UDP_PACKETS + extra.length;
  for (let base = 0; base < total; base += UDP_BATCH) {
    const batch: Buffer[] = [];
    for (let i = base; i < Math.min(total, base + UDP_BATCH); i++) batch.push(i < extra.length ? extra[i] : fuzzPacket(rnd));
    currentBatch = base;
    for (const packet of batch) {
      if (packet.length >= 2) {
        const id = nextId++ & 0xffff;
        packet.writeUInt16BE(id, 0);
        byId.set(id, { packet, replied: false, batch: base });
        if (expectationFor(packet).reply) waiting++;
      }
    }
    stats.expected += waiting;
    const settled = new Promise<void>((resolve) => {
      wake = resolve;
      if (waiting === 0) resolve();
    });
    await Promise.all(batch.map((p) => new Promise<void>((resolve) => sock.send(p, udpPort, "127.0.0.1", () => resolve()))));
    stats.sent += batch.length;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([settled, new Promise((r) => (timer = setTimeout(r, 1_000)))]);
    clearTimeout(timer);
    wake = null;
    // Anything still unanswered counts as dropped; its late reply (if any) is still checked.
    stats.missing += waiting;
    waiting = 0;
    if (!alive()) break;
  }
  await new Promise((r) => setTimeout(r, 100));
  sock.close();
  return stats;
}

interface TcpStats {
  connections: number;
  frames: number;
  replies: number;
  problems: string[];
}

function frame(packet: Buffer, length = packet.length): Buffer {
  const out = Buffer.allocUnsafe(packet.length + 2);
  out.writeUInt16BE(length & 0xffff, 0);
  packet.copy(out, 2);
  return out;
}

/**
 * One connection. `clean` ones frame every packet correctly (written whole or trickled in small
 * pieces) and every reply is checked against its request; dirty ones lie in length prefixes and
 * end mid-frame, and their replies must at least be well-formed DNS messages.
 */
function fuzzTcpConnection(rnd: Rng, kind: "clean" | "trickle" | "dirty", stats: TcpStats): Promise<void> {
  const packets: Buffer[] = [];
  const byId = new Map<number, Buffer>();
  const chunks: Buffer[] = [];
  let expected = 0;
  for (let i = 0; i < TCP_FRAMES; i++) {
    const packet = rnd() < 0.5 ? mutatedQuery(rnd) : fuzzPacket(rnd);
    if (packet.length >= 2) packet.writeUInt16BE(i, 0);
    packets.push(packet);
    if (kind !== "dirty" || rnd() < 0.9) {
      chunks.push(frame(packet));
      if (packet.length >= 2) byId.set(i, packet);
      if (expectationFor(packet).reply) expected++;
      continue;
    }
    const lies = [0, Math.max(0, packet.length - randInt(rnd, 1, 20)), packet.length + randInt(rnd, 1, 300), 0xffff];
    chunks.push(frame(packet, lies[randInt(rnd, 0, lies.length - 1)]));
  }
  stats.frames += packets.length;
  stats.connections++;
  const endMidFrame = kind === "dirty" && rnd() < 0.7;
  if (endMidFrame) {
    const last = frame(mutatedQuery(rnd));
    chunks.push(last.subarray(0, randInt(rnd, 1, last.length - 1)));
    stats.frames++;
  }
  return new Promise<void>((resolve) => {
    const sock = net.connect(tcpPort, "127.0.0.1");
    let pending = Buffer.alloc(0);
    let got = 0;
    const finish = (): void => {
      clearTimeout(timer);
      sock.destroy();
      if (kind !== "dirty" && got < expected) stats.problems.push(`tcp ${kind}: ${got} of ${expected} replies`);
      resolve();
    };
    const timer = setTimeout(finish, 8_000);
    sock.on("error", () => finish());
    sock.on("close", () => finish());
    sock.on("data", (data: Buffer) => {
      pending = Buffer.concat([pending, data]);
      while (pending.length >= 2 && pending.length >= 2 + pending.readUInt16BE(0)) {
        const reply = pending.subarray(2, 2 + pending.readUInt16BE(0));
        pending = pending.subarray(2 + reply.length);
        stats.replies++;
        got++;
        if (kind === "dirty") {
          try {
            decodeMessage(reply);
          } catch (err) {
            stats.problems.push(`tcp dirty: reply does not decode (${(err as Error).message}): ${reply.toString("hex").slice(0, 80)}`);
          }
          continue;
        }
        const request = reply.length >= 2 ? byId.get(reply.readUInt16BE(0)) : undefined;
        const problem = request ? checkReply(request, reply, "tcp") : `tcp: reply with unknown id ${reply.toString("hex").slice(0, 40)}`;
        if (problem) stats.problems.push(problem);
        if (got >= expected) finish();
      }
    });
    sock.on("connect", () => {
      void (async () => {
        if (kind === "trickle") {
          const all = Buffer.concat(chunks);
          for (let pos = 0; pos < all.length && !sock.destroyed; ) {
            const n = randInt(rnd, 1, 64);
            sock.write(all.subarray(pos, pos + n));
            pos += n;
            if (rnd() < 0.05) await new Promise((r) => setImmediate(r));
          }
        } else {
          sock.write(Buffer.concat(chunks));
        }
        // Dirty connections end (or vanish) right after their last, possibly partial, frame.
        if (kind === "dirty") {
          if (endMidFrame && rnd() < 0.5) setTimeout(() => sock.destroy(), 20);
          else sock.end();
        } else if (expected === 0) finish();
      })();
    });
  });
}

async function fuzzTcp(): Promise<TcpStats> {
  const stats: TcpStats = { connections: 0, frames: 0, replies: 0, problems: [] };
  const kinds = ["clean", "trickle", "dirty"] as const;
  // A few connections at a time, each with its own PRNG stream so order of completion does not matter.
  for (let c = 0; c < TCP_CONNECTIONS; c += 4) {
    const group = [];
    for (let k = c; k < Math.min(TCP_CONNECTIONS, c + 4); k++) group.push(fuzzTcpConnection(seededRandom(SEED + 1000 + k), kinds[k % 3], stats));
    await Promise.all(group);
    if (!alive()) break;
  }
  return stats;
}

test("the servers survive >100 000 fuzzed packets and answer every well-formed one correctly", async () => {
  const started = Date.now();
  const rnd = seededRandom(SEED);
  const crafted = [amplifyingQuery(rnd), amplifyingQuery(rnd)];
  // The crafted query: FORMERR without the question echo, small, and over TCP too.
  const answers = await tcpExchangeRaw(crafted[1]);
  expect(answers.length, `no TCP answer to the amplifying query (alive: ${alive()})\n${stderr}`).toBe(1);
  expect(checkReply(crafted[1], answers[0], "tcp")).toBeNull();
  expect(answers[0].length).toBeLessThanOrEqual(512);

  const udp = await fuzzUdp(rnd, crafted.slice(0, 1));
  const tcp = await fuzzTcp();
  const seconds = (Date.now() - started) / 1000;
  const total = udp.sent + tcp.frames;
  console.log(
    `fuzz seed ${SEED}: ${total} packets in ${seconds.toFixed(1)} s — udp sent ${udp.sent}, expected replies ${udp.expected}, ` +
      `got ${udp.replies} (${JSON.stringify(udp.rcodes)}), unanswered ${udp.missing}; tcp ${tcp.connections} connections, ${tcp.frames} frames, ${tcp.replies} replies`,
  );

  expect(alive(), `sluice died:\n${stderr}`).toBe(true);
  expect(total).toBeGreaterThanOrEqual(100_000);
  expect([...udp.problems, ...tcp.problems].slice(0, 10)).toEqual([]);
  // Dropped datagrams are allowed, but a server that stops answering must not pass.
  expect(udp.missing).toBeLessThanOrEqual(udp.expected * 0.01);

  // Still answering correctly, over both transports.
  for (const tcpFlag of [false, true]) {
    const refused = await query(udpOrTcp(tcpFlag), "still.ok.example", "A", { tcp: tcpFlag, id: 4321 });
    expect([refused.id, rcodeOf(refused), refused.questions[0].name]).toEqual([4321, 5, "still.ok.example"]);
    const blocked = await query(udpOrTcp(tcpFlag), "Www.Blocked.Test", "AAAA", { tcp: tcpFlag, edns: 1232 });
    expect([rcodeOf(blocked), blocked.questions[0].name, blocked.edns !== null]).toEqual([3, "Www.Blocked.Test", true]);
  }
  expect(alive()).toBe(true);
  expect(stderr).toBe("");
  expect(logs.filter((l) => typeof l.level === "number" && l.level >= 50)).toEqual([]);
  expect(seconds).toBeLessThan(60);
}, 120_000);

function udpOrTcp(tcp: boolean): number {
  return tcp ? tcpPort : udpPort;
}

/** One framed query over a fresh connection; resolves with the replies seen before close or 3 s. */
function tcpExchangeRaw(packet: Buffer): Promise<Buffer[]> {
  return new Promise((resolve) => {
    const sock = net.connect(tcpPort, "127.0.0.1", () => sock.write(frame(packet)));
    const replies: Buffer[] = [];
    let pending = Buffer.alloc(0);
    const done = (): void => {
      clearTimeout(timer);
      sock.destroy();
      resolve(replies);
    };
    const timer = setTimeout(done, 3_000);
    sock.on("error", done);
    sock.on("data", (d: Buffer) => {
      pending = Buffer.concat([pending, d]);
      if (pending.length >= 2 && pending.length >= 2 + pending.readUInt16BE(0)) {
        replies.push(pending.subarray(2, 2 + pending.readUInt16BE(0)));
        done();
      }
    });
  });
}
