// `sluice passwd` as an operator runs it (real child processes): the password piped on stdin or typed
// twice at a real terminal (a pty made by script(1)), never taken from the command line; stdout is
// the hash alone, one line, which verifyPassword accepts for that password.
import { spawn } from "node:child_process";
import { describe, expect, test } from "vitest";
import { parseHash, verifyPassword, type ParsedHash } from "../../src/api/auth/passwords.js";
import { CLI, runCli } from "../helpers/cli.js";
import { requireTool } from "../helpers/tools.js";

const HASH_LINE = /^\$scrypt\$ln=(\d+),r=8,p=1\$[A-Za-z0-9+/]+\$[A-Za-z0-9+/]{43}\n$/;

function parsed(text: string): ParsedHash {
  const hash = parseHash(text.trim());
  if (typeof hash === "string") throw new Error(`${JSON.stringify(text)} ${hash}`);
  return hash;
}

describe.concurrent("sluice passwd, the password on stdin", () => {
  test("prints one line on stdout, a hash of the first line of stdin at the default cost (15)", async () => {
    const r = await runCli(["passwd"], { input: "correct horse battery staple\nnot this line\n" });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(HASH_LINE);
    expect(HASH_LINE.exec(r.stdout)?.[1]).toBe("15");
    const hash = parsed(r.stdout);
    expect(await verifyPassword(hash, "correct horse battery staple")).toBe(true);
    expect(await verifyPassword(hash, "not this line")).toBe(false);
    expect(await verifyPassword(hash, "correct horse battery staple\n")).toBe(false);
  });

  test("--cost 10; a CRLF line end is not part of the password, spaces and a last line without an end are", async () => {
    const crlf = await runCli(["passwd", "--cost", "10"], { input: "pass word \r\n" });
    expect(crlf.code, crlf.stderr).toBe(0);
    expect(crlf.stdout).toMatch(/^\$scrypt\$ln=10,r=8,p=1\$/);
    expect(await verifyPassword(parsed(crlf.stdout), "pass word ")).toBe(true);
    const unterminated = await runCli(["passwd", "--cost=10"], { input: "no newline" });
    expect(unterminated.code, unterminated.stderr).toBe(0);
    expect(await verifyPassword(parsed(unterminated.stdout), "no newline")).toBe(true);
    // Each run has its own salt.
    const again = await runCli(["passwd", "--cost", "10"], { input: "pass word \n" });
    expect(again.stdout).not.toBe(crlf.stdout);
    expect(await verifyPassword(parsed(again.stdout), "pass word ")).toBe(true);
  });

  test("a password as an argument is refused (exit 2) with the reason, and not repeated back", async () => {
    const runs = await Promise.all([["passwd", "hunter2"], ["passwd", "--cost", "10", "hunter2"]].map((args) => runCli(args, { input: "hunter2\n" })));
    for (const r of runs) {
      expect(r.code).toBe(2);
      expect(r.stdout).toBe("");
      expect(r.stderr).toMatch(/^error: sluice passwd takes no password argument: on the command line it would be visible to every user in ps and kept in the shell's history/);
      expect(r.stderr).not.toContain("hunter2");
    }
  });

  test("an empty password (an empty line, or nothing at all) and one too long to sign in are refused (exit 1)", async () => {
    const inputs = ["\n", "", "\r\n"];
    const [long, longest, ...empties] = await Promise.all([`${"x".repeat(1025)}\n`, `${"x".repeat(1024)}\n`, ...inputs].map((input) => runCli(["passwd", "--cost", "10"], { input })));
    empties.forEach((r, i) => expect([r.code, r.stdout, r.stderr], JSON.stringify(inputs[i])).toEqual([1, "", "error: an empty password is refused\n"]));
    expect([long.code, long.stdout]).toEqual([1, ""]);
    expect(long.stderr).toMatch(/a password is at most 1024 characters/);
    expect(longest.code, longest.stderr).toBe(0);
  });

  test("--cost outside 10–20, an unknown option: exit 2 with the help", async () => {
    const pending: Promise<{ r: Awaited<ReturnType<typeof runCli>>; args: readonly string[]; message: string }>[] = [];
    for (const [args, message] of [
      [["--cost", "9"], "--cost must be a whole number from 10 to 20 (log2 of scrypt's N), not '9'"],
      [["--cost", "21"], "not '21'"],
      [["--cost", "1e1"], "not '1e1'"],
      [["--cost"], "--cost needs a value"],
      [["--rounds", "3"], "unknown option '--rounds'"],
    ] as const) {
      pending.push(runCli(["passwd", ...args], { input: "pw\n" }).then((r) => ({ r, args, message })));
    }
    for (const { r, args, message } of await Promise.all(pending)) {
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stdout).toBe("");
      expect(r.stderr).toContain(message);
      expect(r.stderr).toContain("sluice passwd [--cost LN]");
    }
  });

  test("the help lists it; sluice passwd --help explains where the password comes from", async () => {
    const help = await runCli(["--help"]);
    expect(help.stdout).toMatch(/^ {2}sluice passwd \[--cost LN\] +print a password hash for api\.http\.auth\.users/m);
    const own = await runCli(["passwd", "--help"]);
    expect(own.code).toBe(0);
    expect(own.stdout).toMatch(/^Usage:\n {2}sluice passwd \[--cost LN\]\n/);
    expect(own.stdout).toContain("never taken from the command line");
    expect(own.stdout).toContain("printf '%s\\n' \"$PASSWORD\" | sluice passwd");
  });
});

/** `sluice passwd ARGS` on a pty (script -qec): each reply is typed once the output so far ends with the prompt it answers. */
function onTerminal(args: string[], replies: { after: string; type: string }[]): Promise<{ code: number | null; output: string }> {
  const script = requireTool("script");
  const command = [process.execPath, CLI, "passwd", ...args].map((a) => `'${a}'`).join(" ");
  return new Promise((resolve, reject) => {
    const child = spawn(script, ["-qec", command, "/dev/null"], { stdio: ["pipe", "pipe", "pipe"] });
    let output = "";
    let next = 0;
    child.stdout.on("data", (d: Buffer) => {
      output += d.toString();
      while (next < replies.length && output.trimEnd().endsWith(replies[next].after.trimEnd())) child.stdin.write(replies[next++].type);
    });
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`sluice passwd on a terminal did not exit; output so far: ${JSON.stringify(output)}`));
    }, 15_000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      child.stdin.end();
      resolve({ code, output });
    });
  });
}

describe.concurrent("sluice passwd on a terminal", () => {
  test("asks twice without echo; the hash alone follows the prompts", async () => {
    const r = await onTerminal(["--cost", "10"], [
      { after: "Password:", type: "typed secret\r" },
      { after: "Password again:", type: "typed secret\r" },
    ]);
    expect(r.code, r.output).toBe(0);
    // Prompts (stderr) and the hash (stdout) share the terminal; what was typed never appears.
    expect(r.output).not.toContain("typed");
    const lines = r.output.split("\r\n");
    expect(lines.slice(0, 2)).toEqual(["Password: ", "Password again: "]);
    expect(`${lines[2]}\n`).toMatch(HASH_LINE);
    expect(lines.slice(3)).toEqual([""]);
    expect(await verifyPassword(parsed(lines[2]), "typed secret")).toBe(true);
  });

  test("a second entry that differs is refused, and so is an empty one (asked once); Ctrl-C exits 130; nothing is printed", async () => {
    const differ = await onTerminal(["--cost", "10"], [
      { after: "Password:", type: "one\r" },
      { after: "Password again:", type: "two\r" },
    ]);
    expect([differ.code, differ.output]).toEqual([1, "Password: \r\nPassword again: \r\nerror: the two passwords differ; nothing was printed\r\n"]);
    const empty = await onTerminal(["--cost", "10"], [{ after: "Password:", type: "\r" }]);
    expect([empty.code, empty.output]).toEqual([1, "Password: \r\nerror: an empty password is refused\r\n"]);
    const interrupted = await onTerminal([], [{ after: "Password:", type: "half\u0003" }]);
    expect([interrupted.code, interrupted.output]).toEqual([130, "Password: \r\n"]);
  });

  test("both lines typed (pasted) at once are both taken", async () => {
    const r = await onTerminal(["--cost", "10"], [{ after: "Password:", type: "pasted\rpasted\r" }]);
    expect(r.code, r.output).toBe(0);
    expect(await verifyPassword(parsed(r.output.split("\r\n")[2] ?? ""), "pasted")).toBe(true);
  });
});
