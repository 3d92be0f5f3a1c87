// Runs a worked example of docs/plugins.md as printed: its YAML starts the real program (dist/) and each
// `$ command` line of its console block runs through bash; what the command prints is returned beside
// what the document prints under it, so the test compares the two.
//
// The section starts at the heading `#### Example: <title>` and ends at the next heading. It holds a
// ```yaml block (the whole configuration) and a ```console block of `$ ` command lines, each followed by
// its printed output (possibly none). Addresses are the document's fixed ones; the runner changes them to
// the test's: the API `127.0.0.1:9080` and every `listen: 127.0.0.1:5353` go to port 0, and in commands
// `-p 5353` becomes the UDP listener's port (`+tcp` commands: the TCP listener's), `127.0.0.1:9080` the
// API's. Anything else (an upstream, a file server) the test replaces with `replace`. With `netns`, the
// program and every command run inside that network namespace (`ip netns exec <name>`).
import { execFile } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { CLI, startCli, type RunningCli } from "./cli.js";
import { tempDir } from "./sluice.js";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..", "..");

export interface DocExample {
  yaml: string;
  /** The commands in order, each with the lines the document prints under it. */
  steps: { command: string; printed: string }[];
}

/** The example under `#### Example: <title>` in docs/<file> (plugins.md by default). */
export function readDocExample(title: string, file = "plugins.md"): DocExample {
  const doc = readFileSync(join(root, "docs", file), "utf8");
  const heading = `#### Example: ${title}\n`;
  const start = doc.indexOf(heading);
  if (start < 0) throw new Error(`docs/${file} has no heading "#### Example: ${title}"`);
  const rest = doc.slice(start + heading.length);
  const next = rest.search(/^#{1,4} /m);
  const section = next < 0 ? rest : rest.slice(0, next);
  const block = (lang: string): string => {
    const at = section.indexOf("```" + lang + "\n");
    if (at < 0) throw new Error(`example "${title}" has no \`\`\`${lang} block`);
    const from = at + lang.length + 4;
    return section.slice(from, section.indexOf("```", from));
  };
  const steps: { command: string; printed: string }[] = [];
  for (const line of block("console").split("\n")) {
    if (line.startsWith("$ ")) steps.push({ command: line.slice(2), printed: "" });
    else if (steps.length > 0) steps[steps.length - 1].printed += line + "\n";
  }
  for (const s of steps) s.printed = s.printed.replace(/\n+$/, "");
  return { yaml: block("yaml"), steps };
}

export interface RunningExample {
  cli: RunningCli;
  dir: string;
  base: string;
  udpPort: number;
  tcpPort: number;
  /** Runs one command as the document prints it (addresses changed); its stdout, trailing newlines cut. */
  exec(command: string): Promise<string>;
  /** Runs every step in order: each command's output beside what the document prints. */
  runAll(): Promise<{ command: string; printed: string; output: string }[]>;
  stop(): Promise<void>;
}

export interface ExampleOptions {
  /** Text replacements applied to the YAML and to every command (e.g. an upstream's address). */
  replace?: [string, string][];
  /** Files written into the example's directory before it starts (relative paths). */
  files?: Record<string, string>;
  env?: NodeJS.ProcessEnv;
  /** Applied to each command's output before it is returned (e.g. to round a time left). */
  normalize?: (output: string, command: string) => string;
  /**
   * The port every `listen: 127.0.0.1:5353` gets instead of 0 (one free for UDP and TCP: freePort() in
   * ports.ts), for examples whose commands reach both listeners at one address; `127.0.0.1:5353` in
   * commands becomes it too.
   */
  listenPort?: number;
  /** The argv prefix that runs a program in a network namespace (test/helpers/netns.ts): the program and the commands run there. */
  netns?: string[];
}

/** Starts the example's configuration with `sluice start` and returns a runner for its commands. */
export async function startDocExample(title: string, options: ExampleOptions = {}, file = "plugins.md"): Promise<RunningExample> {
  const example = readDocExample(title, file);
  const dir = tempDir();
  for (const [name, content] of Object.entries(options.files ?? {})) {
    mkdirSync(dirname(join(dir, name)), { recursive: true });
    writeFileSync(join(dir, name), content);
  }
  const listen = `127.0.0.1:${String(options.listenPort ?? 0)}`;
  let yaml = example.yaml.replaceAll("127.0.0.1:9080", "127.0.0.1:0").replace(/listen: "?127\.0\.0\.1:5353"?/g, `listen: "${listen}"`);
  for (const [from, to] of options.replace ?? []) yaml = yaml.replaceAll(from, to);
  writeFileSync(join(dir, "sluice.yaml"), yaml);
  let launcher: string | undefined;
  if (options.netns) {
    launcher = join(dir, "sluice-in-netns");
    writeFileSync(launcher, `#!/bin/sh\nexec ${options.netns.join(" ")} ${process.execPath} ${CLI} "$@"\n`, { mode: 0o755 });
  }
  const cli = startCli(["-c", "sluice.yaml", "-d", dir], { env: options.env, launcher });
  await cli.waitForLog((l) => l.msg === "sluice started", 20_000);
  const port = (msg: string): number => Number(cli.logs.find((l) => l.msg === msg)?.port ?? 0);
  const base = `http://127.0.0.1:${String(port("management API listening"))}`;
  const udpPort = port("udp server listening");
  const tcpPort = port("tcp server listening");
  const exec = async (command: string): Promise<string> => {
    let line = command.replaceAll("http://127.0.0.1:9080", base).replaceAll("127.0.0.1:9080", base.slice(7));
    line = line.replaceAll("-p 5353", `-p ${String(/\+tcp\b/.test(command) ? tcpPort : udpPort)}`);
    if (options.listenPort !== undefined) line = line.replaceAll("127.0.0.1:5353", listen);
    for (const [from, to] of options.replace ?? []) line = line.replaceAll(from, to);
    const argv = [...(options.netns ?? []), "bash", "-o", "pipefail", "-c", line];
    const { stdout } = await run(argv[0], argv.slice(1), { cwd: dir, timeout: 15_000, env: { ...process.env, ...options.env } });
    const out = stdout.replace(/\n+$/, "");
    return options.normalize ? options.normalize(out, command) : out;
  };
  return {
    cli,
    dir,
    base,
    udpPort,
    tcpPort,
    exec,
    async runAll() {
      const results: { command: string; printed: string; output: string }[] = [];
      for (const step of example.steps) results.push({ ...step, output: await exec(step.command) });
      return results;
    },
    async stop() {
      cli.child.kill("SIGTERM");
      await cli.exited;
    },
  };
}
