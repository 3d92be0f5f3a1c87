// ros_address_list's pure parts: the router address forms, addresses as RouterOS lists them, RouterOS
// durations both ways, and the ownership comments.
import { expect, test } from "vitest";
import { normalizeAddress, restBase } from "../../src/plugins/executors/ros-address-list/args.js";
import { parseRouterosDuration, routerosDuration } from "../../src/plugins/executors/ros-address-list/client.js";
import { Ownership } from "../../src/plugins/executors/ros-address-list/ownership.js";

test("address: a host, host:port, an IPv6 address or a URL gives the REST root; the binary API ports are refused", () => {
  expect(restBase("192.168.88.1").href).toBe("https://192.168.88.1/rest");
  expect(restBase("router.lan:8443").href).toBe("https://router.lan:8443/rest");
  expect(restBase("2001:db8::1").href).toBe("https://[2001:db8::1]/rest");
  expect(restBase("[2001:db8::1]:444").href).toBe("https://[2001:db8::1]:444/rest");
  expect(restBase("http://10.0.0.1").href).toBe("http://10.0.0.1/rest");
  expect(restBase("https://proxy.example/mikrotik/rest/").href).toBe("https://proxy.example/mikrotik/rest");
  expect(restBase("https://10.0.0.1:8729").href).toBe("https://10.0.0.1:8729/rest");
  expect(() => restBase("10.0.0.1:8728")).toThrow(/port 8728 is RouterOS's binary API/);
  expect(() => restBase("172.16.1.1:8729")).toThrow(/binary API/);
  expect(() => restBase("ftp://10.0.0.1")).toThrow(/only https \(www-ssl\) and http \(www\)/);
  expect(() => restBase("https://u:p@10.0.0.1")).toThrow(/credentials/);
  expect(() => restBase("10.0.0.1/rest")).toThrow(/not a host/);
});

test("addresses as RouterOS lists them: a host bare, a network with its host bits cleared", () => {
  expect(normalizeAddress("192.0.2.1")).toEqual({ family: 4, address: "192.0.2.1" });
  expect(normalizeAddress("192.0.2.1/32")).toEqual({ family: 4, address: "192.0.2.1" });
  expect(normalizeAddress("100.64.1.9/24")).toEqual({ family: 4, address: "100.64.1.0/24" });
  expect(normalizeAddress("2001:DB8:0::1/128")).toEqual({ family: 6, address: "2001:db8::1" });
  expect(normalizeAddress("2001:db8::ff/64")).toEqual({ family: 6, address: "2001:db8::/64" });
  expect(normalizeAddress("example.com")).toBe(null);
  expect(normalizeAddress("10.0.0.1/33")).toBe(null);
});

test("RouterOS durations: written as 1w2d3h4m5s, read in every form the router prints", () => {
  expect(routerosDuration(0)).toBe("0s");
  expect(routerosDuration(60)).toBe("1m");
  expect(routerosDuration(3723)).toBe("1h2m3s");
  expect(routerosDuration(694_861)).toBe("1w1d1h1m1s");
  for (const s of [1, 59, 60, 3600, 86_399, 694_861]) expect(parseRouterosDuration(routerosDuration(s))).toBe(s);
  expect(parseRouterosDuration("00:05:00")).toBe(300);
  expect(parseRouterosDuration("1d00:00:10")).toBe(86_410);
  expect(parseRouterosDuration("300")).toBe(300);
  expect(parseRouterosDuration("59s")).toBe(59);
  expect(parseRouterosDuration("1m500ms")).toBe(60);
  expect(parseRouterosDuration(undefined)).toBe(null);
  expect(parseRouterosDuration("")).toBe(null);
  expect(parseRouterosDuration("none-dynamic")).toBe(null);
  expect(parseRouterosDuration("soon")).toBe(null);
});

test("ownership: only rows with this prefix and tag are ours; persistent rows say kind=P", () => {
  const o = new Ownership("sluice", "ros");
  expect(o.comment("D", "a.example")).toBe("sluice;plugin=ros;kind=D;domain=a.example");
  expect(o.comment("P")).toBe("sluice;plugin=ros;kind=P");
  expect(o.kindOf("sluice;plugin=ros;kind=D;domain=a.example")).toBe("D");
  expect(o.kindOf("sluice;plugin=ros;kind=P")).toBe("P");
  expect(o.kindOf("sluice;plugin=ros")).toBe("D");
  expect(o.kindOf("sluice;plugin=ros2;kind=P")).toBe(null);
  expect(o.kindOf("other;plugin=ros;kind=P")).toBe(null);
  expect(o.kindOf("sluice;plugin=ros;kind=D;domain=kind=P.example")).toBe("D");
  expect(o.kindOf(undefined)).toBe(null);
});
