// The records the recorder benchmarks write (recorder-stats into SQLite, postgres-writer into PostgreSQL):
// a deterministic mix shaped like a home network's — a few popular names and many rare ones, mostly A and
// AAAA, 12 % blocked, some failures — with the wire bytes and execution path the recorder would capture.

import { join } from "node:path";
import { pathToFileURL } from "node:url";

export const STATS_NAMES = 20_000;
export const STATS_CLIENTS = 200;

/** @param {string} dist @param {string} p */
export const load = (dist, p) => import(pathToFileURL(join(dist, p)).href);

/** A small deterministic generator (the same data every run). @param {number} seed */
export function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const TYPES = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 28, 28, 28, 28, 28, 28, 65, 65, 12, 16];

/**
 * @typedef {{ client: number, ip: string, query: Buffer, response: Buffer | null, elapsedUs: number, error: string | null,
 *   path: { sequenceTag: string, nodeIndex: number, kind: string, tag: string, outcome: string }[] }} BenchRecord
 */

/**
 * Makes one record after another from `rand` (wire bytes built once per name and type).
 * @param {string} dist the built program (dist/)
 * @param {() => number} rand
 * @returns {Promise<() => BenchRecord>}
 */
export async function recordMaker(dist, rand) {
  const { encodeMessage, replyTo } = await load(dist, "src/dns/message.js");
  const { addressRecord } = await load(dist, "src/dns/rdata.js");
  /** @type {Map<string, Buffer>} */
  const wires = new Map();
  const wire = (/** @type {string} */ key, /** @type {() => Buffer} */ make) => {
    let w = wires.get(key);
    if (!w) {
      w = make();
      wires.set(key, w);
    }
    return w;
  };
  return () => {
    const nameIx = Math.floor(STATS_NAMES * rand() ** 3);
    const name = `w${nameIx}.site${nameIx % 97}.example`;
    const client = Math.floor(STATS_CLIENTS * rand() ** 2);
    const ip = client < 190 ? `192.168.${Math.floor(client / 100)}.${client % 100}` : `fd00::${client}`;
    const qtype = TYPES[Math.floor(rand() * TYPES.length)];
    const u = rand();
    const blocked = u < 0.12;
    const kind = blocked ? "nx" : u < 0.14 ? "servfail" : u < 0.15 ? "error" : u < 0.16 ? "none" : u < 0.2 ? "refused" : "ok";
    const q = { id: 0, flags: 0x0100, questions: [{ name, type: qtype, class: 1 }], answers: [], authorities: [], additionals: [], edns: null };
    const query = wire(`q|${name}|${qtype}`, () => encodeMessage(q));
    /** @type {Buffer | null} */
    let response = null;
    if (kind !== "error" && kind !== "none") {
      response = wire(`r|${name}|${qtype}|${kind}`, () => {
        const r = replyTo(q, kind === "nx" ? 3 : kind === "servfail" ? 2 : kind === "refused" ? 5 : 0);
        if (kind === "ok" && qtype === 1) r.answers = [addressRecord(name, new Uint8Array([198, 51, 100, nameIx % 250]), 300)];
        return encodeMessage(r);
      });
    }
    const cached = !blocked && rand() < 0.6;
    const elapsedUs = blocked || cached ? 40 + Math.floor(rand() * 400) : Math.floor(1000 * Math.exp(Math.log(20) + 1.2 * (rand() + rand() + rand() - 1.5)));
    const path = [{ sequenceTag: "main", nodeIndex: 1, kind: "matcher", tag: "ads", outcome: blocked ? "matched" : "not_matched" }];
    if (blocked) path.push({ sequenceTag: "main", nodeIndex: 1, kind: "builtin", tag: "reject", outcome: "stop" });
    else {
      path.push({ sequenceTag: "main", nodeIndex: 2, kind: "executor", tag: "cache", outcome: "entered" });
      if (!cached) path.push({ sequenceTag: "main", nodeIndex: 3, kind: "executor", tag: "forward", outcome: "entered" }, { sequenceTag: "main", nodeIndex: 3, kind: "executor", tag: "forward", outcome: kind === "error" ? "error" : "next" });
      path.push({ sequenceTag: "main", nodeIndex: 2, kind: "executor", tag: "cache", outcome: cached ? "stop" : kind === "error" ? "error" : "next" });
    }
    return { client, ip, query, response, elapsedUs, error: kind === "error" ? "forward: upstream timed out" : null, path };
  };
}
