// Users for tests of the API's accounts: cheap hashes (scrypt at N = 2^10, the same format the
// default cost writes), the YAML that configures them, and their Basic headers.

import { hashPassword } from "../../src/api/auth/passwords.js";
import type { Role } from "../../src/registry/roles.js";

export interface TestUser {
  name: string;
  password: string;
  role: Role;
}

/** One user per role, each with a password of its own. */
export const ROLE_USERS: TestUser[] = [
  { name: "prom", password: "metrics-pw", role: "metrics" },
  { name: "vera", password: "viewer-pw", role: "viewer" },
  { name: "otto", password: "operator-pw", role: "operator" },
  { name: "ada", password: "admin-pw", role: "admin" },
];

export const fastHash = (password: string): Promise<string> => hashPassword(password, { ln: 10, r: 8, p: 1 });

/** The `users:` list for api.http.auth, indented to sit under `auth:` at `indent` spaces. */
export async function usersYaml(users: readonly TestUser[], indent = 6): Promise<string> {
  const pad = " ".repeat(indent);
  const lines = [`${pad}users:`];
  for (const u of users) lines.push(`${pad}  - { name: ${u.name}, role: ${u.role}, password_hash: "${await fastHash(u.password)}" }`);
  return lines.join("\n");
}

export const basic = (user: string, password: string): string => `Basic ${Buffer.from(`${user}:${password}`, "utf8").toString("base64")}`;

export const userOf = (role: Role): TestUser => {
  const u = ROLE_USERS.find((x) => x.role === role);
  if (!u) throw new Error(`no test user with role ${role}`);
  return u;
};
