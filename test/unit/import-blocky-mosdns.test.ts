// blocky's value forms (Go durations, resolver strings, listen lists, list lines), and the sources the
// blocky and mosdns importers refuse.

import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { importConfig as blocky } from "../../src/import/blocky.js";
import { importConfig as mosdns } from "../../src/import/mosdns.js";
import { ImportError } from "../../src/import/types.js";
import { goDurationSeconds, listenList, listLineToRule, listSource, parseUpstream } from "../../src/import/blocky-values.js";

describe("blocky values", () => {
  it("reads Go durations, and bare numbers in the unit the key uses", () => {
    expect(goDurationSeconds("1h30m")).toBe(5400);
    expect(goDurationSeconds("500ms")).toBe(0.5);
    expect(goDurationSeconds("-1")).toBe(-1);
    expect(goDurationSeconds("-1m")).toBe(-60);
    expect(goDurationSeconds(5, 60)).toBe(300);
    expect(goDurationSeconds("5", 60)).toBe(300);
    expect(goDurationSeconds("soon")).toBeNull();
  });

  it("turns resolver strings into forward upstreams", () => {
    expect(parseUpstream("1.1.1.1")).toEqual({ addr: "udp://1.1.1.1" });
    expect(parseUpstream("tcp+udp:127.0.0.1:5353")).toEqual({ addr: "udp://127.0.0.1:5353" });
    expect(parseUpstream("tcp:9.9.9.9")).toEqual({ addr: "tcp://9.9.9.9" });
    expect(parseUpstream("udp:[2001:db8::1]:53")).toEqual({ addr: "udp://[2001:db8::1]:53" });
    expect(parseUpstream("2001:db8::1")).toEqual({ addr: "udp://[2001:db8::1]" });
    expect(parseUpstream("tcp-tls:fdns1.dismail.de:853")).toEqual({ addr: "tls://fdns1.dismail.de:853" });
    expect(parseUpstream("tcp-tls:1.1.1.1#cloudflare-dns.com")).toEqual({ addr: "tls://cloudflare-dns.com", dial_addr: "1.1.1.1:853" });
    expect(parseUpstream("https://dns.digitale-gesellschaft.ch/dns-query")).toEqual({ addr: "https://dns.digitale-gesellschaft.ch/dns-query" });
    expect(parseUpstream("https://1.1.1.1/dns-query#cloudflare-dns.com")).toEqual({ addr: "https://cloudflare-dns.com/dns-query", dial_addr: "1.1.1.1" });
    expect(parseUpstream("quic:dns.adguard.com")).toMatch(/QUIC/);
    expect(parseUpstream("sdns://AAcAAAAAAAAABzguOC44Ljg")).toMatch(/stamps/);
  });

  it("reads listen lists, a bare port meaning every address", () => {
    expect(listenList(53)).toEqual([":53"]);
    expect(listenList("127.0.0.1:5353,[::1]:5353")).toEqual(["127.0.0.1:5353", "[::1]:5353"]);
  });

  it("turns list lines into AdGuard rules that cover subdomains, as blocky's entries do", () => {
    expect(listLineToRule("ads.example")).toBe("||ads.example^");
    expect(listLineToRule("*.wild.example")).toBe("||wild.example^");
    expect(listLineToRule("0.0.0.0 a.example b.example # two")).toBe("||a.example^\n||b.example^");
    expect(listLineToRule("127.0.0.1 localhost")).toBeNull();
    expect(listLineToRule("/^banners?[_.-]/")).toBe("/^banners?[_.-]/");
    expect(listLineToRule("# comment")).toBeNull();
    expect(listSource("https://example.net/a.txt")).toEqual({ kind: "url", url: "https://example.net/a.txt" });
    expect(listSource("a.example\nb.example\n").kind).toBe("inline");
    expect(listSource("/etc/blocky/deny.txt")).toEqual({ kind: "file", path: "/etc/blocky/deny.txt" });
  });
});

describe("sources that are not blocky or mosdns configurations", () => {
  it("are refused with an ImportError naming the file", async () => {
    const dir = mkdtempSync(join(tmpdir(), "import-bad-"));
    writeFileSync(join(dir, "config.yml"), "log: {level: info}\n");
    await expect(blocky(dir)).rejects.toThrow(ImportError);
    await expect(blocky(join(dir, "config.yml"))).rejects.toThrow(/is not a blocky configuration \(no upstreams\)/);
    await expect(mosdns(join(dir, "config.yml"))).rejects.toThrow(/is not a mosdns v5 configuration \(no plugins list\)/);
    await expect(mosdns(join(dir, "missing.yaml"))).rejects.toThrow(/cannot read/);
    writeFileSync(join(dir, "loop.yaml"), "include: [loop.yaml]\nplugins: []\n");
    await expect(mosdns(join(dir, "loop.yaml"))).rejects.toThrow(/includes nest deeper than 8/);
  });
});
