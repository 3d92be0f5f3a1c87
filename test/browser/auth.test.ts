// Signing in to the dashboard, in a real browser against a real Sluice with users (real scrypt hashes):
// the form sends the password once (POST /api/session) and the HttpOnly session cookie does the rest,
// so the tab keeps no credential (no Authorization header on any request, nothing in sessionStorage,
// localStorage or document.cookie); a wrong password and a throttled sign-in (429, "try again in N s")
// are shown on the form; the live log stream runs on the cookie; a session ended elsewhere or expired
// (the server's clock is moved, not waited for) returns to the form with its reason; Sign out ends the
// session on the server and leaves nothing of it (a draft, a token) to the next.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";
import { signInAs, submitSignIn, usersYaml, type TestUser } from "./accounts.js";
import { launchBrowser, overflow, PHONE, type ExpectedHttpError, type TestBrowser, type WatchedPage } from "./browser.js";

const OPS: TestUser = { name: "ops", password: "s3cret:pässwort", role: "admin" };
/** Only ever given wrong passwords: its sign-ins are throttled after three. */
const LOCKED: TestUser = { name: "lee", password: "never-typed", role: "viewer" };

const config = (users: string): string => `
api:
  http:
    listen: 127.0.0.1:0
    auth:
${users}
      session: { idle: 10m, absolute: 1d }
      throttle: { user_failures: 3, address_failures: 1000, first_lock: 30s }
plugins:
  - tag: main
    type: sequence
    args:
      - exec: black_hole 10.0.0.1
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;

/** The first probe of a tab that has no session answers 401; so does a wrong password. */
const SESSION_401: ExpectedHttpError = { status: 401, path: "/api/session" };

let s: RunningSluice;
const shift = { ms: 0 };
let browser: TestBrowser;
let basic = "";

beforeAll(async () => {
  s = await startSluice(config(await usersYaml([OPS, LOCKED])), {}, { clockShift: shift });
  basic = `Basic ${Buffer.from(`${OPS.name}:${OPS.password}`, "utf8").toString("base64")}`;
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await s?.stop();
});

/** What the tab could give away: its storages and the cookies its scripts can read. */
const kept = (w: WatchedPage): Promise<{ session: number; local: number; cookie: string }> =>
  w.page.evaluate(() => ({ session: sessionStorage.length, local: localStorage.length, cookie: document.cookie }));

/** The session cookie of this listener in the browser's jar (scripts cannot read it). */
async function sessionCookie(w: WatchedPage): Promise<{ name: string; value: string; httpOnly: boolean; sameSite: string; path: string }> {
  const port = new URL(s.apiUrl).port;
  const c = (await w.page.context().cookies(`${s.apiUrl}/api/session`)).find((x) => x.name === `sluice_session_${port}`);
  if (!c) throw new Error("no session cookie");
  return c;
}

/** A tab of this file's browser with no session: the cookie an earlier test left is dropped first. */
async function freshTab(viewport?: { width: number; height: number }): Promise<WatchedPage> {
  const w = await browser.open(viewport);
  await w.page.context().clearCookies();
  return w;
}

const reason = (w: WatchedPage): ReturnType<WatchedPage["page"]["getByTestId"]> => w.page.getByTestId("sign-in").getByTestId("sign-in-reason");

describe("sign-in", { timeout: 60_000 }, () => {
  test("the form refuses a wrong password and accepts the right one; the tab keeps no credential, only an HttpOnly cookie; another browser has to sign in itself", async () => {
    const w = await freshTab(PHONE);
    const authorization: string[] = [];
    w.page.on("request", (r) => {
      const a = r.headers().authorization;
      if (a !== undefined) authorization.push(`${r.method()} ${r.url()}`);
    });
    await w.page.goto(`${s.apiUrl}/#/system`);
    await w.page.getByTestId("sign-in").waitFor();
    expect(await overflow(w.page)).toEqual([]);
    await w.screenshot("sign-in-phone");

    await submitSignIn(w, OPS.name, "wrong");
    await w.page.getByTestId("sign-in-error").getByText("Wrong user name or password.").waitFor();
    expect(await w.page.getByLabel("Password").inputValue()).toBe("");
    expect(await kept(w)).toEqual({ session: 0, local: 0, cookie: "" });

    await signInAs(w, OPS);
    await w.page.getByTestId("health-status").getByText("healthy").waitFor();
    expect(await w.page.getByTestId("who").textContent()).toBe("ops adminSign out");
    expect(await kept(w)).toEqual({ session: 0, local: 0, cookie: "" });
    const cookie = await sessionCookie(w);
    expect({ httpOnly: cookie.httpOnly, sameSite: cookie.sameSite, path: cookie.path }).toEqual({ httpOnly: true, sameSite: "Strict", path: "/api" });
    expect(await overflow(w.page)).toEqual([]);
    await w.screenshot("signed-in-phone");

    // A reload of the tab keeps the session; another browser (its own cookies) has to sign in.
    await w.page.reload();
    await w.page.getByTestId("health-status").getByText("healthy").waitFor();
    const elsewhere = await launchBrowser();
    try {
      const other = await elsewhere.open();
      await other.page.goto(`${s.apiUrl}/#/system`);
      await other.page.getByTestId("sign-in").waitFor();
      expect(await reason(other).count()).toBe(0);
      expect(other.problems([SESSION_401])).toEqual([]);
    } finally {
      await elsewhere.close();
    }
    expect(authorization).toEqual([]);
    expect(w.problems([SESSION_401])).toEqual([]);
    await w.page.close();
  });

  test("a throttled sign-in shows the wait the server asks for, and the button waits too", async () => {
    const w = await freshTab();
    await w.page.goto(`${s.apiUrl}/#/system`);
    const error = w.page.getByTestId("sign-in-error");
    // Wrong passwords for one user until the server throttles it (429 too_many_attempts).
    const statuses: number[] = [];
    while (statuses.at(-1) !== 429 && statuses.length < 6) {
      const answered = w.page.waitForResponse((r) => new URL(r.url()).pathname === "/api/session" && r.request().method() === "POST");
      await submitSignIn(w, LOCKED.name, `wrong-${statuses.length}`);
      statuses.push((await answered).status());
    }
    expect(statuses).toEqual([401, 401, 401, 429]);
    expect(await error.textContent()).toMatch(/^Too many failed sign-ins\. Try again in (30|29|28) s\.$/);
    expect(await w.page.getByRole("button", { name: "Sign in" }).isDisabled()).toBe(true);
    await w.screenshot("sign-in-throttled");
    // The server says the same to anyone asking for that user now, right password or not.
    const res = await s.api("/api/session", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ username: LOCKED.name, password: LOCKED.password }) });
    expect(res.status).toBe(429);
    expect(((await res.json()) as { code: string }).code).toBe("too_many_attempts");
    expect(w.problems([SESSION_401, { status: 429, path: "/api/session" }])).toEqual([]);
    await w.page.close();
  });
});

describe("a session", { timeout: 60_000 }, () => {
  test("runs the live log stream on its cookie, without an Authorization header", async () => {
    const w = await freshTab();
    const streamAuth: (string | undefined)[] = [];
    w.page.on("request", (r) => {
      if (new URL(r.url()).pathname === "/api/logs/stream") streamAuth.push(r.headers().authorization);
    });
    await w.page.goto(`${s.apiUrl}/#/logs`);
    await signInAs(w, OPS);
    await w.page.getByTestId("stream-state").getByText("live").waitFor();
    const started = w.page.getByTestId("log-list").locator("li", { hasText: "reload started" });
    await expect.poll(() => started.count()).toBe(0);
    const reload = await s.api("/api/reload", { method: "POST", headers: { authorization: basic } });
    expect(reload.status).toBe(202);
    await expect.poll(() => started.count()).toBe(1);
    expect(streamAuth.length).toBeGreaterThan(0);
    expect(streamAuth.every((a) => a === undefined)).toBe(true);
    expect(w.problems([SESSION_401])).toEqual([]);
    await w.page.close();
  });

  test("ended elsewhere (its cookie signed out by another client), the next request returns to the form with the reason", async () => {
    const w = await freshTab();
    await w.page.goto(`${s.apiUrl}/#/plugins`);
    await signInAs(w, OPS);
    await w.page.getByTestId("plugin-main").waitFor();
    const c = await sessionCookie(w);
    const out = await s.api("/api/session", { method: "DELETE", headers: { cookie: `${c.name}=${c.value}` } });
    expect(await out.json()).toEqual({ ok: true, signed_out: true });

    await w.page.getByRole("button", { name: "Refresh" }).click();
    await reason(w).getByText("Your session is no longer valid (signed out elsewhere, or the server restarted); sign in again.").waitFor();
    await w.screenshot("sign-in-after-session-ended");
    await signInAs(w, OPS);
    await w.page.getByTestId("plugin-main").waitFor();
    expect(w.problems([SESSION_401, { status: 401, path: "/api/plugins" }])).toEqual([]);
    await w.page.close();
  });

  test("expired (idle longer than session.idle by the server's clock), the next request returns to the form saying so", async () => {
    const w = await freshTab();
    await w.page.goto(`${s.apiUrl}/#/plugins`);
    await signInAs(w, OPS);
    await w.page.getByTestId("plugin-main").waitFor();
    shift.ms += 11 * 60_000;
    await w.page.getByRole("button", { name: "Refresh" }).click();
    await reason(w).getByText("Your session has expired; sign in again.").waitFor();
    await signInAs(w, OPS);
    await w.page.getByTestId("plugin-main").waitFor();
    expect(w.problems([SESSION_401, { status: 401, path: "/api/plugins" }])).toEqual([]);
    await w.page.close();
  });

  test("Sign out ends it on the server and clears what it typed: an unsaved configuration edit and the upgrade token are gone after signing in again", async () => {
    const w = await freshTab();
    await w.page.goto(`${s.apiUrl}/#/config`);
    await signInAs(w, OPS);
    const editor = w.page.getByTestId("config-text");
    await editor.waitFor();
    const onServer = await editor.inputValue();
    await editor.fill(`# an edit never saved\n${onServer}`);
    await w.page.getByTestId("config-meta").getByText("unsaved changes").waitFor();

    await w.page.goto(`${s.apiUrl}/#/system`);
    const card = w.page.getByTestId("upgrade");
    await card.locator("summary", { hasText: "Options" }).click();
    await card.getByTestId("upgrade-token").fill("release-host-token");
    // Without a sign-out both survive moving between pages (module state, on purpose).
    await w.page.goto(`${s.apiUrl}/#/config`);
    expect(await editor.inputValue()).toBe(`# an edit never saved\n${onServer}`);
    await w.page.goto(`${s.apiUrl}/#/system`);
    await card.locator("summary", { hasText: "Options" }).click();
    expect(await card.getByTestId("upgrade-token").inputValue()).toBe("release-host-token");

    const c = await sessionCookie(w);
    await w.page.getByRole("button", { name: "Sign out" }).click();
    await reason(w).getByText("Signed out.").waitFor();
    // The server ended the session: its cookie opens nothing any more, and the browser dropped it.
    const after = await s.api("/api/session", { headers: { cookie: `${c.name}=${c.value}`, "x-requested-with": "XMLHttpRequest" } });
    expect(after.status).toBe(401);
    await expect(sessionCookie(w)).rejects.toThrow("no session cookie");

    await signInAs(w, OPS);
    await card.waitFor();
    await card.locator("summary", { hasText: "Options" }).click();
    expect(await card.getByTestId("upgrade-token").inputValue()).toBe("");
    await w.page.goto(`${s.apiUrl}/#/config`);
    await editor.waitFor();
    expect(await editor.inputValue()).toBe(onServer);
    expect(await w.page.getByTestId("config-meta").getByText("unsaved changes").count()).toBe(0);
    expect(w.problems([SESSION_401])).toEqual([]);
    await w.page.close();
  });
});
