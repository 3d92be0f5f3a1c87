// The command line's mistakes, worded as the help reads (src/cli-args.ts over node:util parseArgs).
import { describe, expect, test } from "vitest";
import { parseOptions, type OptionSpec } from "../../src/cli-args.js";

const SPEC: OptionSpec = { config: { type: "string", short: "c" }, "self-test": { type: "boolean" } };

describe("parseOptions", () => {
  test("long and short forms, booleans", () => {
    expect(parseOptions(["-c", "a.yaml", "--self-test"], SPEC)).toEqual({ config: "a.yaml", "self-test": true });
    expect(parseOptions(["--config=b.yaml"], SPEC)).toEqual({ config: "b.yaml" });
    expect(parseOptions([], SPEC)).toEqual({});
  });

  test.each([
    [["--frob"], "unknown option '--frob'"],
    [["-x"], "unknown option '-x'"],
    [["-c"], "--config needs a value"],
    [["--config"], "--config needs a value"],
    [["-c", "--self-test"], "--config needs a value"],
    [["--self-test=yes"], "--self-test takes no value"],
    [["stray"], "unexpected argument 'stray'"],
  ])("%j: %s", (args, message) => {
    expect(() => parseOptions(args, SPEC)).toThrow(message);
  });
});
