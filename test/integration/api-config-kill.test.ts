// Acceptance: a save is atomic. The real program runs as a child; a 20 MB configuration is PUT
// and the child is SIGKILLed at delays spread over the save. Afterwards the file is byte for byte
// either the old or the new content, and anything else beside it is a hidden temp file.
import { createHash } from "node:crypto";
import { readFileSync, readdirSync, rmSync, watch, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, expect, test } from "vitest";
import { startCli, type RunningCli } from "../helpers/cli.js";
import { apiYaml, tempDir } from "../helpers/sluice.js";

const dir = tempDir("sluice-kill-");
const file = join(dir, "sluice.yaml");
const children: RunningCli[] = [];
afterAll(() => {
  for (const c of children) if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

// A 20 MiB save is over the default body limit (8 MiB); this configuration raises it.
const LIMITS = "api:\n  http:\n    listen: 127.0.0.1:0\n    limits: { body_bytes: 67108864 }\n";
const small = (answer: string): string => apiYaml(`black_hole ${answer}`, { tcp: null }).replace("api:\n  http: 127.0.0.1:0\n", LIMITS);
// 320 comment lines of 64 KiB: 20 MiB to upload, parse and write (long lines keep the YAML parse quick,
// so most of a save's time is transfer and the write itself).
const FILLER = `# ${"x".repeat(65_533)}\n`.repeat(320);
const big = (round: number): string => `${small(`10.2.${round % 250}.1`)}# round ${round}\n${FILLER}`;
const TEMP = /^\.sluice\.yaml\.save-\d+-[0-9a-f]+\.tmp$/;

async function startChild(): Promise<{ cli: RunningCli; url: string }> {
  const cli = startCli(["-c", file, "-d", dir, "-l", "info"]);
  children.push(cli);
  const line = await cli.waitForLog((l) => l.msg === "management API listening", 20_000);
  return { cli, url: `http://127.0.0.1:${String(line.port)}` };
}

const put = (url: string, content: string, baseVersion: string, signal?: AbortSignal): Promise<Response> =>
  fetch(`${url}/api/config`, { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify({ content, base_version: baseVersion }), signal });

const sha256 = (b: Buffer): string => createHash("sha256").update(b).digest("hex");

/** Resolves when a save's temp file is created in the directory (the write has begun). */
function tempCreated(): { seen: Promise<void>; close(): void } {
  let resolveSeen: () => void = () => {};
  const seen = new Promise<void>((r) => (resolveSeen = r));
  const watcher = watch(dir, (_event, name) => {
    if (name && TEMP.test(name)) resolveSeen();
  });
  // inotify events can be missed or merged under load; a directory poll is the second witness.
  const poll = setInterval(() => {
    if (readdirSync(dir).some((f) => TEMP.test(f))) resolveSeen();
  }, 2);
  return {
    seen,
    close: () => {
      watcher.close();
      clearInterval(poll);
    },
  };
}

type Outcome = "old" | "old+temp" | "new";

/** One round: start the program, PUT a new 20 MiB file, SIGKILL it when `killAt` says, classify the file left. */
async function round(n: number, killAt: (writeStarted: Promise<void>) => Promise<void>): Promise<Outcome> {
  const old = readFileSync(file);
  const next = big(n);
  const { cli, url } = await startChild();
  const watcher = tempCreated();
  const abort = new AbortController();
  let grace: NodeJS.Timeout | undefined;
  try {
    const request = put(url, next, sha256(old), abort.signal).catch(() => null);
    await killAt(watcher.seen);
    cli.child.kill("SIGKILL");
    await within(cli.exited, `round ${n}: the killed program to exit`);
    // The server is gone; the client normally sees the reset at once, but an upload caught between connect
    // and the listener's death can sit in fetch's body stream. What it answers does not matter here: give it
    // a moment, then abort, so the round only ever waits on the server side.
    grace = setTimeout(() => abort.abort(), 3_000);
    await within(request, `round ${n}: the request to end`);
  } finally {
    clearTimeout(grace);
    watcher.close();
  }
  const after = readFileSync(file);
  const isOld = after.equals(old);
  const isNew = after.equals(Buffer.from(next, "utf8"));
  expect(isOld || isNew, `round ${n}: the file is neither the old nor the new content (${after.length} bytes)`).toBe(true);
  // data/ holds the audit trail (api.http.audit's default path, below -d).
  const others = readdirSync(dir).filter((name) => name !== "sluice.yaml" && name !== "data");
  for (const name of others) expect(name, "only hidden temp files may sit beside the config").toMatch(TEMP);
  return isNew ? "new" : others.length > 0 ? "old+temp" : "old";
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const WAIT_MS = 20_000;

/** `p`, or a clear failure after WAIT_MS instead of a silent hang. */
async function within<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), WAIT_MS)));
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

test("SIGKILL at any moment of a 20 MB save leaves the old or the new file, never a partial one", async () => {
  writeFileSync(file, small("10.2.0.1"));
  const outcomes: { when: string; result: Outcome }[] = [];
  let n = 0;

  // Killed 0 or 100 ms after the request was sent: before the write begins.
  for (const delayMs of [0, 100]) {
    outcomes.push({ when: `${delayMs} ms after sending`, result: await round(++n, () => sleep(delayMs)) });
  }
  // Killed 0-250 ms after the temp file appeared: during the write and fsync, or just after the rename.
  for (const delayMs of [0, 2, 8, 30, 100, 250]) {
    const result = await round(++n, async (writeStarted) => {
      await within(writeStarted, `round ${n}: the save to start writing`);
      await sleep(delayMs);
    });
    outcomes.push({ when: `${delayMs} ms after the temp file appeared`, result });
  }

  const count = (r: Outcome): number => outcomes.filter((o) => o.result === r).length;
  console.log(
    `kill rounds: old ${count("old")}, killed mid-write (old + temp file) ${count("old+temp")}, new ${count("new")}\n` +
      outcomes.map((o) => `  ${o.when} -> ${o.result}`).join("\n"),
  );
  // Killed at once, nothing can have been written yet; some kills must have landed mid-write.
  expect(outcomes[0].result).not.toBe("new");
  expect(count("old+temp")).toBeGreaterThan(0);

  // Killed the moment the 200 arrives: the reply promises the new file.
  const replied = await startChild();
  const answered = big(n + 1);
  expect((await put(replied.url, answered, sha256(readFileSync(file)))).status).toBe(200);
  replied.cli.child.kill("SIGKILL");
  await replied.cli.exited;
  expect(readFileSync(file, "utf8")).toBe(answered);

  // The next save by a live process removes the temp files killed processes left behind.
  const last = await startChild();
  const final = small("10.2.99.1");
  const done = await put(last.url, final, sha256(readFileSync(file)));
  expect(done.status).toBe(200);
  expect(readFileSync(file, "utf8")).toBe(final);
  expect(readdirSync(dir).filter((name) => name !== "data")).toEqual(["sluice.yaml"]);
  last.cli.child.kill("SIGTERM");
  await last.cli.exited;
}, 300_000);
