// Route scopes of a narrowed token: `<METHOD> <path>`, e.g. `GET /api/metrics`,
// `POST /api/plugins/ads/mode` (one plugin), `POST /api/plugins/{tag}/mode` (any tag). A path
// segment `{name}` or `*` stands for any one segment; a last segment `**` for any rest. METHOD `*`
// is any method; GET covers HEAD.

const METHODS = new Set(["GET", "POST", "PUT", "DELETE", "*"]);
const SCOPE = /^([A-Z*]+) (\/api(?:\/[^\s/?#]+)*)$/;

const wild = (segment: string): boolean => segment === "*" || /^\{[A-Za-z0-9_]+\}$/.test(segment);

interface Scope {
  method: string;
  segments: string[];
}

function parse(scope: string): Scope | null {
  const m = SCOPE.exec(scope);
  if (!m || !METHODS.has(m[1] ?? "")) return null;
  return { method: m[1] ?? "", segments: (m[2] ?? "").split("/").slice(1) };
}

function segmentsMatch(pattern: readonly string[], path: readonly string[]): boolean {
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i] ?? "";
    if (p === "**" && i === pattern.length - 1) return path.length >= i;
    if (i >= path.length) return false;
    if (!wild(p) && p !== path[i]) return false;
  }
  return pattern.length === path.length;
}

/** Some request falls under both: segment by segment equal, or either side any segment (a route's {param}, a scope's wildcard). */
function overlaps(scope: readonly string[], route: readonly string[]): boolean {
  for (let i = 0; i < scope.length; i++) {
    const s = scope[i] ?? "";
    if (s === "**" && i === scope.length - 1) return route.length >= i;
    const r = route[i];
    if (r === undefined || !(wild(s) || wild(r) || s === r)) return false;
  }
  return scope.length === route.length;
}

/** True when one of `scopes` covers `method path` (the request's path without the query string). */
export function scopesAllow(scopes: readonly string[], method: string, path: string): boolean {
  const m = method === "HEAD" ? "GET" : method;
  const segments = path.split("/").slice(1).map((s) => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s;
    }
  });
  return scopes.some((text) => {
    const scope = parse(text);
    return scope !== null && (scope.method === "*" || scope.method === m) && segmentsMatch(scope.segments, segments);
  });
}

/** Why `scope` is not usable: not written as a scope, or no route of `routes` (`METHOD /api/path/{param}`) falls under it. */
export function scopeProblem(scope: string, routes: readonly string[]): string | null {
  const parsed = parse(scope);
  if (!parsed) return `'${scope}' is not a route scope (METHOD /api/path, e.g. GET /api/metrics or POST /api/plugins/{tag}/mode)`;
  const reaches = routes.some((route) => {
    const [method = "", path = ""] = route.split(" ");
    if (parsed.method !== "*" && parsed.method !== method) return false;
    return overlaps(parsed.segments, path.split("/").slice(1));
  });
  return reaches ? null : `'${scope}' reaches no route of this API (GET /api/openapi.json lists them)`;
}
