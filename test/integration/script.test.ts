// `script` over real sockets and real child processes: a small Node program written by the test is run
// per DNS query (never through a shell) with the query as JSON on stdin, in SLUICE_* variables and in
// templated arguments and env; its exit code continues or stops the pipeline (visible in the DNS
// answer), other codes apply error_mode; the timeout kills the program and what it started; at most
// max_concurrent run, queue_size wait, the rest are dropped; async runs never hold the query; output is
// capped; `sluice check` and start-up refuse bad args.
import { readFileSync, existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import { checkErrors } from "../helpers/check.js";
import { query, rcodeOf } from "../helpers/dns.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import { HeldFile, until } from "../model/harness.js";

/** The program: records what it got, then behaves by the query name's first label. */
const HOOK = `
import { appendFileSync, readFileSync } from "node:fs";
const stdin = JSON.parse(readFileSync(0, "utf8"));
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith("SLUICE_") || k === "EXTRA"));
appendFileSync("calls.jsonl", JSON.stringify({ argv: process.argv.slice(2), env, stdin, cwd: process.cwd() }) + "\\n");
const label = stdin.qname.split(".")[0];
if (label === "stop") process.exit(1);
if (label === "seven") process.exit(7);
if (label === "loud") { process.stdout.write("x".repeat(100000)); process.stderr.write("e".repeat(100000)); }
if (label === "wait") readFileSync("gate.fifo");
`;

function config(args: string, rules = ["exec: $hook", "exec: reject 3"]): string {
  return `api:
  http: 127.0.0.1:0
plugins:
  - tag: hook
    type: script
    args: { command: "${process.execPath}", ${args} }
  - tag: main
    type: sequence
    args:
${rules.map((r) => `      - ${r}`).join("\n")}
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;
}

/** Waits until an asynchronous check holds (polled every 10 ms). */
async function eventually(what: string, check: () => Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const metric = async (s: RunningSluice, name: string, labels = 'plugin_tag="hook"'): Promise<number> => {
  const text = await (await s.api("/api/metrics")).text();
  const m = new RegExp(`^${name}\\{${labels}\\} (\\d+)`, "m").exec(text);
  return m ? Number(m[1]) : 0;
};

type Call = { argv: string[]; env: Record<string, string>; stdin: Record<string, unknown>; cwd: string };
const calls = (s: RunningSluice): Call[] => {
  const path = join(s.dir, "calls.jsonl");
  // Whole lines only: a script may be writing the last one right now.
  const text = existsSync(path) ? readFileSync(path, "utf8") : "";
  return text.slice(0, text.lastIndexOf("\n") + 1).split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as Call);
};

/** Whether a process still runs (a zombie waiting for its parent counts as gone). */
function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

let running: RunningSluice | null = null;
let gate: HeldFile | null = null;
async function start(yaml: string): Promise<RunningSluice> {
  running = await startSluice(yaml, { "hook.mjs": HOOK });
  return running;
}
afterEach(async () => {
  await gate?.close();
  gate = null;
  await running?.stop();
  running = null;
});

describe("the query reaches the program", () => {
  test("as JSON on stdin, SLUICE_* variables, templated args and env; exit 0 continues", async () => {
    const s = await start(config(`args: [hook.mjs, "\${qname}", "{qtype_name}", "literal $$HOME"], env: { EXTRA: "from \${client_ip}" }`, ["exec: mark 5", "exec: $hook", "exec: reject 3"]));
    expect(rcodeOf(await query(s.udpPort, "Run.Example", "AAAA"))).toBe(3);
    const [c] = calls(s);
    expect(c.argv).toEqual(["run.example", "AAAA", "literal $HOME"]);
    expect(c.cwd).toBe(s.dir);
    expect(c.env).toMatchObject({ SLUICE_QNAME: "run.example", SLUICE_QTYPE: "28", SLUICE_QTYPE_NAME: "AAAA", SLUICE_CLIENT_IP: "127.0.0.1", SLUICE_MARKS: "5", SLUICE_HAS_RESP: "false", SLUICE_RCODE: "", EXTRA: "from 127.0.0.1" });
    expect(c.stdin).toMatchObject({ qname: "run.example", qtype: 28, qtype_name: "AAAA", qclass: 1, qclass_name: "IN", client_ip: "127.0.0.1", marks: [5], has_resp: false, rcode: null, rcode_name: null, resp_ip: [], cron_job_name: null });
    expect(typeof c.stdin.client_port).toBe("number");
    expect(await metric(s, "script_run_total")).toBe(1);
  });
});

describe("the exit code decides", () => {
  test("a code in stop_exit_codes stops the pipeline; another code applies error_mode (continue)", async () => {
    const s = await start(config(`args: [hook.mjs], stop_exit_codes: [1]`));
    expect(rcodeOf(await query(s.udpPort, "ok.example", "A"))).toBe(3);
    // Stopped before `reject 3`: no response, so the server answers an empty NOERROR.
    const stopped = await query(s.udpPort, "stop.example", "A");
    expect([rcodeOf(stopped), stopped.answers.length]).toEqual([0, 0]);
    expect(rcodeOf(await query(s.udpPort, "seven.example", "A"))).toBe(3);
    expect(await metric(s, "script_stop_total")).toBe(1);
    expect(await metric(s, "script_error_total", 'plugin_tag="hook",reason="exit"')).toBe(1);
    expect(s.logs.find((l) => l.msg === "script failed" && l.level === 40)).toMatchObject({ reason: "exit", code: 7, err: "exit code 7" });
  });

  test.each([
    ["stop", 0],
    ["fail", 2],
  ])("exit 1 without stop_exit_codes is an error: error_mode %s → rcode %i", async (mode, rcode) => {
    const s = await start(config(`args: [hook.mjs], error_mode: ${mode}`));
    expect(rcodeOf(await query(s.udpPort, "stop.example", "A"))).toBe(rcode);
    expect(rcodeOf(await query(s.udpPort, "fine.example", "A"))).toBe(3);
  });
});

describe("bounds", () => {
  test("the timeout kills the program and what it started; error_mode applies", async () => {
    // A shell starts in a few milliseconds (a Node program may take longer than the timeout on a busy
    // machine). It writes its own pid and its child's, then waits. `$$$$` is the template for sh's `$$`.
    const s = await start(config(`args: [-c, "echo $$$$ > pids; sleep 1000 & echo $! >> pids; wait"], timeout: 500ms, error_mode: fail`).replace(process.execPath, "/bin/sh"));
    const began = performance.now();
    expect(rcodeOf(await query(s.udpPort, "hang.example", "A", { timeoutMs: 5000 }))).toBe(2);
    expect(performance.now() - began).toBeGreaterThanOrEqual(450);
    const pids = readFileSync(join(s.dir, "pids"), "utf8").trim().split("\n").map(Number);
    expect(pids).toHaveLength(2);
    await until("the program and its child to be gone", () => pids.every((p) => !alive(p)), 5000);
    expect(await metric(s, "script_error_total", 'plugin_tag="hook",reason="timeout"')).toBe(1);
  });

  test("max_concurrent run, queue_size wait, the next is dropped at once (counted, error_mode stop)", async () => {
    const s = await start(config(`args: [hook.mjs], max_concurrent: 1, queue_size: 1, error_mode: stop`));
    gate = new HeldFile(join(s.dir, "gate.fifo"), "go");
    const first = query(s.udpPort, "wait.example", "A", { timeoutMs: 10_000 });
    await until("the first run to start", () => calls(s).length === 1);
    const second = query(s.udpPort, "wait.example", "A", { timeoutMs: 10_000 });
    await eventually("the second to be queued", async () => (await metric(s, "script_queued")) === 1);
    // The third finds both places taken: dropped, so error_mode stop answers (empty NOERROR) at once.
    const third = await query(s.udpPort, "third.example", "A", { timeoutMs: 2000 });
    expect(rcodeOf(third)).toBe(0);
    expect(await metric(s, "script_dropped_total")).toBe(1);
    expect(calls(s)).toHaveLength(1);
    gate.grant();
    expect(rcodeOf(await first)).toBe(3);
    await until("the queued run to start", () => calls(s).length === 2);
    gate.grant();
    expect(rcodeOf(await second)).toBe(3);
    expect(await metric(s, "script_run_total")).toBe(2);
    expect(await metric(s, "script_queued")).toBe(0);
  });

  test("async: the query does not wait for the program; with queue_size 0 only max_concurrent runs are taken", async () => {
    const s = await start(config(`args: [hook.mjs], async: true, max_concurrent: 1, queue_size: 0`));
    gate = new HeldFile(join(s.dir, "gate.fifo"), "go");
    expect(rcodeOf(await query(s.udpPort, "wait.example", "A", { timeoutMs: 2000 }))).toBe(3);
    await until("the run to start", () => calls(s).length === 1);
    expect(rcodeOf(await query(s.udpPort, "wait.example", "A", { timeoutMs: 2000 }))).toBe(3);
    expect(await metric(s, "script_dropped_total")).toBe(1);
    gate.grant();
    await eventually("the run to be counted", async () => (await metric(s, "script_run_total")) === 1);
    expect(calls(s)).toHaveLength(1);
  });

  test("output past max_output_bytes is discarded", async () => {
    const s = await start(config(`args: [hook.mjs], max_output_bytes: 10`));
    expect(rcodeOf(await query(s.udpPort, "loud.example", "A"))).toBe(3);
    expect(s.logs.find((l) => l.msg === "script finished")).toMatchObject({ stdout: "xxxxxxxxxx", stderr: "eeeeeeeeee", truncated: true, code: 0 });
  });
});

describe("bad args", () => {
  const check = (args: string): string => {
    const dir = tempDir();
    writeFileSync(join(dir, "sluice.yaml"), config(args).replace("api:\n  http: 127.0.0.1:0\n", ""));
    return checkErrors(join(dir, "sluice.yaml"));
  };
  test.each([
    ["an unknown key", `args: ["$\${nope}"]`, /sluice\.yaml:4:\d+: error: plugin 'hook': args\.args\[0\]: unknown template key '\$\{nope\}'/],
    ["an env name", `env: { "A-B": x }`, /sluice\.yaml:4:\d+: error: plugin 'hook': args\.env\.A-B: 'A-B' is not an environment variable name/],
    ["a timeout", `timeout: 0ms`, /args\.timeout: timeout must be between 1ms and 1h/],
    ["an exit code", `stop_exit_codes: [0]`, /args\.stop_exit_codes\[0\]/],
  ])("%s", (_what, args, message) => {
    expect(check(args)).toMatch(message);
  });

  test("a command that is not there fails the start, located", async () => {
    await expect(startSluice(config("args: []").replace(process.execPath, "/nonexistent/hook"))).rejects.toThrow(/\/nonexistent\/hook is not an executable file/);
    await expect(startSluice(config("args: []").replace(process.execPath, "no-such-program-here"))).rejects.toThrow(/'no-such-program-here' is not found on PATH/);
    await expect(startSluice(config("cwd: no-such-dir"))).rejects.toThrow(/no-such-dir is not a directory/);
  });
});
