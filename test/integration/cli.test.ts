// The `sluice` command as an operator runs it: check, start, signals, -d.
import { writeFileSync, rmSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, test } from "vitest";
import { query, rcodeOf } from "../helpers/dns.js";
import { runCli, startCli } from "../helpers/cli.js";
import { tempDir } from "../helpers/sluice.js";

const dir = tempDir();
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const valid = `
plugins:
  - tag: main
    type: sequence
    args:
      - exec: reject 3
  - tag: udp
    type: udp_server
    args: { entry: main, listen: "127.0.0.1:0" }
  - tag: tcp
    type: tcp_server
    args: { entry: main, listen: "127.0.0.1:0" }
`;

describe("sluice --help / --version", () => {
  test("prints usage and version", async () => {
    const help = await runCli(["--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/sluice start \[-c FILE\] \[-d DIR\] \[-l LEVEL\]/);
    const version = await runCli(["--version"]);
    expect(version.stdout).toMatch(/^sluice \d+\.\d+\.\d+\n$/);
    const bad = await runCli(["frobnicate"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/unknown command 'frobnicate'/);
  });
});

describe("sluice check", () => {
  test("lists every mistake with file, line and column, and exits 1", async () => {
    const file = join(dir, "broken.yaml");
    writeFileSync(
      file,
      [
        "plugins:",
        "  - tag: main",
        "    type: sequence",
        "    args:",
        "      - exec: $nowhere",
        "  - tag: odd",
        "    type: not_a_plugin",
        "  - tag: udp",
        "    type: udp_server",
        "    args: { entry: main, listen: '127.0.0.1:53', colour: blue }",
        "",
      ].join("\n"),
    );
    const r = await runCli(["check", "-c", file]);
    expect(r.code).toBe(1);
    const lines = r.stderr.trim().split("\n");
    expect(lines).toEqual([
      `${file}:7:11: error: plugin 'odd': unknown plugin type 'not_a_plugin'`,
      `${file}:10:50: error: plugin 'udp': args: unknown field 'colour'`,
      `${file}:5:15: error: plugin 'main': args[0].exec references missing plugin 'nowhere'`,
    ]);
  });

  test("a valid configuration exits 0", async () => {
    writeFileSync(join(dir, "ok.yaml"), valid);
    const r = await runCli(["check", "-c", "ok.yaml", "-d", dir]);
    expect(r.stdout).toBe(`configuration is valid: ${join(dir, "ok.yaml")} (3 plugins)\n`);
    expect(r.code).toBe(0);
  });

  test("the shipped default configuration is valid", async () => {
    const r = await runCli(["check", "-c", "config/sluice.yaml"]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
  });
});

describe("sluice start", () => {
  test("serves, then stops gracefully on SIGTERM", async () => {
    const work = join(dir, "work");
    mkdirSync(work, { recursive: true });
    writeFileSync(join(work, "conf.yaml"), valid);
    const run = startCli(["-c", "conf.yaml", "-d", work, "-l", "debug"]);
    const udp = await run.waitForLog((l) => l.msg === "udp server listening");
    const tcp = await run.waitForLog((l) => l.msg === "tcp server listening");
    expect(rcodeOf(await query(Number(udp.port), "a.test"))).toBe(3);
    expect(rcodeOf(await query(Number(tcp.port), "a.test", "A", { tcp: true }))).toBe(3);
    run.child.kill("SIGTERM");
    const exit = await run.exited;
    expect(exit.code).toBe(0);
    expect(run.logs.some((l) => l.msg === "shutting down")).toBe(true);
  });

  test("SIGINT stops it too", async () => {
    writeFileSync(join(dir, "int.yaml"), valid);
    const run = startCli(["-c", join(dir, "int.yaml")]);
    await run.waitForLog((l) => l.msg === "sluice started");
    run.child.kill("SIGINT");
    expect((await run.exited).code).toBe(0);
  });

  test("a bad configuration is reported and the exit code is 1", async () => {
    writeFileSync(join(dir, "bad.yaml"), "plugins:\n  - { tag: x, type: nope }\n");
    const run = startCli(["-c", join(dir, "bad.yaml")]);
    expect((await run.exited).code).toBe(1);
    expect(run.stderr()).toContain("bad.yaml:2:21: error: plugin 'x': unknown plugin type 'nope'");
  });

  test("a port already in use fails startup with the plugin named", async () => {
    writeFileSync(join(dir, "a.yaml"), valid);
    const first = startCli(["-c", join(dir, "a.yaml")]);
    const udp = await first.waitForLog((l) => l.msg === "udp server listening");
    writeFileSync(join(dir, "b.yaml"), valid.replace('listen: "127.0.0.1:0" }\n  - tag: tcp', `listen: "127.0.0.1:${String(udp.port)}" }\n  - tag: tcp`));
    const second = startCli(["-c", join(dir, "b.yaml")]);
    expect((await second.exited).code).toBe(1);
    expect(second.stderr()).toMatch(/plugin 'udp' \(udp_server\) failed to initialize: bind EADDRINUSE/);
    first.child.kill("SIGTERM");
    await first.exited;
  });
});
