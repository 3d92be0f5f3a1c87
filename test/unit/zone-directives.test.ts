// $ORIGIN, $TTL, $INCLUDE (real files in a temp directory) and $GENERATE.
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, test } from "vitest";
import { QTYPE } from "../../src/dns/constants.js";
import { formatIP } from "../../src/dns/ip.js";
import { readName } from "../../src/dns/name.js";
import { MAX_INCLUDE_DEPTH, parseZone, parseZoneFile, ZoneError } from "../../src/dns/zone/index.js";
import { tempDir } from "../helpers/sluice.js";
import { txtStrings, viaDnsPacket, zoneError } from "../helpers/zone.js";

const dir = tempDir("sluice-zone-");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function write(path: string, text: string): string {
  const full = join(dir, path);
  mkdirSync(join(full, ".."), { recursive: true });
  writeFileSync(full, text);
  return full;
}

function fileError(path: string): ZoneError {
  try {
    parseZoneFile(path);
  } catch (err) {
    if (err instanceof ZoneError) return err;
    throw err;
  }
  throw new Error("expected a ZoneError");
}

describe("$ORIGIN and $TTL", () => {
  test("$ORIGIN changes the origin for what follows; a relative $ORIGIN extends the current one", () => {
    const records = parseZone("$ORIGIN example.com.\nwww A 192.0.2.1\n$ORIGIN sub\nwww A 192.0.2.2\n$ORIGIN other.net.\n@ A 192.0.2.3");
    expect(records.map((r) => r.name)).toEqual(["www.example.com", "www.sub.example.com", "other.net"]);
  });

  test("the origin option is the starting origin", () => {
    expect(parseZone("www A 192.0.2.1", { origin: "example.org." })[0].name).toBe("www.example.org");
  });

  test("$TTL applies from where it is written; an explicit TTL still wins", () => {
    const ttls = parseZone("a A 192.0.2.1\n$TTL 1d\nb A 192.0.2.1\nc 60 A 192.0.2.1\n$TTL 90\nd A 192.0.2.1").map((r) => r.ttl);
    expect(ttls).toEqual([3600, 86400, 60, 90]);
  });

  test.each([
    ["$ORIGIN", /\$ORIGIN needs one domain name/],
    ["$ORIGIN a. b.", /\$ORIGIN needs one domain name; unexpected 'b\.'/],
    ["$TTL", /\$TTL needs one TTL/],
    ["$TTL forever", /bad TTL 'forever'/],
    ["$INCLUDE", /\$INCLUDE needs a file name/],
  ])("%j is refused", (text, message) => {
    expect(zoneError(`x A 192.0.2.1\n${text}`).message).toMatch(new RegExp(`^line 2: ${message.source}`));
  });
});

describe("$INCLUDE", () => {
  const main = write(
    "inc/main.zone",
    [
      "$ORIGIN example.com.",
      "$TTL 300",
      "www A 192.0.2.1",
      "$INCLUDE sub/part.zone", // relative to inc/, not to the working directory
      "$INCLUDE sub/part.zone other.example.", // with its own origin
      "after A 192.0.2.9", // the includer's origin and $TTL are unchanged
    ].join("\n"),
  );
  write("inc/sub/part.zone", "$TTL 60\npart A 192.0.2.2\n$INCLUDE leaf.zone\n");
  write("inc/sub/leaf.zone", "leaf TXT from-leaf\n");

  test("paths are relative to the including file; the origin argument and file scoping apply", () => {
    const records = parseZoneFile(main);
    expect(records.map((r) => [r.name, r.ttl])).toEqual([
      ["www.example.com", 300],
      ["part.example.com", 60],
      ["leaf.example.com", 60],
      ["part.other.example", 60],
      ["leaf.other.example", 60],
      ["after.example.com", 300],
    ]);
  });

  test("inline text resolves includes against baseDir", () => {
    const records = parseZone("$INCLUDE sub/leaf.zone example.net.", { baseDir: join(dir, "inc") });
    expect(records.map((r) => r.name)).toEqual(["leaf.example.net"]);
  });

  test("a missing file is an error naming it, at the $INCLUDE line", () => {
    const path = write("missing/main.zone", "a A 192.0.2.1\n\n$INCLUDE nope.zone\n");
    const err = fileError(path);
    expect(err.source).toBe(path);
    expect(err.line).toBe(3);
    expect(err.detail).toBe("cannot read included file 'nope.zone': no such file");
  });

  test("an error inside an included file names that file and its line", () => {
    const path = write("bad/main.zone", "a A 192.0.2.1\n$INCLUDE child.zone\n");
    write("bad/child.zone", "ok A 192.0.2.1\nbad MX 10\n");
    const err = fileError(path);
    expect(err.message).toBe("child.zone, line 2: MX needs a preference and an exchange");
  });

  test("include cycles are refused", () => {
    const path = write("cycle/a.zone", "$INCLUDE b.zone\n");
    write("cycle/b.zone", "b A 192.0.2.1\n$INCLUDE a.zone\n");
    const err = fileError(path);
    expect(err.message).toMatch(/^b\.zone, line 2: \$INCLUDE 'a\.zone' includes a file that is already being read/);
  });

  test(`nesting is limited to ${MAX_INCLUDE_DEPTH} levels`, () => {
    for (let i = 0; i <= MAX_INCLUDE_DEPTH + 1; i++) write(`deep/${i}.zone`, `n${i} A 192.0.2.1\n$INCLUDE ${i + 1}.zone\n`);
    const err = fileError(join(dir, "deep/0.zone"));
    expect(err.message).toMatch(new RegExp(`^${MAX_INCLUDE_DEPTH}\\.zone, line 2: .*nested deeper than ${MAX_INCLUDE_DEPTH} levels`));
  });

  test("with followIncludes false the directive is checked but no file is read", () => {
    expect(parseZone("$INCLUDE /does/not/exist.zone\nwww A 192.0.2.1", { followIncludes: false })).toHaveLength(1);
    expect(zoneError("$INCLUDE x.zone a..b", { followIncludes: false }).message).toMatch(/^line 1: bad name 'a\.\.b'/);
  });

  test("an unreadable top-level file is an error naming it", () => {
    const err = fileError(join(dir, "no-such.zone"));
    expect(err.message).toBe(`${join(dir, "no-such.zone")}: cannot read zone file: no such file`);
  });
});

describe("$GENERATE", () => {
  test("$ in the owner and the data", () => {
    const records = parseZone("$ORIGIN example.com.\n$GENERATE 1-4 host-$ A 10.0.0.$");
    expect(records.map((r) => [r.name, formatIP(r.data)])).toEqual([
      ["host-1.example.com", "10.0.0.1"],
      ["host-2.example.com", "10.0.0.2"],
      ["host-3.example.com", "10.0.0.3"],
      ["host-4.example.com", "10.0.0.4"],
    ]);
  });

  test("a step, a TTL and a class", () => {
    const records = parseZone("$GENERATE 0-10/5 h$.example. 60 IN A 192.0.2.$");
    expect(records.map((r) => [r.name, r.ttl, formatIP(r.data)])).toEqual([
      ["h0.example", 60, "192.0.2.0"],
      ["h5.example", 60, "192.0.2.5"],
      ["h10.example", 60, "192.0.2.10"],
    ]);
  });

  test("reverse zones: PTR records", () => {
    const records = parseZone("$ORIGIN 2.0.192.in-addr.arpa.\n$GENERATE 1-2 $ PTR host-$.example.com.");
    expect(viaDnsPacket(records).map((a) => [a.name, a.data])).toEqual([
      ["1.2.0.192.in-addr.arpa", "host-1.example.com"],
      ["2.2.0.192.in-addr.arpa", "host-2.example.com"],
    ]);
  });

  test("${offset,width,base} modifiers", () => {
    const records = parseZone(
      "$GENERATE 10-10 a${0}.b${-3}.c${5,4}.d${0,0,o}.e${0,4,x}.f${1,0,X}.g.${0,3,n}.h.${0,0,N}.example. CNAME t${+1}.example.",
    );
    expect(records[0].name).toBe("a10.b7.c0015.d12.e000a.fB.g.a.0.0.h.A.example");
    expect(readName(records[0].data, 0).name).toBe("t11.example");
  });

  test("\\$ is a literal dollar; quoted data and several data fields are substituted", () => {
    const records = parseZone('$GENERATE 1-2 h$.example. TXT "cost \\$$" x${1}');
    const txt = viaDnsPacket(records).map((a) => txtStrings(a.data));
    expect(txt).toEqual([
      ["cost $1", "x2"],
      ["cost $2", "x3"],
    ]);
    const mx = parseZone("$ORIGIN example.com.\n$GENERATE 1-1 m$ MX 1$ mx$");
    expect(viaDnsPacket(mx)[0].data).toEqual({ preference: 11, exchange: "mx1.example.com" });
  });

  test("generated records are of the type asked for", () => {
    const records = parseZone("$GENERATE 1-3 v6-$.example. AAAA 2001:db8::$");
    expect(records.every((r) => r.type === QTYPE.AAAA)).toBe(true);
    expect(formatIP(records[2].data)).toBe("2001:db8::3");
  });

  test.each([
    ["$GENERATE 1-3 h$", /\$GENERATE needs a range, an owner pattern, a type and data/],
    ["$GENERATE 5-1 h$ A 10.0.0.$", /range starts after it ends \(5 > 1\)/],
    ["$GENERATE 1-3/0 h$ A 10.0.0.$", /step must be at least 1/],
    ["$GENERATE a-b h$ A 10.0.0.$", /range must be start-stop/],
    ["$GENERATE 0-100000 h$ A 10.0.0.1", /would make 100001 records; at most 65536/],
    ["$GENERATE 1-3 h${0,2 A 10.0.0.$", /has no closing '}'/],
    ["$GENERATE 1-3 h${x} A 10.0.0.$", /modifier '\$\{x\}' must be/],
    ["$GENERATE 1-3 h${-5} A 10.0.0.$", /negative value -4/],
    ["$GENERATE 250-260 h$ A 10.0.0.$", /\$GENERATE at 256: A needs an IPv4 address, got '10\.0\.0\.256'/],
  ])("%j is refused with its line", (text, message) => {
    const err = zoneError(`a A 192.0.2.1\n\n${text}`);
    expect(err.line).toBe(3);
    expect(err.message).toMatch(message);
  });
});
