// A configuration file's SourceFile without its Document: released after analysis, it locates
// problems exactly as it did with the Document.
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import type { YamlPath } from "../../src/config/diagnostics.js";
import { loadConfigFile, releaseSources, type SluiceConfig } from "../../src/config/load.js";
import { SourceFile } from "../../src/config/source.js";
import { tempDir } from "../helpers/sluice.js";

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

// Keys and values from the environment, flow and block style, two files.
const MAIN = ["include: [sub/list.yaml]", "plugins:", "  - tag: main", "    type: sequence", "    args:", "      - { matches: 'qname ${ZONE}', exec: reject }", "      - exec: $list_a", ""].join("\n");
const LIST = ["plugins:", "  - tag: list_a", "    type: mark", "    args: [1]", "  - tag: ${TAG}", "    type: domain_set", "    args:", "      ${FIELD}: [a.example, b.example]", "      files: []", ""].join("\n");

/** Paths into the plugins of `config`, some of them only found through an expanded key. */
const PATHS: [number, YamlPath, boolean][] = [
  [0, ["plugins", 0, "args", 0], false],
  [0, ["plugins", 1, "args", "exps", 1], false],
  [0, ["plugins", 1, "args", "exps"], true],
  [0, ["plugins", 1, "tag"], false],
  [0, ["plugins", 1, "args", "nothing", "deeper"], false],
  [2, ["plugins", 0, "args", 0, "matches"], false],
  [2, ["plugins", 0, "args", 1], true],
  [2, ["include", 0], false],
];

function located(config: SluiceConfig): unknown[] {
  return PATHS.map(([i, path, key]) => config.plugins[i].source.locate(path, "m", key));
}

describe("SourceFile", () => {
  test("released after analysis, it parses its text again with the values ${VAR} had, and locates the same", () => {
    const dir = files({ "main.yaml": MAIN, "sub/list.yaml": LIST });
    const env: NodeJS.ProcessEnv = { ZONE: "example.org", TAG: "list_b", FIELD: "exps" };
    const config = loadConfigFile(join(dir, "main.yaml"), { env });
    expect(config.plugins.map((p) => p.tag)).toEqual(["list_a", "list_b", "main"]);
    const before = located(config);
    expect(before[1]).toMatchObject({ file: join(dir, "sub/list.yaml"), line: 8, column: 29 });
    expect(before[2]).toMatchObject({ line: 8, column: 7 }); // the key, as written: ${FIELD}
    expect(before[5]).toMatchObject({ file: join(dir, "main.yaml"), line: 6, column: 20 });
    const offset = config.plugins[0].source.offset(20, "m");
    const start = config.plugins[0].source.at(null, "m");
    releaseSources(config);
    // The environment changed since: the file is read again as it was loaded.
    env.FIELD = "elsewhere";
    delete env.TAG;
    expect(located(config)).toEqual(before);
    expect(config.plugins[0].source.offset(20, "m")).toEqual(offset);
    expect(config.plugins[0].source.at(null, "m")).toEqual(start);
  });

  test("a file with a syntax error is located by offset after a release too", () => {
    const { source, doc } = SourceFile.parse("f.yaml", "a: [1, 2\nb: c\n");
    expect(doc.errors.length).toBeGreaterThan(0);
    const first = source.offset(doc.errors[0].pos[0], "m");
    const b = source.locate(["b"], "m");
    source.release();
    expect(source.offset(doc.errors[0].pos[0], "m")).toEqual(first);
    expect(source.locate(["b"], "m")).toEqual(b);
  });
});
