import { expect, test } from "vitest";
import { parseBootstrap, parseUpstreamAddr } from "../../src/engine/upstream/address.js";

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

test("other schemes are refused as not built in; garbage is refused with the reason", () => {
  expect(() => parseUpstreamAddr("tls://1.1.1.1")).toThrow("scheme tls:// is not supported in this build");
  expect(() => parseUpstreamAddr("https://dns.google/dns-query")).toThrow("scheme https:// is not supported in this build");
  expect(() => parseUpstreamAddr("quic://dns.adguard.com")).toThrow("not supported in this build");
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
