// Route scopes of a narrowed token (src/api/auth/scopes.ts): which requests a scope list allows
// (literal segments, {param} and * for one segment, a last ** for any rest, method * for any method,
// HEAD under GET, each segment of the request's path percent-decoded), and scopeProblem, which tells a
// token's creator that a scope is not written as one or reaches no route of the API.
import { describe, expect, test } from "vitest";
import { scopeProblem, scopesAllow } from "../../src/api/auth/scopes.js";

describe("scopesAllow", () => {
  test.each<[string, string[], [string, string, boolean][]]>([
    [
      "a literal scope: that method and that path only",
      ["GET /api/metrics"],
      [
        ["GET", "/api/metrics", true],
        ["POST", "/api/metrics", false],
        ["DELETE", "/api/metrics", false],
        ["GET", "/api/metrics/x", false],
        ["GET", "/api/metric", false],
        ["GET", "/api/metrics/", false],
        ["GET", "/api", false],
        ["GET", "/API/metrics", false],
      ],
    ],
    [
      "{param}: any one segment there",
      ["POST /api/plugins/{tag}/mode"],
      [
        ["POST", "/api/plugins/ads/mode", true],
        ["POST", "/api/plugins/other_tag/mode", true],
        ["POST", "/api/plugins/mode", false],
        ["POST", "/api/plugins/ads/x/mode", false],
        ["POST", "/api/plugins/ads/mode/x", false],
        ["POST", "/api/plugins//mode", true],
        ["GET", "/api/plugins/ads/mode", false],
      ],
    ],
    [
      "a literal tag in a route with a {param}: that plugin only",
      ["POST /api/plugins/ads/mode"],
      [
        ["POST", "/api/plugins/ads/mode", true],
        ["POST", "/api/plugins/ads2/mode", false],
      ],
    ],
    [
      "*: any one segment",
      ["GET /api/plugins/*/stats"],
      [
        ["GET", "/api/plugins/cache/stats", true],
        ["GET", "/api/plugins/cache/more/stats", false],
        ["GET", "/api/plugins/stats", false],
      ],
    ],
    [
      "a last **: the rest of the path, however long, or none",
      ["GET /api/plugins/**"],
      [
        ["GET", "/api/plugins/a", true],
        ["GET", "/api/plugins/a/b/c", true],
        ["GET", "/api/plugins", true],
        ["GET", "/api/pluginsx", false],
        ["GET", "/api/records", false],
        ["POST", "/api/plugins/a", false],
      ],
    ],
    [
      "** before the end is a literal segment",
      ["GET /api/**/stats"],
      [
        ["GET", "/api/plugins/stats", false],
        ["GET", "/api/**/stats", true],
      ],
    ],
    [
      "method *: any method",
      ["* /api/tokens/{id}"],
      [
        ["GET", "/api/tokens/abc", true],
        ["DELETE", "/api/tokens/abc", true],
        ["POST", "/api/tokens/abc", true],
        ["PUT", "/api/tokens/abc", true],
        ["GET", "/api/tokens", false],
      ],
    ],
    [
      "HEAD is a GET; a scope of another method does not cover it",
      ["GET /api/metrics", "POST /api/reload"],
      [
        ["HEAD", "/api/metrics", true],
        ["HEAD", "/api/reload", false],
      ],
    ],
    [
      "several scopes: any one of them; a scope not written as one allows nothing",
      ["get /api/config", "GET /api/metrics", "HEAD /api/health", "GET /api/stats?x=1", "not a scope"],
      [
        ["GET", "/api/metrics", true],
        ["GET", "/api/config", false],
        ["HEAD", "/api/health", false],
        ["GET", "/api/health", false],
        ["GET", "/api/stats", false],
      ],
    ],
    ["no scopes: nothing", [], [["GET", "/api/metrics", false]]],
  ])("%s", (_name, scopes, cases) => {
    for (const [method, path, allowed] of cases) expect(scopesAllow(scopes, method, path), `${method} ${path}`).toBe(allowed);
  });

  test("each segment of the request's path is compared percent-decoded, after the split: %2F is part of a segment, never a separator", () => {
    expect(scopesAllow(["POST /api/plugins/ads/mode"], "POST", "/api/plugins/%61ds/mode")).toBe(true);
    expect(scopesAllow(["POST /api/plugins/ads/mode"], "POST", "/api/plugins/%61d/mode")).toBe(false);
    expect(scopesAllow(["GET /api/plugins/a/b/stats"], "GET", "/api/plugins/a%2Fb/stats")).toBe(false);
    expect(scopesAllow(["GET /api/plugins/{tag}/stats"], "GET", "/api/plugins/a%2Fb/stats")).toBe(true);
    expect(scopesAllow(["GET /api/plugins/*/stats"], "GET", "/api/plugins/%2e%2e/stats")).toBe(true);
    expect(scopesAllow(["GET /api/metrics"], "GET", "/api/plugins/%2e%2e/metrics")).toBe(false);
    // A segment that does not decode is compared as it came, and does not throw.
    expect(scopesAllow(["GET /api/plugins/{tag}/stats"], "GET", "/api/plugins/%zz/stats")).toBe(true);
    expect(scopesAllow(["GET /api/plugins/%E0%A4%A/stats"], "GET", "/api/plugins/%E0%A4%A/stats")).toBe(true);
    expect(scopesAllow(["GET /api/plugins/ads/stats"], "GET", "/api/plugins/%E0%A4%A/stats")).toBe(false);
  });
});

describe("scopeProblem", () => {
  const ROUTES = [
    "GET /api/metrics",
    "GET /api/health",
    "GET /api/tokens",
    "POST /api/tokens",
    "DELETE /api/tokens/{id}",
    "POST /api/plugins/{tag}/mode",
    "GET /api/plugins/{tag}/stats",
    "PUT /api/config",
  ];
  const notAScope = (s: string): string => `'${s}' is not a route scope (METHOD /api/path, e.g. GET /api/metrics or POST /api/plugins/{tag}/mode)`;
  const reachesNone = (s: string): string => `'${s}' reaches no route of this API (GET /api/openapi.json lists them)`;

  test.each([
    "GET /api/metrics",
    "POST /api/plugins/ads/mode",
    "POST /api/plugins/{tag}/mode",
    "POST /api/plugins/{name}/mode",
    "POST /api/plugins/*/mode",
    "GET /api/plugins/**",
    "GET /api/**",
    "* /api/**",
    "* /api/tokens/{id}",
    "DELETE /api/tokens/abc",
    "PUT /api/config",
  ])("%s reaches a route", (scope) => {
    expect(scopeProblem(scope, ROUTES)).toBeNull();
  });

  test.each(["PUT /api/metrics", "GET /api/nothing", "GET /api/plugins/ads/mode", "GET /api", "POST /api/plugins/ads/mode/extra", "DELETE /api/tokens", "POST /api/**/mode", "GET /api/plugins/ads"])(
    "%s reaches no route",
    (scope) => {
      expect(scopeProblem(scope, ROUTES)).toBe(reachesNone(scope));
    },
  );

  test.each([
    "",
    "GET",
    "/api/metrics",
    "get /api/metrics",
    "PATCH /api/metrics",
    "HEAD /api/metrics",
    "GET api/metrics",
    "GET /other/metrics",
    "GET /api/",
    "GET  /api/metrics",
    "GET /api/metrics?x=1",
    "GET /api/metrics#top",
    "GET /api//metrics",
    "GET /api/metrics ",
    "GET /api/my tag",
  ])("%j is not a scope", (scope) => {
    expect(scopeProblem(scope, ROUTES)).toBe(notAScope(scope));
  });
});
