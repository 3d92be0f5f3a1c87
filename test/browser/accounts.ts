// Users of the management API for the browser tests: the `api.http.auth.users` YAML with real password
// hashes (the project's own scrypt, at its lowest cost so a test signs in quickly), and the sign-in
// form driven as a person would.

import { hashPassword } from "../../src/api/auth/passwords.js";
import type { Role } from "../../src/registry/roles.js";
import type { WatchedPage } from "./browser.js";

export interface TestUser {
  name: string;
  password: string;
  role: Role;
}

/** The lowest cost parseHash accepts: fast to check, still a real scrypt hash. */
const CHEAP = { ln: 10, r: 8, p: 1 };

/** `users:` lines for api.http.auth, indented for `auth:` at six spaces. */
export async function usersYaml(users: TestUser[]): Promise<string> {
  const lines = await Promise.all(users.map(async (u) => `        - { name: ${u.name}, password_hash: "${await hashPassword(u.password, CHEAP)}", role: ${u.role} }`));
  return `      users:\n${lines.join("\n")}`;
}

/** Fills the sign-in form shown on `w` and submits it (the outcome is the caller's to wait for). */
export async function submitSignIn(w: WatchedPage, user: string, password: string): Promise<void> {
  const form = w.page.getByTestId("sign-in");
  await form.getByLabel("User name").fill(user);
  await form.getByLabel("Password").fill(password);
  await form.getByRole("button", { name: "Sign in" }).click();
}

/** Signs in with the form and waits for the header to name the user. */
export async function signInAs(w: WatchedPage, u: TestUser): Promise<void> {
  await submitSignIn(w, u.name, u.password);
  await w.page.getByTestId("who").getByText(u.name, { exact: true }).waitFor();
}
