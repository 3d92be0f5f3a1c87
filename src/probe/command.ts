// sluice probe upstream ADDRESS...: asks an upstream one query over each protocol and reports what
// answers, how long the TCP connect, the TLS handshake and the answer took, whether two queries sent back
// to back on one connection are both answered, and the EDNS UDP size the upstream advertises.

import { lookup } from "node:dns/promises";
import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import { parseArguments, UsageError, type OptionSpec } from "../cli-args.js";
import { parseType, QCLASS, typeName } from "../dns/constants.js";
import { encodeMessage } from "../dns/message.js";
import { checkName } from "../dns/name.js";
import { parseDuration } from "../engine/duration.js";
import { DEFAULT_DOH_PATH, hostPort, parseUpstreamAddr } from "../engine/upstream/address.js";
import { probeDoh } from "./doh.js";
import { emptyResult, failureText, type ProbeProtocol, type ProbeResult, type ProbeSettings, type ProbeTarget } from "./result.js";
import { probeStream } from "./stream.js";
import { probeUdp } from "./udp.js";

export const PROBE_HELP = `Usage:
  sluice probe upstream ADDRESS... [options]

Asks each upstream one query over each protocol and reports which answer: the TCP connect and TLS
handshake times, the response time, whether two queries sent back to back on one connection are both
answered (pipelining), and the EDNS UDP size the upstream advertises.

ADDRESS:
  ip[:port], host[:port]    UDP and TCP on that port (default 53), DoT on --dot-port, DoH on --doh-port
  udp://, tcp://, tls://host[:853], https://host[:443]/path
                            that protocol only

Options:
  --name NAME               query name (default: ${"example.com"})
  --type TYPE               query type (default: A)
  --timeout DURATION        limit of each step: connect, TLS handshake, answer (default: 2s)
  --protocols LIST          for ip[:port] addresses, which of udp,tcp,tls,https (default: all four)
  --dot-port PORT           DoT port for ip[:port] addresses (default: 853)
  --doh-port PORT           DoH port for ip[:port] addresses (default: 443)
  --doh-path PATH           DoH path for ip[:port] addresses (default: ${DEFAULT_DOH_PATH})
  --ca FILE                 PEM CA certificates that DoT and DoH certificates must chain to
                            (default: Node's trust store)
  --insecure                accept any certificate (testing only)
  --json                    print the results as JSON

Exit status: 0 when some protocol answered, 1 when none did, 2 for a mistake on the command line.
`;

const DEFAULT_NAME = "example.com";
const DEFAULT_TIMEOUT = "2s";
const PROTOCOLS: readonly ProbeProtocol[] = ["udp", "tcp", "tls", "https"];

const OPTIONS: OptionSpec = {
  name: { type: "string" },
  type: { type: "string" },
  timeout: { type: "string" },
  protocols: { type: "string" },
  "dot-port": { type: "string" },
  "doh-port": { type: "string" },
  "doh-path": { type: "string" },
  ca: { type: "string" },
  insecure: { type: "boolean" },
  json: { type: "boolean" },
};

interface Command {
  targets: ProbeTarget[];
  name: string;
  type: number;
  settings: ProbeSettings;
  json: boolean;
}

function port(text: string | undefined, option: string, fallback: number): number {
  if (text === undefined) return fallback;
  if (!/^\d{1,5}$/.test(text) || Number(text) < 1 || Number(text) > 65_535) throw new UsageError(`${option} must be a port (1-65535), not '${text}'`);
  return Number(text);
}

function target(protocol: ProbeProtocol, host: string, p: number, path: string): ProbeTarget {
  return { protocol, host, port: p, path, url: `${protocol}://${hostPort(host, p)}${protocol === "https" ? path : ""}` };
}

function parse(argv: string[]): Command {
  const [sub, ...rest] = argv;
  if (sub !== "upstream") throw new UsageError(`probe needs 'upstream'${sub === undefined ? "" : `, not '${sub}'`}`);
  const { values, positionals } = parseArguments(rest, OPTIONS);
  const str = (k: string): string | undefined => values[k] as string | undefined;
  if (positionals.length === 0) throw new UsageError("probe upstream needs an ADDRESS");
  const name = (str("name") ?? DEFAULT_NAME).replace(/\.$/, "");
  if (checkName(name) !== null) throw new UsageError(`--name '${name}' is not a domain name: ${String(checkName(name))}`);
  const type = parseType(str("type") ?? "A");
  if (type === undefined) throw new UsageError(`--type '${String(str("type"))}' is not a record type`);
  let timeoutMs: number;
  try {
    timeoutMs = parseDuration(str("timeout") ?? DEFAULT_TIMEOUT);
  } catch (err) {
    throw new UsageError(`--timeout: ${(err as Error).message}`);
  }
  if (timeoutMs < 1 || timeoutMs > 60_000) throw new UsageError("--timeout must be between 1ms and 60s");
  const protocols = (str("protocols") ?? PROTOCOLS.join(",")).split(",").map((p) => p.trim().toLowerCase());
  for (const p of protocols) if (!(PROTOCOLS as readonly string[]).includes(p)) throw new UsageError(`--protocols: '${p}' is not one of ${PROTOCOLS.join(", ")}`);
  const dotPort = port(str("dot-port"), "--dot-port", 853);
  const dohPort = port(str("doh-port"), "--doh-port", 443);
  const dohPath = str("doh-path") ?? DEFAULT_DOH_PATH;
  if (!dohPath.startsWith("/")) throw new UsageError("--doh-path must start with /");
  let ca: Buffer | undefined;
  if (str("ca") !== undefined) {
    try {
      ca = readFileSync(str("ca") as string);
    } catch (err) {
      throw new UsageError(`--ca: cannot read ${String(str("ca"))}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  }
  const targets: ProbeTarget[] = [];
  for (const addr of positionals) {
    let a: ReturnType<typeof parseUpstreamAddr>;
    try {
      a = parseUpstreamAddr(addr);
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
    if (addr.includes("://")) targets.push(target(a.protocol, a.host, a.port, a.path ?? DEFAULT_DOH_PATH));
    else for (const p of PROTOCOLS.filter((x) => protocols.includes(x))) targets.push(target(p, a.host, p === "tls" ? dotPort : p === "https" ? dohPort : a.port, dohPath));
  }
  const query = encodeMessage({
    id: 0,
    flags: 0x0100,
    questions: [{ name, type, class: QCLASS.IN }],
    answers: [],
    authorities: [],
    additionals: [],
    edns: { udpSize: 1232, extRcode: 0, version: 0, flags: 0, options: [] },
  });
  return { targets, name, type, settings: { query: Buffer.from(query), timeoutMs, ca, insecure: values.insecure === true }, json: values.json === true };
}

async function probeOne(t: ProbeTarget, settings: ProbeSettings): Promise<ProbeResult> {
  let ip = t.host;
  if (isIP(ip) === 0) {
    try {
      ip = (await lookup(t.host)).address;
    } catch (err) {
      const result = emptyResult(t, null);
      result.error = `cannot resolve ${t.host}: ${(err as NodeJS.ErrnoException).code ?? failureText(err)}`;
      return result;
    }
  }
  if (t.protocol === "udp") return probeUdp(t, ip, settings);
  if (t.protocol === "https") return probeDoh(t, ip, settings);
  return probeStream(t, ip, settings);
}

const ms = (v: number): string => `${v.toFixed(1)} ms`;
const line = (label: string, text: string): string => `  ${label.padEnd(11)} ${text}`;

/** The human report of one result. */
export function describeResult(r: ProbeResult): string[] {
  const out = [r.url];
  if (r.connect_ms !== null) out.push(line("connect", ms(r.connect_ms)));
  if (r.tls_handshake_ms !== null) out.push(line("TLS", `${r.tls_version ?? "?"}${r.alpn ? `, ALPN ${r.alpn}` : ""}, handshake ${ms(r.tls_handshake_ms)}`));
  if (r.answered) {
    const n = r.answer_records ?? 0;
    out.push(line("answer", `${r.rcode ?? "?"}${r.truncated ? ", truncated (TC)" : ""}, ${n} record${n === 1 ? "" : "s"}, ${ms(r.response_ms ?? 0)}`));
    if (r.pipelining) out.push(line("pipelining", `${r.pipelining.works ? "yes" : "no"}: ${r.pipelining.detail}`));
    out.push(line("EDNS", r.edns_udp_size === null ? "no OPT record in the answer" : `UDP size ${r.edns_udp_size}`));
  } else {
    out.push(line("no answer", r.error ?? "unknown"));
  }
  return out;
}

/** Runs `sluice probe ...`; returns the exit status. */
export async function runProbeCommand(argv: string[], out: (text: string) => void = (t) => process.stdout.write(t)): Promise<number> {
  const cmd = parse(argv);
  const results: ProbeResult[] = [];
  // One at a time: the times are not shared with another probe's work.
  for (const t of cmd.targets) results.push(await probeOne(t, cmd.settings));
  const answered = results.filter((r) => r.answered).length;
  if (cmd.json) {
    out(JSON.stringify({ name: cmd.name, type: typeName(cmd.type), timeout_ms: cmd.settings.timeoutMs, answered, results }, null, 2) + "\n");
  } else {
    out(results.flatMap(describeResult).join("\n") + `\n${answered} of ${results.length} answered\n`);
  }
  return answered > 0 ? 0 : 1;
}
