// The geo data readers against files written by the test generators (test/helpers/geodata.ts):
// v2ray geosite.dat / geoip.dat through our protobuf reader, MaxMind DBs through our tree walk.
import { Reader, type CountryResponse } from "mmdb-lib";
import { describe, expect, test } from "vitest";
import { parseIP } from "../../src/dns/ip.js";
import { IpPrefixSetBuilder } from "../../src/engine/rules/ip.js";
import { listCodes, readGeoIp, readGeoSite } from "../../src/plugins/providers/geo/dat.js";
import { isMmdb, MmdbError, readMmdbCountries } from "../../src/plugins/providers/geo/mmdb.js";
import { ProtobufError } from "../../src/plugins/providers/geo/protobuf.js";
import { countryMmdb, geoipDat, geositeDat } from "../helpers/geodata.js";

const site = geositeDat({
  cn: [
    { type: "domain", value: "baidu.com" },
    { type: "full", value: "www.qq.com" },
  ],
  "category-ads": [
    { type: "domain", value: "ads.example", attrs: ["ads"] },
    { type: "plain", value: "tracker" },
    { type: "regex", value: "^ad[0-9]+\\.", attrs: ["ads", "cn"] },
  ],
  google: [{ type: "domain", value: "google.com" }],
});

async function domains(buf: Buffer, selection: Map<string, string[][]> | null): Promise<string[]> {
  const out: string[] = [];
  await readGeoSite(buf, selection, (type, value, code) => out.push(`${code}:${type}:${value}`));
  return out;
}

describe("geosite.dat", () => {
  test("every list, unknown fields skipped, field order free", async () => {
    expect(listCodes(site)).toEqual(["CN", "CATEGORY-ADS", "GOOGLE"]);
    expect(await domains(site, null)).toEqual([
      "CN:2:baidu.com",
      "CN:3:www.qq.com",
      "CATEGORY-ADS:2:ads.example",
      "CATEGORY-ADS:0:tracker",
      "CATEGORY-ADS:1:^ad[0-9]+\\.",
      "GOOGLE:2:google.com",
    ]);
  });

  test("selected lists only, and attribute filters (all attributes of a filter required)", async () => {
    expect(await domains(site, new Map([["CN", [[]]]]))).toEqual(["CN:2:baidu.com", "CN:3:www.qq.com"]);
    expect(await domains(site, new Map([["CATEGORY-ADS", [["ads"]]]]))).toEqual(["CATEGORY-ADS:2:ads.example", "CATEGORY-ADS:1:^ad[0-9]+\\."]);
    expect(await domains(site, new Map([["CATEGORY-ADS", [["ads", "cn"]]]]))).toEqual(["CATEGORY-ADS:1:^ad[0-9]+\\."]);
    const found = await readGeoSite(site, new Map([["NOPE", [[]]], ["GOOGLE", [[]]]]), () => undefined);
    expect([...found]).toEqual(["GOOGLE"]);
  });

  test("a truncated or corrupt file is a ProtobufError", async () => {
    await expect(readGeoSite(site.subarray(0, site.length - 3), null, () => undefined)).rejects.toThrow(ProtobufError);
    await expect(readGeoSite(Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]), null, () => undefined)).rejects.toThrow(/past the end/);
    await expect(readGeoSite(Buffer.from([0x0b, 0x00]), null, () => undefined)).rejects.toThrow(/wire type 3/);
    await expect(readGeoSite(Buffer.from([0x10, 0x01]), null, () => undefined)).resolves.toEqual(new Set());
    await expect(readGeoSite(Buffer.from([0x08, 0x01]), null, () => undefined)).rejects.toThrow(/wire type 0/);
  });
});

describe("geoip.dat", () => {
  test("CIDRs of the selected lists, reverse_match read wherever it is", async () => {
    const buf = geoipDat({ cn: { cidrs: ["1.0.1.0/24", "2400:3200::/32"] }, private: { cidrs: ["10.0.0.0/8"] }, notlan: { cidrs: ["192.168.0.0/16"], reverse: true } });
    const seen: string[] = [];
    const found = await readGeoIp(buf, new Set(["CN", "NOTLAN"]), (c, r) => seen.push(`${c} reverse=${r}`), (ip, p) => seen.push(`${ip.length}/${p}`));
    expect(seen).toEqual(["CN reverse=false", "4/24", "16/32", "NOTLAN reverse=true", "4/16"]);
    expect([...found]).toEqual(["CN", "NOTLAN"]);
  });
});

describe("MaxMind DB country databases", () => {
  const networks = [
    { cidr: "1.0.1.0/24", country: "CN" },
    { cidr: "1.0.2.0/23", country: "CN" },
    { cidr: "8.8.8.0/24", country: "US" },
    { cidr: "203.0.113.0/24", registered: "JP" },
    { cidr: "2400:3200::/32", country: "CN" },
    { cidr: "2001:4860::/32", country: "US" },
  ];

  for (const recordSize of [24, 28, 32] as const) {
    for (const ipVersion of [6, 4] as const) {
      test(`record size ${recordSize}, IPv${ipVersion} tree: the walk finds exactly the selected networks`, async () => {
        const nets = ipVersion === 4 ? networks.filter((n) => !n.cidr.includes(":")) : networks;
        const db = countryMmdb(nets, { ipVersion, recordSize });
        expect(isMmdb(db)).toBe(true);
        // The generator's file is one mmdb-lib itself reads.
        const reader = new Reader<CountryResponse>(db);
        expect(reader.get("8.8.8.8")?.country?.iso_code).toBe("US");

        const got: string[] = [];
        const { found, all } = await readMmdbCountries(db, new Set(["CN", "JP"]), (ip, bits) => got.push(`${ip.length === 4 ? [...ip].join(".") : Buffer.from(ip).toString("hex")}/${bits}`));
        expect([...found].sort()).toEqual(["CN", "JP"]);
        expect([...all].sort()).toEqual(["CN", "JP", "US"]);
        const want = ["1.0.1.0/24", "1.0.2.0/23", "203.0.113.0/24"];
        if (ipVersion === 6) want.push(`${Buffer.from(parseIP("2400:3200::") as Uint8Array).toString("hex")}/32`);
        expect(got.sort()).toEqual(want.sort());

        const set = new IpPrefixSetBuilder();
        await readMmdbCountries(db, null, (ip, bits) => set.addPrefix(ip, bits));
        const built = set.build();
        for (const [ip, inSet] of [["1.0.1.7", true], ["1.0.3.255", true], ["1.0.4.1", false], ["8.8.8.8", true], ["9.9.9.9", false], ["::ffff:8.8.8.8", true]] as const) {
          expect(built.contains(parseIP(ip) as Uint8Array), ip).toBe(inSet);
        }
      });
    }
  }

  test("a big database's walk yields to the event loop (DNS keeps being answered during a reload)", async () => {
    const nets = Array.from({ length: 60_000 }, (_, i) => ({ cidr: `${10 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}.0/24`, country: i % 2 ? "CN" : "US" }));
    const db = countryMmdb(nets);
    // Queued before the walk starts: it runs before the walk ends only if the walk gives the loop back.
    let ranDuringWalk = false;
    let walking = true;
    setImmediate(() => (ranDuringWalk = walking));
    let networks = 0;
    await readMmdbCountries(db, new Set(["CN"]), () => networks++);
    walking = false;
    expect(networks).toBe(30_000);
    expect(ranDuringWalk).toBe(true);
  });

  test("not an mmdb, or a corrupt one, is an MmdbError", async () => {
    expect(isMmdb(geoipDat({ cn: { cidrs: ["1.0.1.0/24"] } }))).toBe(false);
    const db = countryMmdb([{ cidr: "1.0.1.0/24", country: "CN" }]);
    const broken = Buffer.from(db);
    // The first 40 nodes' records all point at node 1: a cycle, not a tree.
    for (let o = 0; o + 7 <= 7 * 40; o += 7) {
      broken.writeUIntBE(1, o, 3);
      broken[o + 3] = 0;
      broken.writeUIntBE(1, o + 4, 3);
    }
    await expect(readMmdbCountries(broken, null, () => undefined)).rejects.toThrow(MmdbError);
    await expect(readMmdbCountries(broken, null, () => undefined)).rejects.toThrow(/deeper than 32 bits|not a tree/);
    await expect(readMmdbCountries(Buffer.concat([Buffer.from("abcdef4d61784d696e642e636f6d", "hex"), Buffer.from([0xe0])]), null, () => undefined)).rejects.toThrow(MmdbError);
  });
});
