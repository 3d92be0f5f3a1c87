import { expect, test } from "vitest";
import { parseBootstrap, parseDialAddr, parseUpstreamAddr } from "../../src/engine/upstream/address.js";

test("a bare address is UDP on port 53; schemes and ports are honoured", () => {
  expect(parseUpstreamAddr("1.1.1.1")).toEqual({ protocol: "udp", pipeline: false, host: "1.1.1.1", hostIsIp: true, port: 53, family: 4 });
  expect(parseUpstreamAddr("udp://9.9.9.9:5353")).toMatchObject({ protocol: "udp", host: "9.9.9.9", port: 5353 });
  expect(parseUpstreamAddr("TCP://8.8.8.8")).toMatchObject({ protocol: "tcp", pipeline: false, port: 53 });
  expect(parseUpstreamAddr("tcp+pipeline://8.8.4.4:853")).toMatchObject({ protocol: "tcp", pipeline: true, port: 853 });
});

test("IPv6 upstreams are written in brackets (or bare without a port) and canonicalised", () => {
  expect(parseUpstreamAddr("[2001:DB8:0:0::1]:5300")).toMatchObject({ host: "2001:db8::1", port: 5300, family: 6, hostIsIp: true });
  expect(parseUpstreamAddr("tcp://[::1]")).toMatchObject({ protocol: "tcp", host: "::1", port: 53, family: 6 });
  expect(parseUpstreamAddr("2606:4700:4700::1111")).toMatchObject({ host: "2606:4700:4700::1111", port: 53 });
});

test("hostnames are accepted, lower-cased, without the trailing dot", () => {
  expect(parseUpstreamAddr("tcp://DNS.Example.NET.:5353")).toMatchObject({ host: "dns.example.net", hostIsIp: false, port: 5353 });
});

test("tls:// defaults to port 853 and pipelines; https:// to port 443 and /dns-query", () => {
  expect(parseUpstreamAddr("tls://1.1.1.1")).toEqual({ protocol: "tls", pipeline: true, host: "1.1.1.1", hostIsIp: true, port: 853, family: 4 });
  expect(parseUpstreamAddr("tls+pipeline://dns.quad9.net:8853")).toMatchObject({ protocol: "tls", host: "dns.quad9.net", hostIsIp: false, port: 8853 });
  expect(parseUpstreamAddr("https://dns.google/dns-query")).toMatchObject({ protocol: "https", host: "dns.google", port: 443, path: "/dns-query" });
  expect(parseUpstreamAddr("https://[2606:4700::1111]:8443/q?x=1")).toMatchObject({ host: "2606:4700::1111", port: 8443, path: "/q?x=1", family: 6 });
  expect(parseUpstreamAddr("https://cloudflare-dns.com")).toMatchObject({ path: "/dns-query" });
  // RFC 8484's URI template form.
  expect(parseUpstreamAddr("https://dns.example/dns-query{?dns}")).toMatchObject({ path: "/dns-query" });
  expect(() => parseUpstreamAddr("https://dns.example/a b")).toThrow("invalid path");
  expect(() => parseUpstreamAddr("https://user@dns.example/q")).toThrow("no user");
  expect(() => parseUpstreamAddr("tls://1.1.1.1/path")).toThrow("no path");
});

test("dial_addr is an IP with an optional port", () => {
  expect(parseDialAddr("192.0.2.1")).toEqual({ host: "192.0.2.1", port: null, family: 4 });
  expect(parseDialAddr("[2001:db8::1]:8853")).toEqual({ host: "2001:db8::1", port: 8853, family: 6 });
  expect(() => parseDialAddr("dns.example")).toThrow("must be an IP address");
});

test("other schemes are refused as not built in; garbage is refused with the reason", () => {
  expect(() => parseUpstreamAddr("quic://dns.adguard.com")).toThrow("not supported in this build");
  expect(() => parseUpstreamAddr("http://dns.example/dns-query")).toThrow("not supported in this build");
  expect(() => parseUpstreamAddr("h3://1.1.1.1")).toThrow("not supported in this build");
  expect(() => parseUpstreamAddr("foo://1.1.1.1")).toThrow("unknown scheme 'foo://'");
  expect(() => parseUpstreamAddr("1.1.1.1:0")).toThrow("invalid port");
  expect(() => parseUpstreamAddr("1.1.1.1:70000")).toThrow("invalid port");
  expect(() => parseUpstreamAddr("1.1.1.300")).toThrow("not a valid IPv4 address");
  expect(() => parseUpstreamAddr("[1.2.3.4]:53")).toThrow("not an IPv6 address");
  expect(() => parseUpstreamAddr("udp://bad host")).toThrow("neither an IP address nor a valid hostname");
  expect(() => parseUpstreamAddr("udp://")).toThrow("has no host");
  expect(() => parseUpstreamAddr("tcp://1.1.1.1/path")).toThrow("no path");
});

test("bootstrap servers are IPs with an optional port", () => {
  expect(parseBootstrap("192.0.2.53:5353")).toEqual({ host: "192.0.2.53", port: 5353, family: 4 });
  expect(parseBootstrap("8.8.8.8")).toEqual({ host: "8.8.8.8", port: 53, family: 4 });
  expect(parseBootstrap("[2001:db8::53]:53")).toEqual({ host: "2001:db8::53", port: 53, family: 6 });
  expect(() => parseBootstrap("dns.google:53")).toThrow("must be an IP address");
});
