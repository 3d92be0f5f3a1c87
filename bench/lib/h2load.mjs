// @ts-check
// DoH load for the `doh` scenario: h2load (nghttp2's HTTP/2 benchmark) sending RFC 8484 GETs for the
// scenario's names, instead of `dnsperf -m doh`. dnsperf 2.10's DoH client keeps one response buffer per
// connection and drops every response after the first that arrives in the same TLS record (its
// data-chunk callback pauses without keeping the chunk); a server that writes several HTTP/2 responses
// in one write — Node's http2 always does — loses almost all of them there (measured: 5 of 1 000
// answered), while h2load is a conforming HTTP/2 client. Answers are checked separately (`dohRcodes`).
import http2 from "node:http2";
import { closeSync, openSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { dnsperf } from "./dnsperf.mjs";
import { deadline, start, stop } from "./procs.mjs";

/** A DNS query for `name` A, ID 0 (as RFC 8484 asks), RD set. @param {string} name */
function query(name) {
  const parts = [Buffer.from([0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0])];
  for (const l of name.split(".").filter(Boolean)) parts.push(Buffer.from([l.length]), Buffer.from(l, "ascii"));
  parts.push(Buffer.from([0, 0, 1, 0, 1]));
  return Buffer.concat(parts);
}

/** The names of a dnsperf query file (`name TYPE` lines). @param {string} file */
async function names(file) {
  return (await readFile(file, "utf8")).split("\n").map((l) => l.trim().split(/\s+/)[0]).filter(Boolean);
}

/**
 * Writes h2load's input: one GET URI per name of the dnsperf query file. @param {string} file @param {number} port @param {string} out
 */
export async function writeDohUris(file, port, out) {
  const lines = (await names(file)).map((n) => `https://127.0.0.1:${port}/dns-query?dns=${query(n).toString("base64url")}`);
  await writeFile(out, lines.join("\n") + "\n");
  return lines.length;
}

/**
 * Runs h2load against the URIs in `uris`; its statistics in dnsperf's shape (no per-query latencies: h2load
 * reports mean and deviation only). A request that failed or got no 2xx counts as lost; those in flight when the
 * time is up do not count.
 * @param {{ uris: string, outFile: string, seconds?: number, requests?: number, clients: number, outstanding: number,
 *   cpus?: string | null, timeoutSeconds?: number }} o
 * @returns {Promise<import("./dnsperf.mjs").PerfRun>}
 */
export async function h2load(o) {
  const streams = Math.max(1, Math.floor(o.outstanding / o.clients));
  const args = ["-c", String(o.clients), "-m", String(streams), "-i", o.uris];
  if (o.seconds !== undefined) args.push("-D", String(o.seconds));
  else args.push("-n", String(o.requests ?? 1000));
  const command = `h2load ${args.join(" ")}`;
  const fd = openSync(o.outFile, "w");
  let p;
  try {
    p = start("h2load", "h2load", args, { cpus: o.cpus ?? null, stdoutFd: fd });
  } finally {
    closeSync(fd);
  }
  const limit = (o.timeoutSeconds ?? (o.seconds ?? 60) + 20) * 1000;
  const timer = deadline(limit);
  const timedOut = await Promise.race([p.exited.then(() => false), timer.expired.then(() => true)]);
  timer.cancel();
  if (timedOut) {
    await stop(p);
    throw new Error(`${command}: no result within ${limit / 1000} s`);
  }
  const code = await p.exited;
  const out = await readFile(o.outFile, "utf8");
  const m = /finished in ([\d.]+)(us|ms|s), ([\d.]+) req\/s/.exec(out);
  const req = /requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded/.exec(out);
  const ok2xx = /status codes: (\d+) 2xx/.exec(out);
  const mean = /time for request:\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)/.exec(out);
  if (code !== 0 || !m || !req || !ok2xx) throw new Error(`h2load exited with ${code}: ${out.split("\n").slice(-6).join(" / ")} (${command})`);
  // Requests still in flight when a -D run ends are neither answered nor lost.
  const sent = Number(req[3]);
  // A response whose status arrived just before the time was up may not count as done.
  const completed = Math.min(sent, Number(ok2xx[1]));
  /** @type {Record<string, number>} */
  const MS = { us: 0.001, ms: 1, s: 1000 };
  const unit = mean ? MS[mean[2]] ?? 1 : 1;
  return {
    stats: {
      sent,
      completed,
      lost: sent - completed,
      qps: Number(m[3]),
      avgLatencyMs: mean ? Number(mean[1]) * unit : NaN,
      rcodes: {},
      runSeconds: (Number(m[1]) * (MS[m[2]] ?? 1)) / 1000,
      command,
    },
    latencies: new Float64Array(0),
    intervalQps: [],
  };
}

/**
 * Rcodes of the answers to the first `count` names of `file`, asked over DoH (HTTP/2 GET) on one connection.
 * @param {number} port @param {string} file @param {number} count
 * @returns {Promise<import("./dnsperf.mjs").PerfStats>}
 */
export async function dohRcodes(port, file, count) {
  const list = (await names(file)).slice(0, count);
  const session = http2.connect(`https://127.0.0.1:${port}`, { rejectUnauthorized: false });
  session.on("error", () => undefined);
  /** @type {Record<string, number>} */
  const rcodes = {};
  const RCODES = ["NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED"];
  let completed = 0;
  try {
    for (const name of list) {
      const body = await new Promise((resolve, reject) => {
        const s = session.request({ ":path": `/dns-query?dns=${query(name).toString("base64url")}` });
        /** @type {Buffer[]} */
        const chunks = [];
        s.on("data", (c) => chunks.push(c));
        s.on("end", () => resolve(Buffer.concat(chunks)));
        s.on("error", reject);
        s.setTimeout(2000, () => s.close(http2.constants.NGHTTP2_CANCEL));
        s.end();
      }).catch(() => null);
      if (!(body instanceof Buffer) || body.length < 12) continue;
      completed++;
      const rc = RCODES[body[3] & 0x0f] ?? `RCODE${body[3] & 0x0f}`;
      rcodes[rc] = (rcodes[rc] ?? 0) + 1;
    }
  } finally {
    session.destroy();
  }
  return { sent: list.length, completed, lost: list.length - completed, qps: NaN, avgLatencyMs: NaN, rcodes, runSeconds: NaN, command: `DoH GET of ${list.length} names` };
}

/**
 * One load run against a server: dnsperf, or for DoH h2load over the server's URI file (`uris[port]`).
 * @param {Parameters<typeof dnsperf>[0] & { uris?: Record<number, { path: string, count: number }> }} o
 * @returns {Promise<import("./dnsperf.mjs").PerfRun>}
 */
export function load(o) {
  if (o.mode !== "doh") return dnsperf(o);
  const uris = o.uris?.[o.port];
  if (!uris) throw new Error(`no DoH URI file for port ${o.port}`);
  return h2load({ uris: uris.path, outFile: o.outFile, seconds: o.seconds, requests: o.maxRuns === undefined ? undefined : uris.count * o.maxRuns, clients: o.clients, outstanding: o.outstanding, cpus: o.cpus, timeoutSeconds: o.timeoutSeconds });
}
