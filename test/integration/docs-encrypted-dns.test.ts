// The DoT + DoH example of docs/plugins.md run as printed: its openssl command makes the
// certificate, its configuration runs in the real program (ports changed to ephemeral ones, and
// the commands changed to match), and its dig, kdig and curl commands get the documented answers.
import { execFile } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, test } from "vitest";
import { decodeMessage } from "../../src/dns/message.js";
import { startCli, type RunningCli } from "../helpers/cli.js";
import { answerIps } from "../helpers/dns.js";
import { tempDir } from "../helpers/sluice.js";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..", "..");
const dir = tempDir();
let cli: RunningCli;
const ports = { dot: 0, doh: 0 };

/** The fenced blocks of the example section, in order. */
function exampleBlocks(): string[] {
  const doc = readFileSync(join(root, "docs", "plugins.md"), "utf8");
  const start = doc.indexOf("#### Example: DoT and DoH with a test certificate");
  const section = doc.slice(start, doc.indexOf("\n#", start + 10));
  return [...section.matchAll(/```(?:sh|yaml)\n([\s\S]*?)```/g)].map((m) => m[1]);
}

const sh = async (command: string): Promise<string> => (await run("bash", ["-o", "pipefail", "-c", command], { cwd: dir, timeout: 10_000 })).stdout;
const localize = (command: string): string => command.replaceAll("-p 8853", `-p ${ports.dot}`).replaceAll("-p 8443", `-p ${ports.doh}`).replaceAll(":8443/", `:${ports.doh}/`);

beforeAll(async () => {
  const [makeCert, config] = exampleBlocks();
  await sh(makeCert);
  writeFileSync(join(dir, "sluice.yaml"), config.replace('"127.0.0.1:8853"', '"127.0.0.1:0"').replace('"127.0.0.1:8443"', '"127.0.0.1:0"'));
  cli = startCli(["-c", "sluice.yaml", "-d", dir], { cwd: dir });
  ports.dot = (await cli.waitForLog((l) => l.msg === "dot server listening")).port as number;
  ports.doh = (await cli.waitForLog((l) => l.msg === "doh server listening")).port as number;
  await cli.waitForLog((l) => l.msg === "sluice started");
});
afterAll(async () => {
  cli.child.kill("SIGTERM");
  await cli.exited;
});

test("the example's openssl, dig, kdig and curl commands work as printed", async () => {
  const blocks = exampleBlocks();
  expect(blocks).toHaveLength(3);
  const commands = blocks[2]
    .replace(/\\\n\s*/g, " ")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l.length > 0 && !l.startsWith("#"));
  expect(commands).toHaveLength(6);
  for (const command of commands.slice(0, 5)) expect((await sh(localize(command))).trim(), command).toBe("192.168.1.20");
  expect((await sh(localize(commands[5]))).trim()).toBe("200 application/dns-message");
  expect(answerIps(decodeMessage(readFileSync(join(dir, "answer.bin"))))).toEqual(["192.168.1.20"]);
});
