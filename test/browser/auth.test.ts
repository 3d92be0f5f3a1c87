// Basic auth in the dashboard, in a real browser against a real Sluice: the sign-in form, a wrong
// password, credentials kept for the tab only (sessionStorage, never localStorage or cookies), the
// log stream carrying the Authorization header (fetch-based SSE), a 401 returning to sign-in, and
// a sign-out that leaves nothing of the session (a draft, a token) to the next.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { launchBrowser, overflow, PHONE, type TestBrowser, type WatchedPage } from "./browser.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";

const USER = "ops";
const PASSWORD = "s3cret:pässwort";
const CONFIG = (password: string): string => `api:
  http:
    listen: 127.0.0.1:0
    auth: { username: ${USER}, password: "${password}" }
plugins:
  - tag: main
    type: sequence
    args:
      - exec: black_hole 10.0.0.1
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;

/** The header the spec defines: standard Base64 of the UTF-8 bytes of user:password. */
const basic = (password: string): string => `Basic ${Buffer.from(`${USER}:${password}`, "utf8").toString("base64")}`;

let s: RunningSluice;
let browser: TestBrowser;

beforeAll(async () => {
  s = await startSluice(CONFIG(PASSWORD));
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await s?.stop();
});

async function signIn(w: WatchedPage, password: string): Promise<void> {
  const form = w.page.getByTestId("sign-in");
  await form.getByLabel("User name").fill(USER);
  await form.getByLabel("Password").fill(password);
  await form.getByRole("button", { name: "Sign in" }).click();
}

const storage = (w: WatchedPage): Promise<{ session: string | null; local: number; cookie: string }> =>
  w.page.evaluate(() => ({ session: sessionStorage.getItem("sluice.auth"), local: localStorage.length, cookie: document.cookie }));

describe("sign-in", { timeout: 60_000 }, () => {
  test("the form refuses a wrong password, accepts the right one, and keeps it for this tab only", async () => {
    const w = await browser.open(PHONE);
    await w.page.goto(`${s.apiUrl}/#/system`);
    await w.page.getByTestId("sign-in").waitFor();
    expect(await overflow(w.page)).toEqual([]);
    await w.screenshot("sign-in-phone");

    await signIn(w, "wrong");
    await w.page.getByText("Wrong user name or password.").waitFor();
    expect(await storage(w)).toEqual({ session: null, local: 0, cookie: "" });

    await signIn(w, PASSWORD);
    await w.page.getByTestId("health-status").getByText("healthy").waitFor();
    expect(await storage(w)).toEqual({ session: basic(PASSWORD), local: 0, cookie: "" });
    await w.screenshot("signed-in-phone");

    // A reload of the tab keeps the session; another tab has to sign in itself.
    await w.page.reload();
    await w.page.getByTestId("health-status").getByText("healthy").waitFor();
    const other = await browser.open();
    await other.page.goto(`${s.apiUrl}/#/system`);
    await other.page.getByTestId("sign-in").waitFor();
    expect(await storage(other)).toEqual({ session: null, local: 0, cookie: "" });

    expect(w.problems([{ status: 401, path: "/api/healthz" }])).toEqual([]);
    expect(other.problems([{ status: 401, path: "/api/healthz" }])).toEqual([]);
    await other.page.close();
    await w.page.close();
  });

  test("the live log stream sends the Authorization header and shows new entries", async () => {
    const w = await browser.open();
    const streamAuth: (string | undefined)[] = [];
    w.page.on("request", (r) => {
      if (new URL(r.url()).pathname === "/api/logs/stream") streamAuth.push(r.headers().authorization);
    });
    await w.page.goto(`${s.apiUrl}/#/logs`);
    await signIn(w, PASSWORD);
    await w.page.getByTestId("stream-state").getByText("live").waitFor();
    const started = w.page.getByTestId("log-list").locator("li", { hasText: "reload started" });
    await expect.poll(() => started.count()).toBe(0);
    const reload = await s.api("/api/reload", { method: "POST", headers: { authorization: basic(PASSWORD) } });
    expect(reload.status).toBe(202);
    await expect.poll(() => started.count()).toBe(1);
    expect(streamAuth).toEqual([basic(PASSWORD)]);
    await w.screenshot("logs-signed-in");
    expect(w.problems([{ status: 401, path: "/api/healthz" }])).toEqual([]);
    await w.page.close();
  });

  test("signing out clears what the session typed: an unsaved configuration edit and the upgrade token are gone after signing in again", async () => {
    const w = await browser.open();
    await w.page.goto(`${s.apiUrl}/#/config`);
    await signIn(w, PASSWORD);
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

    await w.page.getByRole("button", { name: "Sign out" }).click();
    await w.page.getByTestId("sign-in").getByText("Signed out.").waitFor();
    await signIn(w, PASSWORD);
    await card.waitFor();
    await card.locator("summary", { hasText: "Options" }).click();
    expect(await card.getByTestId("upgrade-token").inputValue()).toBe("");
    await w.page.goto(`${s.apiUrl}/#/config`);
    await editor.waitFor();
    expect(await editor.inputValue()).toBe(onServer);
    expect(await w.page.getByTestId("config-meta").getByText("unsaved changes").count()).toBe(0);
    expect(w.problems([{ status: 401, path: "/api/healthz" }])).toEqual([]);
    await w.page.close();
  });

  test("a 401 (the password changed on the server) returns to the sign-in form; Sign out forgets the credentials", async () => {
    const w = await browser.open();
    await w.page.goto(`${s.apiUrl}/#/plugins`);
    await signIn(w, PASSWORD);
    await w.page.getByTestId("plugin-main").waitFor();

    // The operator changes the password: save with reload through the API, wait until it runs.
    const current = (await (await s.api("/api/config", { headers: { authorization: basic(PASSWORD) } })).json()) as { version: string };
    const put = await s.api("/api/config", {
      method: "PUT",
      headers: { authorization: basic(PASSWORD), "content-type": "application/json" },
      body: JSON.stringify({ content: CONFIG("n3w"), base_version: current.version, reload: true }),
    });
    expect(put.status).toBe(200);
    await expect
      .poll(async () => ((await (await s.api("/api/reload/status", { headers: { authorization: basic("n3w") } })).json()) as { status?: string }).status, { timeout: 10_000 })
      .toBe("ok");

    await w.page.getByRole("button", { name: "Refresh" }).click();
    await w.page.getByTestId("sign-in").getByText("The server refused the stored credentials; sign in again.").waitFor();
    expect(await storage(w)).toEqual({ session: null, local: 0, cookie: "" });
    await w.screenshot("sign-in-after-401");

    await signIn(w, "n3w");
    await w.page.getByTestId("plugin-main").waitFor();
    expect((await storage(w)).session).toBe(basic("n3w"));
    await w.page.getByRole("button", { name: "Sign out" }).click();
    await w.page.getByTestId("sign-in").getByText("Signed out.").waitFor();
    expect(await storage(w)).toEqual({ session: null, local: 0, cookie: "" });
    expect(w.problems([{ status: 401, path: "/api/healthz" }, { status: 401, path: "/api/plugins" }])).toEqual([]);
    await w.page.close();
  });
});
