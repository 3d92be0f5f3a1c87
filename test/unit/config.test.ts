// Configuration loading: YAML positions, ${VAR} expansion, include, and the analyzer's diagnostics.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import { ConfigError, type Diagnostic } from "../../src/config/diagnostics.js";
import { loadConfigFile, loadConfigText } from "../../src/config/load.js";
import { analyzeConfig } from "../../src/registry/analyze.js";
import { createCatalog } from "../../src/plugins/catalog.js";
import { tempDir } from "../helpers/sluice.js";

const catalog = createCatalog("full");
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function files(map: Record<string, string>): string {
  const dir = tempDir();
  dirs.push(dir);
  for (const [name, text] of Object.entries(map)) {
    mkdirSync(join(dir, name, ".."), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  return dir;
}

function problems(fn: () => unknown): Diagnostic[] {
  try {
    fn();
  } catch (err) {
    if (err instanceof ConfigError) return err.diagnostics;
    throw err;
  }
  throw new Error("expected a ConfigError");
}

const analyzeText = (text: string, env: NodeJS.ProcessEnv = {}) => analyzeConfig(loadConfigText(text, { env }), catalog);

describe("YAML and top level", () => {
  test("syntax errors carry line and column", () => {
    const d = problems(() => loadConfigText("plugins:\n  - tag: a\n    type: [unclosed\n"));
    expect(d[0].message).toMatch(/YAML syntax error/);
    expect(d[0].line).toBeGreaterThanOrEqual(3);
  });

  test("unknown top-level key is located at the key", () => {
    const d = problems(() => loadConfigText("log:\n  level: info\nplugnis: []\n"));
    expect(d).toHaveLength(1);
    expect(d[0]).toMatchObject({ line: 3, column: 1, message: "unknown field 'plugnis'" });
  });

  test("defaults and short forms", () => {
    const c = loadConfigText("api:\n  http: 127.0.0.1:9080\nlog:\n  level: WARN\n");
    expect(c.api).toEqual({ listen: "127.0.0.1:9080" });
    expect(c.log.level).toBe("warn");
    expect(loadConfigText("").plugins).toEqual([]);
  });

  test("runtime is accepted", () => {
    expect(() => loadConfigText("runtime:\n  worker_threads: 2\n")).not.toThrow();
  });
});

describe("${VAR} expansion", () => {
  test("values, defaults, type recovery and literal $${", () => {
    const c = loadConfigText(
      'plugins:\n  - tag: ${TAG}\n    type: tcp_server\n    args:\n      entry: "${ENTRY:-main}"\n      listen: 127.0.0.1:${PORT}\n      idle_timeout: ${IDLE}\n  - tag: m\n    type: mark\n    args: ["$${NOT_A_VAR}"]\n',
      { env: { TAG: "srv", PORT: "53", IDLE: "15" } },
    );
    expect(c.plugins[0]).toMatchObject({ tag: "srv", args: { entry: "main", listen: "127.0.0.1:53", idle_timeout: 15 } });
    expect(c.plugins[1].args).toEqual(["${NOT_A_VAR}"]);
  });

  test("quoted placeholders stay strings; empty value uses the default", () => {
    const c = loadConfigText('log:\n  file: "${N}"\nplugins:\n  - { tag: a, type: "${T:-_true}" }\n', { env: { N: "42", T: "" } });
    expect(c.log.file).toBe("42");
    expect(c.plugins[0].type).toBe("_true");
  });

  test("an unset variable without default names its path and position", () => {
    const d = problems(() => loadConfigText("plugins:\n  - tag: a\n    type: forward\n    args:\n      upstreams:\n        - addr: ${UPSTREAM}\n", { env: {} }));
    expect(d[0].message).toBe("undefined environment variable 'UPSTREAM' at plugins[0].args.upstreams[0].addr");
    expect(d[0]).toMatchObject({ line: 6, column: 17 });
  });

  test("runtime template keys (${qname}, ...) are left for the hook executors; env: and defaults still expand", () => {
    const c = loadConfigText(
      'plugins:\n  - tag: m\n    type: mark\n    args: ["${qname} ${client_ip}-${QNAME:-up}", "${env:qname}", "${qname:-d}", "${rcode_name}${HOST}"]\n',
      { env: { qname: "from-env", HOST: "h" } },
    );
    expect(c.plugins[0].args).toEqual(["${qname} ${client_ip}-up", "from-env", "from-env", "${rcode_name}h"]);
    // An unknown lower-case name is still an environment variable (and an error when unset).
    const d = problems(() => loadConfigText('plugins:\n  - { tag: a, type: mark, args: ["${qnmae}"] }\n', { env: {} }));
    expect(d[0].message).toMatch(/^undefined environment variable 'qnmae' at plugins\[0\]\.args\[0\] \(nor is it a template key: qname, qtype, /);
  });

  test("placeholders are never written back: the file keeps them", () => {
    const dir = files({ "main.yaml": "plugins:\n  - { tag: a, type: '${T}' }\n" });
    const c = loadConfigFile(join(dir, "main.yaml"), { env: { T: "_true" } });
    expect(c.plugins[0].type).toBe("_true");
    // In memory only: the file and the text kept to locate problems still have the placeholder.
    expect(readFileSync(join(dir, "main.yaml"), "utf8")).toContain("${T}");
    expect(c.plugins[0].source.text).toContain("${T}");
  });
});

describe("include", () => {
  test("recursive, relative to the declaring file, included plugins first", () => {
    const dir = files({
      "main.yaml": "include: [sub/a.yaml]\nplugins:\n  - { tag: main_p, type: _true }\n",
      "sub/a.yaml": "include: [deeper/b.yaml]\nlog: { level: error }\nplugins:\n  - { tag: a_p, type: _true }\n",
      "sub/deeper/b.yaml": "plugins:\n  - { tag: b_p, type: _false }\n",
    });
    const c = loadConfigFile(join(dir, "main.yaml"));
    expect(c.plugins.map((p) => p.tag)).toEqual(["b_p", "a_p", "main_p"]);
    expect(c.log.level).toBe("info"); // log of included files is ignored
    expect(c.files).toHaveLength(3);
  });

  test("depth limit of 8", () => {
    const map: Record<string, string> = {};
    for (let i = 0; i < 10; i++) map[`f${i}.yaml`] = `include: [f${i + 1}.yaml]\n`;
    map["f10.yaml"] = "plugins: []\n";
    const dir = files(map);
    const d = problems(() => loadConfigFile(join(dir, "f0.yaml")));
    expect(d[0].message).toMatch(/maximum include depth of 8 exceeded/);
  });

  test("cycles and missing files are reported with the including file's position", () => {
    const dir = files({ "a.yaml": "include: [b.yaml, missing.yaml]\n", "b.yaml": "include: [a.yaml]\n" });
    const d = problems(() => loadConfigFile(join(dir, "a.yaml")));
    expect(d.map((x) => x.message).join("\n")).toMatch(/include cycle/);
    expect(d.map((x) => x.message).join("\n")).toMatch(/cannot read included config .*missing.yaml: ENOENT/);
    const missing = d.find((x) => x.message.includes("missing.yaml"));
    expect(missing?.file).toBe(join(dir, "a.yaml"));
  });

  test("validating text refuses include", () => {
    expect(problems(() => loadConfigText("include: [x.yaml]\n"))[0].message).toMatch(/include is only supported/);
  });

  test("duplicate tags across files name both places", () => {
    const dir = files({
      "main.yaml": "include: [b.yaml]\nplugins:\n  - { tag: dup, type: _true }\n",
      "b.yaml": "plugins:\n  - { tag: dup, type: _false }\n",
    });
    const d = problems(() => analyzeConfig(loadConfigFile(join(dir, "main.yaml")), catalog));
    expect(d[0].file).toBe(join(dir, "main.yaml"));
    expect(d[0].message).toContain(`duplicate tag (first declared at ${join(dir, "b.yaml")}:2:`);
  });
});

describe("analysis", () => {
  test("every problem is collected: unknown type, bad args, missing/self/wrong-kind references", () => {
    const text = [
      "plugins:",
      "  - { tag: a, type: no_such_type }",
      "  - tag: b",
      "    type: tcp_server",
      "    args: { entry: main, listen: '127.0.0.1:53', idle_timeout: soon, color: red }",
      "  - tag: main",
      "    type: sequence",
      "    args:",
      "      - { matches: $missing, exec: $main }",
      "      - { exec: jump isnt_seq }",
      "      - { exec: $m }",
      "  - { tag: isnt_seq, type: black_hole, args: 0.0.0.0 }",
      "  - { tag: m, type: _true }",
    ].join("\n");
    const d = problems(() => analyzeText(text));
    const msgs = d.map((x) => `${x.line}:${x.column} ${x.message}`);
    expect(msgs).toEqual(
      expect.arrayContaining([
        "2:21 plugin 'a': unknown plugin type 'no_such_type'",
        "5:70 plugin 'b': args: unknown field 'color'",
        "9:20 plugin 'main': args[0].matches references missing plugin 'missing'",
      ]),
    );
    // args problems stop that plugin; reference problems are reported for the rest
    const refs = problems(() => analyzeText(text.replace("idle_timeout: soon, color: red", "idle_timeout: soon")));
    const refMsgs = refs.map((x) => x.message);
    expect(refMsgs).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^plugin 'b': args.idle_timeout: 'soon' is not a duration/),
        "plugin 'a': unknown plugin type 'no_such_type'",
        "plugin 'main': args[0].matches references missing plugin 'missing'",
        "plugin 'main': args[0].exec references itself",
        "plugin 'main': args[1].exec expects plugin type 'sequence', but 'isnt_seq' has type 'black_hole'",
        "plugin 'main': args[2].exec expects an executor, but 'm' is a matcher (type '_true')",
      ]),
    );
    const self = refs.find((x) => x.message.includes("references itself"));
    expect(self).toMatchObject({ line: 9, column: 36 });
  });

  test("bad quick setups are reported at the rule", () => {
    const d = problems(() => analyzeText("plugins:\n  - tag: s\n    type: sequence\n    args:\n      - { matches: 'qtype NOPE', exec: 'nonexistent 1' }\n"));
    expect(d.map((x) => x.message)).toEqual([
      "plugin 's': args[0].matches: 'qtype NOPE': 'NOPE' is not a query type",
      "plugin 's': args[0].exec: 'nonexistent 1': unknown plugin type 'nonexistent'",
    ]);
    expect(d[0]).toMatchObject({ line: 5, column: 20 });
  });

  test("dependency cycles are reported with the path", () => {
    const d = problems(() => analyzeText("plugins:\n  - { tag: a, type: sequence, args: [{ exec: jump b }] }\n  - { tag: b, type: sequence, args: [{ exec: goto a }] }\n"));
    expect(d[0].message).toBe("plugin 'a': dependency cycle: a -> b -> a");
  });

  test("init order puts dependencies first; unreachable providers are skipped", () => {
    const a = analyzeText("plugins:\n  - { tag: z, type: sequence, args: [{ matches: $m, exec: accept }] }\n  - { tag: m, type: _true }\n  - { tag: udp, type: udp_server, args: { entry: z, listen: '127.0.0.1:0' } }\n");
    expect(a.initOrder).toEqual(["m", "z", "udp"]);
    expect(a.graph.edges).toContainEqual({ from: "z", field: "args[0].matches", to: "m", kind: "matcher", plugin_type: null });
  });

  test("reserved and malformed tags", () => {
    const d = problems(() => analyzeText("plugins:\n  - { tag: qs.mine, type: _true }\n  - { tag: 'a/b', type: _true }\n"));
    expect(d.map((x) => x.message)).toEqual([
      "plugin 'qs.mine': tags starting with 'qs.' are reserved for quick-setup instances",
      "plugin 'a/b': tag may not contain '/', '?', '#' or whitespace",
    ]);
  });

  test("a type left out of the build is reported as such", () => {
    const minimal = createCatalog("minimal");
    expect(minimal.lookup("sequence")).toHaveProperty("def");
    const fake = createCatalog("custom-without-core");
    expect(fake.build.bundle).toBe("custom");
  });
});
