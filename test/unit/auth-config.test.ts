// `sluice check` on api.http.auth: a hash that is not one, a user listed twice, a role that does not
// exist, a half legacy pair, durations out of bounds — each named with its line and column.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect, test } from "vitest";
import { checkErrors } from "../helpers/check.js";
import { fastHash } from "../helpers/auth.js";
import { tempDir } from "../helpers/sluice.js";

const file = (yaml: string): string => {
  const path = join(tempDir(), "sluice.yaml");
  writeFileSync(path, yaml);
  return path;
};

test("bad users, a half pair and bad durations are reported at their line and column", async () => {
  const good = await fastHash("pw");
  const path = file(`api:
  http:
    listen: 127.0.0.1:0
    auth:
      users:
        - { name: ada, role: admin, password_hash: "${good}" }
        - { name: ada, role: viewer, password_hash: "plain-text" }
      session: { idle: 10s }
      throttle: { window: forever }
plugins: []
`);
  const out = checkErrors(path);
  expect(out).toContain(`${path}:7:19: error: api.http.auth.users[1]: user 'ada' is listed twice`);
  expect(out).toMatch(new RegExp(`${path}:7:\\d+: error: api\\.http\\.auth\\.users\\[1\\]\\.password_hash is not a password hash from \`sluice passwd\``));
  expect(out).toMatch(/:8:\d+: error: api\.http\.auth\.session\.idle must be between 1m and/);
  expect(out).toMatch(/:9:\d+: error: api\.http\.auth\.throttle\.window: 'forever' is not a duration/);
});

test("a role that is not one, and a username without its password, are schema errors", () => {
  const role = checkErrors(file(`api:\n  http:\n    listen: 127.0.0.1:0\n    auth:\n      users:\n        - { name: x, role: root, password_hash: "h" }\nplugins: []\n`));
  expect(role).toMatch(/:6:\d+: error: .*role.*(metrics|allowed)/);
  const half = checkErrors(file(`api:\n  http:\n    listen: 127.0.0.1:0\n    auth: { username: ops }\nplugins: []\n`));
  expect(half).toMatch(/:4:\d+: error: .*password/);
});
