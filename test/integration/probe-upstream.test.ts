// `sluice probe upstream` against unbound started here with a test CA's certificate (UDP, TCP, DoT and
// DoH), against byte-level upstreams that answer pipelined queries out of order or hang up after one, and
// against ports where nothing answers. The compiled CLI runs as an operator runs it where its output and
// exit status are the point; the other cases call the command's module in-process (same sockets, no
// program start).
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { UsageError } from "../../src/cli-args.js";
import { decodeMessage, encodeMessage, replyTo } from "../../src/dns/message.js";
import { runProbeCommand } from "../../src/probe/command.js";
import { CLI, runCli } from "../helpers/cli.js";
import { readDocExample, startDocExample } from "../helpers/doc-example.js";
import { makePki, type Pki } from "../helpers/pki.js";
import { startRawUpstream, type RawUpstream } from "../helpers/raw-upstream.js";
import { deadUdpPort } from "../helpers/responder.js";
import { closedPort } from "../helpers/probe-targets.js";
import { tempDir } from "../helpers/sluice.js";
import { freePort } from "../helpers/ports.js";
import { startUnbound, type UnboundServer } from "../helpers/unbound.js";
import type { ProbeResult } from "../../src/probe/result.js";

interface Report {
  name: string;
  type: string;
  timeout_ms: number;
  answered: number;
  results: ProbeResult[];
}

let pki: Pki;
let unbound: UnboundServer;
/** Answers a TCP connection's first query; of the next two, the second first. EDNS size 4000. */
let reorders: RawUpstream;
/** Answers one query per TCP connection, then hangs up. */
let oneShot: RawUpstream;

function answer(frame: Buffer): Buffer {
  const reply = replyTo(decodeMessage(frame));
  if (reply.edns) reply.edns.udpSize = 4000;
  return encodeMessage(reply);
}

beforeAll(async () => {
  pki = makePki(tempDir("sluice-pki-"));
  unbound = await startUnbound({ dir: pki.dir, cert: join(pki.dir, "server.crt"), key: join(pki.dir, "server.key"), localData: ["up.test. 300 IN A 192.0.2.77"], zones: ['"up.test." redirect'] });
  reorders = await startRawUpstream({
    udp: (msg, reply) => reply(answer(msg)),
    tcp: (frame, peer) => {
      const held = peer.socket as typeof peer.socket & { held?: Buffer[] };
      held.held ??= [];
      held.held.push(frame);
      if (held.held.length === 1) peer.send(answer(frame));
      if (held.held.length === 3) for (const f of [held.held[2], held.held[1]]) peer.send(answer(f));
    },
  });
  oneShot = await startRawUpstream({
    tcp: (frame, peer) => {
      peer.send(answer(frame));
      setImmediate(() => peer.hangUp());
    },
  });
});
afterAll(async () => {
  await unbound?.stop();
  await reorders?.close();
  await oneShot?.close();
});

/** The compiled CLI with --json. */
async function probeJson(...args: string[]): Promise<{ code: number | null; report: Report }> {
  const r = await runCli(["probe", "upstream", ...args, "--json"], { timeoutMs: 20_000 });
  expect(r.stderr).toBe("");
  return { code: r.code, report: JSON.parse(r.stdout) as Report };
}

/** The command in-process, with --json. */
async function probeHere(...args: string[]): Promise<{ code: number; report: Report }> {
  let text = "";
  const code = await runProbeCommand(["upstream", ...args, "--json"], (t) => (text += t));
  return { code, report: JSON.parse(text) as Report };
}

describe("against unbound", () => {
  test("an ip:port address: UDP and TCP on it, DoT and DoH on the ports given; all answer, with times, TLS details, pipelining and the EDNS size", async () => {
    const { code, report } = await probeJson(`127.0.0.1:${unbound.dns}`, "--dot-port", String(unbound.dot), "--doh-port", String(unbound.doh), "--ca", join(pki.dir, "ca.crt"), "--name", "up.test");
    expect(code).toBe(0);
    expect(report).toMatchObject({ name: "up.test", type: "A", timeout_ms: 2000, answered: 4 });
    expect(report.results.map((r) => r.url)).toEqual([
      `udp://127.0.0.1:${unbound.dns}`,
      `tcp://127.0.0.1:${unbound.dns}`,
      `tls://127.0.0.1:${unbound.dot}`,
      `https://127.0.0.1:${unbound.doh}/dns-query`,
    ]);
    for (const r of report.results) {
      expect(r, r.url).toMatchObject({ answered: true, error: null, rcode: "NOERROR", answer_records: 1, truncated: false, edns_udp_size: expect.any(Number) as unknown });
      expect(r.response_ms, r.url).toBeGreaterThan(0);
    }
    const [udp, tcp, dot, doh] = report.results;
    expect(udp).toMatchObject({ connect_ms: null, tls_handshake_ms: null, pipelining: null });
    expect(tcp.connect_ms).toBeGreaterThan(0);
    expect(tcp.tls_handshake_ms).toBeNull();
    expect(tcp.pipelining).toMatchObject({ works: true });
    expect(dot).toMatchObject({ tls_version: "TLSv1.3", pipelining: { works: true } });
    expect(dot.tls_handshake_ms).toBeGreaterThan(0);
    expect(doh).toMatchObject({ tls_version: "TLSv1.3", alpn: "h2", pipelining: { works: true } });
    expect(udp.edns_udp_size).toBeGreaterThanOrEqual(512);
  });

  test("human output: one block per protocol and a count", async () => {
    const r = await runCli(["probe", "upstream", `tls://127.0.0.1:${unbound.dot}`, `https://127.0.0.1:${unbound.doh}/dns-query`, "--ca", join(pki.dir, "ca.crt"), "--name", "up.test"]);
    expect(r.code).toBe(0);
    const shape = r.stdout.replace(/\d+\.\d ms/g, "N ms").replaceAll(String(unbound.dot), "DOT").replaceAll(String(unbound.doh), "DOH");
    expect(shape).toMatch(/^tls:\/\/127\.0\.0\.1:DOT\n {2}connect {5}N ms\n {2}TLS {9}TLSv1\.3, (ALPN dot, )?handshake N ms\n {2}answer {6}NOERROR, 1 record, N ms\n {2}pipelining {2}yes: 2 queries sent back to back on one connection, both answered/);
    expect(shape).toContain("https://127.0.0.1:DOH/dns-query\n  connect     N ms\n  TLS         TLSv1.3, ALPN h2, handshake N ms\n  answer      NOERROR, 1 record, N ms\n  pipelining  yes: 2 requests at once on one HTTP/2 connection, both answered");
    expect(shape).toMatch(/EDNS {8}UDP size \d+\n2 of 2 answered\n$/);
  });

  test("a certificate from an unknown CA is no answer, with the reason; --insecure accepts it", async () => {
    const strict = await probeJson(`tls://127.0.0.1:${unbound.dot}`, "--name", "up.test");
    expect(strict.code).toBe(1);
    expect(strict.report.results[0]).toMatchObject({ answered: false, error: expect.stringMatching(/certificate not trusted/) as unknown });
    expect((await probeHere(`tls://127.0.0.1:${unbound.dot}`, "--name", "up.test", "--insecure")).report.results[0]).toMatchObject({ answered: true });
  });
});

describe("other upstreams", () => {
  test("pipelined answers out of order still count; the EDNS size is the upstream's", async () => {
    const { report } = await probeHere(`127.0.0.1:${reorders.port}`, "--protocols", "udp,tcp", "--name", "x.test");
    expect(report.results.map((r) => [r.protocol, r.edns_udp_size])).toEqual([
      ["udp", 4000],
      ["tcp", 4000],
    ]);
    expect(report.results[1].pipelining).toEqual({ works: true, in_order: false, detail: "2 queries sent back to back on one connection, both answered, out of order" });
  });

  test("an upstream that hangs up after one answer: answered, pipelining no", async () => {
    const { code, report } = await probeHere(`tcp://127.0.0.1:${oneShot.port}`, "--name", "x.test");
    expect(code).toBe(0);
    expect(report.results[0]).toMatchObject({ answered: true, pipelining: { works: false, in_order: null, detail: "0 of 2 queries sent back to back answered (connection closed by the upstream)" } });
  });

  test("closed ports and a silent UDP port show no answer; exit status 1", async () => {
    const tcp = await closedPort();
    const { code, report } = await probeJson(`udp://127.0.0.1:${await deadUdpPort()}`, `tcp://127.0.0.1:${tcp}`, `tls://127.0.0.1:${tcp}`, `udp://127.0.0.1:${oneShot.port}`, "--timeout", "300ms");
    expect(code).toBe(1);
    expect(report.answered).toBe(0);
    expect(report.results.map((r) => [r.protocol, r.answered, r.error])).toEqual([
      ["udp", false, "connection refused (ICMP port unreachable)"],
      ["tcp", false, "connection refused"],
      ["tls", false, "connection refused"],
      ["udp", false, "no answer within 300ms"],
    ]);
    const human = await runCli(["probe", "upstream", `tcp://127.0.0.1:${tcp}`]);
    expect(human.stdout).toBe(`tcp://127.0.0.1:${tcp}\n  no answer   connection refused\n0 of 1 answered\n`);
    expect(human.code).toBe(1);
  });

  test("a host name is resolved by the system and the address connected to reported", async () => {
    const port = await closedPort();
    const { report } = await probeHere(`tcp://localhost:${port}`);
    expect(report.results[0]).toMatchObject({ url: `tcp://localhost:${port}`, answered: false, error: "connection refused" });
    expect(report.results[0].address).toMatch(new RegExp(`^(127\\.0\\.0\\.1|\\[::1\\]):${port}$`));
  });
});

test("usage errors: the reason (exit 2 and the help from the program)", async () => {
  for (const [args, message] of [
    [["upstream"], "probe upstream needs an ADDRESS"],
    [["downstream", "1.1.1.1"], "probe needs 'upstream', not 'downstream'"],
    [["upstream", "quic://1.1.1.1"], "scheme quic:// is not supported in this build (supported: udp://, tcp://, tcp+pipeline://, tls://, https://)"],
    [["upstream", "1.1.1.1", "--timeout", "soon"], "--timeout: 'soon' is not a duration (examples: 30, 500ms, 5s, 10m, 1h, 1d)"],
    [["upstream", "1.1.1.1", "--protocols", "udp,doq"], "--protocols: 'doq' is not one of udp, tcp, tls, https"],
    [["upstream", "1.1.1.1", "--type", "BOGUS"], "--type 'BOGUS' is not a record type"],
    [["upstream", "1.1.1.1", "--dot-port", "0"], "--dot-port must be a port (1-65535), not '0'"],
    [["upstream", "1.1.1.1", "--ca", "/nonexistent/ca.pem"], "--ca: cannot read /nonexistent/ca.pem: ENOENT"],
    [["upstream", "1.1.1.1", "--bogus"], "unknown option '--bogus'"],
  ] as [string[], string][]) {
    await expect(runProbeCommand(args, () => undefined), args.join(" ")).rejects.toThrow(new UsageError(message));
  }
  const r = await runCli(["probe", "upstream", "1.1.1.1", "--timeout", "soon"]);
  expect(r.code).toBe(2);
  expect(r.stdout).toBe("");
  expect(r.stderr).toMatch(/^error: --timeout: 'soon' is not a duration .*\n\nUsage:\n {2}sluice probe upstream ADDRESS/);
  const help = await runCli(["probe", "--help"]);
  expect(help.code).toBe(0);
  expect(help.stdout).toMatch(/^Usage:\n {2}sluice probe upstream ADDRESS/);
});

test("docs/operations.md, Example: probing Sluice's own listeners, runs as printed (times aside)", async () => {
  const dir = tempDir("sluice-cert-");
  // The certificate of the DoT/DoH example in docs/plugins.md, made the way it says.
  execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "30", "-keyout", "key.pem", "-out", "cert.pem", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], { cwd: dir, stdio: "ignore" });
  const [listen, dot, doh] = [await freePort(), await freePort(), await freePort()];
  const ex = await startDocExample(
    "probing Sluice's own listeners",
    {
      listenPort: listen,
      replace: [
        ["8853", String(dot)],
        ["8443", String(doh)],
        ["127.0.0.1:5354", `127.0.0.1:${await deadUdpPort()}`],
        ["sluice probe", `node ${CLI} probe`],
      ],
      files: { "cert.pem": readFileSync(join(dir, "cert.pem"), "utf8"), "key.pem": readFileSync(join(dir, "key.pem"), "utf8") },
    },
    "operations.md",
  );
  const times = (text: string): string => text.replace(/\d+\.\d ms/g, "N ms");
  try {
    const steps = readDocExample("probing Sluice's own listeners", "operations.md").steps;
    expect(steps).toHaveLength(2);
    for (const step of steps) {
      const printed = times(step.printed).replaceAll(":5353", `:${listen}`).replaceAll("8853", String(dot)).replaceAll("8443", String(doh));
      const output = times(await ex.exec(step.command)).replace(/127\.0\.0\.1:\d+\n {2}no answer/, "127.0.0.1:5354\n  no answer");
      expect(output, step.command).toBe(printed);
    }
  } finally {
    await ex.stop();
  }
});
