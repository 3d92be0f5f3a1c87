// The sign-in throttle over a real listener, with DNS load from another process at the same time:
// 20 wrong passwords from one address → the 10th locks it, the rest (and even the right password)
// get 429 with Retry-After, while every DNS query is answered; another address is not locked; the
// next lock after the first ends lasts twice as long; the metrics count failures and refusals.
// Passwords are hashed at the default cost, so the checks really run scrypt beside the DNS load.
import { afterAll, beforeAll, expect, test } from "vitest";
import { hashPassword } from "../../src/api/auth/passwords.js";
import { basic } from "../helpers/auth.js";
import { formatLoad, startDnsLoad } from "../helpers/dns-load.js";
import { jsonOf, rawRequest } from "../helpers/http.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

const clock = { ms: 0 };
let s: RunningSluice;
let apiPort: number;

beforeAll(async () => {
  s = await startSluice(
    `
api:
  http:
    listen: 127.0.0.1:0
    auth:
      users:
        - { name: ada, role: admin, password_hash: "${await hashPassword("right horse battery")}" }
plugins:
  - tag: main
    type: sequence
    args:
      - exec: black_hole 192.0.2.1
${serversYaml()}
`,
    {},
    { clockShift: clock },
  );
  apiPort = Number(new URL(s.apiUrl).port);
});
afterAll(() => s.stop());

const attempt = (password: string, localAddress = "127.0.0.1") => rawRequest({ port: apiPort, path: "/api/control", headers: { authorization: basic("ada", password) }, localAddress });

test("20 wrong passwords from one address: 401 until the 10th, then 429 with Retry-After — while DNS answers every query", async () => {
  const load = await startDnsLoad(s.udpPort, 500);
  const statuses: number[] = [];
  const retryAfter: (string | undefined)[] = [];
  for (let i = 0; i < 20; i++) {
    const res = await attempt(`wrong ${i}`);
    statuses.push(res.status);
    retryAfter.push(res.headers["retry-after"]);
    if (res.status === 429) expect(jsonOf(res)).toMatchObject({ ok: false, code: "too_many_attempts", retry_after_s: Number(res.headers["retry-after"]) });
  }
  // The right password from the locked address is refused too: the lock says nothing about the guess.
  const right = await attempt("right horse battery");
  const report = await load.stop(300);
  console.log(`DNS during the sign-in attempts: ${formatLoad(report)}`);
  expect(statuses).toEqual([...Array<number>(10).fill(401), ...Array<number>(10).fill(429)]);
  expect(Number(retryAfter[10])).toBeGreaterThan(25);
  expect(Number(retryAfter[10])).toBeLessThanOrEqual(30);
  expect(right.status).toBe(429);
  expect(report.sent).toBeGreaterThan(100);
  expect(report.answered).toBe(report.sent);
  // Another address is not locked out.
  expect((await attempt("right horse battery", "127.0.0.2")).status).toBe(200);
}, 30_000);

test("the next lock, after the first has ended, lasts twice as long; the metrics count failures and refusals", async () => {
  clock.ms += 31_000;
  try {
    expect((await attempt("still wrong")).status).toBe(401);
    for (let i = 0; i < 8; i++) await attempt(`wrong again ${i}`);
    const locked = await attempt("wrong once more");
    expect(locked.status).toBe(401);
    const again = await attempt("right horse battery");
    expect(again.status).toBe(429);
    expect(Number(again.headers["retry-after"])).toBeGreaterThan(55);
    expect(Number(again.headers["retry-after"])).toBeLessThanOrEqual(60);
  } finally {
    clock.ms = 0;
  }
  const metrics = (await rawRequest({ port: apiPort, path: "/api/metrics", headers: { authorization: basic("ada", "right horse battery") }, localAddress: "127.0.0.3" })).text;
  expect(metrics).toMatch(/api_auth_failures_total\{via="basic"\} 20\b/);
  expect(metrics).toMatch(/api_auth_throttled_total\{by="address"\} \d+/);
}, 30_000);
