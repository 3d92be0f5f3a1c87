// Checks of api.http.auth that its schema cannot express: password hashes that parse, user names
// listed once, durations within bounds. (How the API uses the section: src/api/auth/settings.ts.)

import { durationProblem } from "../engine/duration.js";
import { parseHash } from "./password-hash.js";
import type { AuthConfig } from "./schema.js";

/** What is wrong with api.http.auth beyond its schema: paths below `api.http`. */
export function authProblems(auth: AuthConfig | undefined): { path: string[]; message: string }[] {
  if (!auth) return [];
  const problems: { path: string[]; message: string }[] = [];
  const seen = new Set<string>();
  (auth.users ?? []).forEach((u, i) => {
    const hash = parseHash(u.password_hash);
    if (typeof hash === "string") problems.push({ path: ["auth", "users", String(i), "password_hash"], message: `api.http.auth.users[${i}].password_hash ${hash}` });
    if (seen.has(u.name)) problems.push({ path: ["auth", "users", String(i), "name"], message: `api.http.auth.users[${i}]: user '${u.name}' is listed twice` });
    seen.add(u.name);
  });
  if (auth.username !== undefined && seen.has(auth.username)) {
    problems.push({ path: ["auth", "username"], message: `api.http.auth.username '${auth.username}' is also in auth.users: keep one` });
  }
  const durations: [string[], number | string | undefined, number, number][] = [
    [["session", "idle"], auth.session?.idle, 60_000, 366 * 86_400_000],
    [["session", "absolute"], auth.session?.absolute, 60_000, 366 * 86_400_000],
    [["throttle", "window"], auth.throttle?.window, 1000, 86_400_000],
    [["throttle", "first_lock"], auth.throttle?.first_lock, 1000, 86_400_000],
    [["throttle", "max_lock"], auth.throttle?.max_lock, 1000, 7 * 86_400_000],
  ];
  for (const [path, value, min, max] of durations) {
    const problem = durationProblem(`api.http.auth.${path.join(".")}`, value, min, max);
    if (problem) problems.push({ path: ["auth", ...path], message: problem });
  }
  return problems;
}
