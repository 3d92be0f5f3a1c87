// Reload without loss: a UDP and a TCP query load run while 20 reloads happen (some with a changed
// configuration, some with a broken one). Every query is answered; a broken reload leaves the old
// configuration serving and /api/reload/status says failed, with the error.
import dgram from "node:dgram";
import net from "node:net";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { decodeMessage } from "../../src/dns/message.js";
import { answerIps, query, buildQuery } from "../helpers/dns.js";
import { apiYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

const config = (answer: string): string => apiYaml(`black_hole ${answer}`);
// Ports must stay the same across reloads, so after the first start the file names them.
const pinned = (answer: string, udp: number, tcp: number, api: number): string =>
  apiYaml(`black_hole ${answer}`, { api: `127.0.0.1:${api}`, udp: `127.0.0.1:${udp}`, tcp: `127.0.0.1:${tcp}` });

const BROKEN = [
  "plugins:\n  - tag: main\n    type: sequence\n    args: [ { exec: black_hole 10.9.9.9 }\n", // YAML syntax
  "plugins:\n  - { tag: main, type: no_such_plugin }\n", // unknown type
  "plugins:\n  - { tag: main, type: sequence, args: [{ exec: $missing }] }\n", // missing reference
];

let s: RunningSluice;
let udpPort = 0;
let tcpPort = 0;
beforeAll(async () => {
  s = await startSluice(config("10.0.0.1"));
  udpPort = s.udpPort;
  tcpPort = s.tcpPort;
  writeFileSync(join(s.dir, "sluice.yaml"), pinned("10.0.0.1", udpPort, tcpPort, Number(new URL(s.apiUrl).port)));
});
afterAll(() => s.stop());

interface LoadStats {
  sent: number;
  answered: number;
  lost: number;
  answers: Set<string>;
}

/** Keeps `concurrency` UDP queries in flight until stopped; a query unanswered for 2 s is lost. */
function udpLoad(port: number, concurrency: number): { stop(): Promise<LoadStats> } {
  const stats: LoadStats = { sent: 0, answered: 0, lost: 0, answers: new Set() };
  const sock = dgram.createSocket("udp4");
  const pending = new Map<number, NodeJS.Timeout>();
  let running = true;
  let nextId = 1;
  const send = (): void => {
    if (!running) return;
    const id = nextId++ & 0xffff || nextId++;
    stats.sent++;
    pending.set(id, setTimeout(() => {
      pending.delete(id);
      stats.lost++;
      send();
    }, 2000));
    sock.send(buildQuery("load.test", "A", { id }), port, "127.0.0.1");
  };
  sock.on("message", (msg) => {
    const id = msg.readUInt16BE(0);
    const timer = pending.get(id);
    if (!timer) return;
    clearTimeout(timer);
    pending.delete(id);
    stats.answered++;
    for (const ip of answerIps(decodeMessage(msg))) stats.answers.add(ip);
    send();
  });
  sock.bind(0, "127.0.0.1", () => {
    for (let i = 0; i < concurrency; i++) send();
  });
  return {
    async stop() {
      running = false;
      while (pending.size > 0) await new Promise((r) => setTimeout(r, 20));
      sock.close();
      return stats;
    },
  };
}

/** One TCP connection with `depth` pipelined queries in flight until stopped. */
function tcpLoad(port: number, depth: number): { stop(): Promise<LoadStats> } {
  const stats: LoadStats = { sent: 0, answered: 0, lost: 0, answers: new Set() };
  const sock = net.connect(port, "127.0.0.1");
  let running = true;
  let inflight = 0;
  let buf = Buffer.alloc(0);
  let closed = false;
  sock.on("close", () => (closed = true));
  sock.on("error", () => (closed = true));
  const send = (): void => {
    if (!running || closed) return;
    const q = buildQuery("load.test", "A", { id: (stats.sent + 1) & 0xffff });
    stats.sent++;
    inflight++;
    sock.write(Buffer.concat([Buffer.from([q.length >> 8, q.length & 0xff]), q]));
  };
  sock.on("connect", () => {
    for (let i = 0; i < depth; i++) send();
  });
  sock.on("data", (d: Buffer) => {
    buf = Buffer.concat([buf, d]);
    while (buf.length >= 2 && buf.length >= buf.readUInt16BE(0) + 2) {
      const len = buf.readUInt16BE(0);
      const m = decodeMessage(buf.subarray(2, 2 + len));
      buf = buf.subarray(2 + len);
      inflight--;
      stats.answered++;
      for (const ip of answerIps(m)) stats.answers.add(ip);
      send();
    }
  });
  return {
    async stop() {
      running = false;
      const deadline = Date.now() + 3000;
      while (inflight > 0 && !closed && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      stats.lost = inflight;
      sock.destroy();
      return stats;
    },
  };
}

async function reloadAndWait(): Promise<Record<string, unknown>> {
  const before = (await (await s.api("/api/reload/status")).json()) as { last_completed_ms: number | null };
  const res = await s.api("/api/reload", { method: "POST" });
  expect(res.status).toBe(202);
  for (;;) {
    const status = (await (await s.api("/api/reload/status")).json()) as Record<string, unknown>;
    if ((status.status === "ok" || status.status === "failed") && status.last_completed_ms !== before.last_completed_ms) return status;
    await new Promise((r) => setTimeout(r, 10));
  }
}

test("20 reloads under UDP and TCP load: every query answered; broken reloads keep the old config", async () => {
  const udp = udpLoad(udpPort, 16);
  const tcp = tcpLoad(tcpPort, 8);
  const api = Number(new URL(s.apiUrl).port);
  let serving = "10.0.0.1";
  for (let i = 1; i <= 20; i++) {
    const broken = i % 3 === 0;
    if (broken) {
      writeFileSync(join(s.dir, "sluice.yaml"), BROKEN[i % BROKEN.length]);
    } else {
      serving = `10.0.${i}.1`;
      writeFileSync(join(s.dir, "sluice.yaml"), pinned(serving, udpPort, tcpPort, api));
    }
    const status = await reloadAndWait();
    if (broken) {
      expect(status.status).toBe("failed");
      expect(String(status.last_error)).toMatch(/sluice\.yaml:\d+:\d+: error: /);
    } else {
      expect(status.status).toBe("ok");
      expect(status.last_error).toBeNull();
    }
    // Whatever happened, the configuration that last loaded fine is what answers.
    expect(answerIps(await query(udpPort, "check.test"))).toEqual([serving]);
    expect(answerIps(await query(tcpPort, "check.test", "A", { tcp: true }))).toEqual([serving]);
    await new Promise((r) => setTimeout(r, 30)); // let the load run a little between reloads
  }
  const [u, t] = await Promise.all([udp.stop(), tcp.stop()]);
  expect(u.lost).toBe(0);
  expect(t.lost).toBe(0);
  expect(u.answered).toBe(u.sent);
  expect(t.answered).toBe(t.sent);
  expect(u.answered).toBeGreaterThan(500);
  expect(t.answered).toBeGreaterThan(500);
  // Answers came from old and new generations alike: the load really spanned the reloads.
  expect(u.answers.size).toBeGreaterThan(5);
  expect(s.app.generation).toBeGreaterThan(10);
  const actors = (await (await s.api("/api/actors")).json()) as { actors: { id: string; state: unknown }[] };
  const runtimes = actors.actors.filter((a) => /^runtime:\d+$/.test(a.id));
  expect(runtimes).toHaveLength(1); // old generations are gone
  expect(runtimes[0].state).toBe("active");
}, 60_000);
