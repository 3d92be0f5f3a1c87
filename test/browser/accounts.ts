// Users of the management API for the browser tests: the `api.http.auth.users` YAML with real password
// hashes (the project's own scrypt, at its lowest cost so a test signs in quickly), and the sign-in
// form driven as a person would.

import type { TestUser } from "../helpers/auth.js";
import type { WatchedPage } from "./browser.js";

// The users (`usersYaml`, scrypt at its lowest cost) are the integration tests' own.
export { usersYaml, type TestUser } from "../helpers/auth.js";

export const VIEWER: TestUser = { name: "vera", password: "vera-reads", role: "viewer" };
export const OPERATOR: TestUser = { name: "otto", password: "otto-pauses", role: "operator" };
export const ADMIN: TestUser = { name: "ada", password: "ada-does-all", role: "admin" };

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
