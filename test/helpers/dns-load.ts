// Steady DNS load from a separate process, so that what the test process does meanwhile (building a
// 180 MB body, parsing JSON) never shows up as a server stall. The child sends `qps` UDP queries a
// second for distinct names under `zone` and, when stopped, reports: sent, answered, latency
// percentiles, and the longest gap between two answers while queries were outstanding. It also
// reports its own worst timer lateness, so a gap caused by the load generator being descheduled
// can be told from one caused by the server.

import { spawn } from "node:child_process";

export interface DnsLoadReport {
  sent: number;
  answered: number;
  lost: number;
  p50: number;
  p99: number;
  max: number;
  /** Longest time without any answer while a query was waiting (counted from the later of the previous answer and that query's send), ms. */
  longestGapMs: number;
  /** Worst lateness of the generator's own 2 ms send timer, ms (its own scheduling, not the server's). */
  selfLateMs: number;
}

export interface DnsLoad {
  /** Stops sending, waits `drainMs` for late answers, and reports. */
  stop(drainMs?: number): Promise<DnsLoadReport>;
}

const SCRIPT = `
import dgram from "node:dgram";
const port = Number(process.env.PORT), qps = Number(process.env.QPS), zone = process.env.ZONE;
const sock = dgram.createSocket("udp4");
const sentAt = new Float64Array(65536);
const latencies = [];
let sent = 0, outstanding = 0, lastAnswer = 0, longestGap = 0, selfLate = 0, running = true;
function query(i) {
  const labels = ["q" + i, ...zone.split(".")];
  const parts = [Buffer.from([(i >> 8) & 0xff, i & 0xff, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0])];
  for (const l of labels) parts.push(Buffer.from([l.length]), Buffer.from(l, "latin1"));
  parts.push(Buffer.from([0, 0, 1, 0, 1]));
  return Buffer.concat(parts);
}
sock.on("message", (msg) => {
  const id = msg.readUInt16BE(0);
  const now = performance.now();
  if (sentAt[id] > 0) {
    latencies.push(now - sentAt[id]);
    // Waiting only counts from when this query was sent: a pause of the generator itself is no gap.
    longestGap = Math.max(longestGap, now - Math.max(lastAnswer, sentAt[id]));
    sentAt[id] = 0;
    outstanding--;
    lastAnswer = now;
  }
});
sock.bind(0, "127.0.0.1", () => {
  const start = performance.now();
  let lastTick = start;
  const tick = setInterval(() => {
    const now = performance.now();
    selfLate = Math.max(selfLate, now - lastTick - 2);
    lastTick = now;
    if (!running) return;
    const due = Math.floor(((now - start) * qps) / 1000);
    for (; sent < due; sent++) {
      const id = sent & 0xffff;
      if (sentAt[id] > 0) outstanding--; // never answered: counted lost at the end
      sentAt[id] = performance.now();
      outstanding++;
      sock.send(query(id), port, "127.0.0.1");
    }
  }, 2);
  process.stdout.write("ready\\n");
  process.stdin.on("data", (d) => {
    running = false;
    const drain = Number(String(d).trim()) || 1000;
    setTimeout(() => {
      clearInterval(tick);
      // A stall still running at the end counts too.
      if (outstanding > 0) longestGap = Math.max(longestGap, performance.now() - drain - lastAnswer);
      latencies.sort((a, b) => a - b);
      const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? -1;
      const report = { sent, answered: latencies.length, lost: sent - latencies.length, p50: at(0.5), p99: at(0.99), max: latencies[latencies.length - 1] ?? -1, longestGapMs: longestGap, selfLateMs: selfLate };
      process.stdout.write("report " + JSON.stringify(report) + "\\n");
      sock.close();
      process.exit(0);
    }, drain);
  });
});
`;

/** Starts the generator against 127.0.0.1:`port`; resolves once it sends. */
export async function startDnsLoad(port: number, qps: number, zone = "load.test"): Promise<DnsLoad> {
  const child = spawn(process.execPath, ["--input-type=module", "-e", SCRIPT], { env: { ...process.env, PORT: String(port), QPS: String(qps), ZONE: zone } });
  let out = "";
  let err = "";
  child.stderr.on("data", (d: Buffer) => (err += d.toString()));
  const waitFor = (re: RegExp, ms: number): Promise<RegExpMatchArray> =>
    new Promise((resolve, reject) => {
      const check = (): boolean => {
        const m = re.exec(out);
        if (m) {
          child.stdout.off("data", onData);
          clearTimeout(timer);
          resolve(m);
        }
        return m !== null;
      };
      const onData = (d: Buffer): void => {
        out += d.toString();
        check();
      };
      const timer = setTimeout(() => {
        child.stdout.off("data", onData);
        reject(new Error(`dns load generator: no ${re} in ${ms} ms; stderr: ${err}`));
      }, ms);
      child.stdout.on("data", onData);
      check();
    });
  await waitFor(/ready\n/, 10_000);
  return {
    async stop(drainMs = 1000) {
      child.stdin.write(`${drainMs}\n`);
      const m = await waitFor(/report (.*)\n/, drainMs + 10_000);
      return JSON.parse(m[1]) as DnsLoadReport;
    },
  };
}

export const formatLoad = (r: DnsLoadReport): string =>
  `DNS ${r.answered}/${r.sent} answered (${r.lost} lost), p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms, max ${r.max.toFixed(0)} ms, longest gap ${r.longestGapMs.toFixed(0)} ms (generator's own lateness ${r.selfLateMs.toFixed(0)} ms)`;
