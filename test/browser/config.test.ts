// The Configuration page in a real browser against a real Sluice: a syntax error is shown at its
// line and column and saves nothing; a valid edit saves, reloads and changes the DNS answer; a save
// against a file changed meanwhile shows both versions and overwrites nothing until asked to.
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { answerIps, query } from "../helpers/dns.js";
import { launchBrowser, type TestBrowser, type WatchedPage } from "./browser.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";

const CONFIG = (answer: string): string => `api:
  http: 127.0.0.1:0
plugins:
  - tag: main
    type: sequence
    args:
      - exec: black_hole ${answer}
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;

let s: RunningSluice;
let browser: TestBrowser;
let w: WatchedPage;
let configPath = "";

beforeAll(async () => {
  s = await startSluice(CONFIG("10.0.0.1"));
  configPath = s.app.configPath();
  browser = await launchBrowser();
  w = await browser.open();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await s?.stop();
});

const sha = (text: string): string => createHash("sha256").update(text).digest("hex");
const firstIp = async (): Promise<string | undefined> => answerIps(await query(s.udpPort, "any.example"))[0];
const editor = (): ReturnType<WatchedPage["page"]["getByTestId"]> => w.page.getByTestId("config-text");

async function openConfig(): Promise<void> {
  await w.page.goto("about:blank");
  await w.page.goto(`${s.apiUrl}/#/config`);
  await w.page.getByTestId("config-version").waitFor();
  expect(await editor().inputValue()).toBe(readFileSync(configPath, "utf8"));
}

describe("configuration page", { timeout: 60_000 }, () => {
  test("a syntax error is shown at its line and column, and nothing is saved", async () => {
    await openConfig();
    const original = readFileSync(configPath, "utf8");
    const lines = original.split("\n");
    // Line 5 becomes a nested mapping in a compact one: a YAML syntax error on that line.
    lines[4] = "    type: sequence: oops";
    const broken = lines.join("\n");
    await editor().fill(broken);

    await w.page.getByRole("button", { name: "Validate" }).click();
    const item = w.page.getByTestId("diagnostics").locator("li").first();
    await item.waitFor();
    // The server's own answer for the same text names the place the page shows.
    const answer = (await (await s.api("/api/config/validate", { method: "POST", body: broken })).json()) as { diagnostic_details: { line: number; column: number; message: string }[] };
    const d = answer.diagnostic_details[0];
    expect(d?.line).toBe(5);
    expect(await item.getAttribute("data-line")).toBe("5");
    expect(await item.getAttribute("data-column")).toBe(String(d?.column));
    expect(await item.textContent()).toBe(`Line 5, column ${d?.column}: ${d?.message}`);
    expect(await w.page.locator(".gutter-error").evaluateAll((els) => els.map((e) => e.getAttribute("data-line")))).toEqual(["5"]);

    // The diagnostic moves the caret to its line and column.
    await item.getByRole("button").click();
    const caret = await editor().evaluate((el: HTMLTextAreaElement) => ({ start: el.selectionStart, focused: document.activeElement === el }));
    const lineStart = lines.slice(0, 4).join("\n").length + 1;
    expect(caret).toEqual({ start: lineStart + (d?.column ?? 0) - 1, focused: true });
    await w.screenshot("config-diagnostic");

    await w.page.getByTestId("config-save").click();
    await w.page.getByTestId("config-message").getByText("Not saved: 1 problem.").waitFor();
    expect(readFileSync(configPath, "utf8")).toBe(original);
    expect(w.problems([{ status: 400, path: "/api/config/validate" }, { status: 400, path: "/api/config" }])).toEqual([]);
  });

  test("a valid edit saves with base_version, reloads, and the DNS answer changes", async () => {
    await openConfig();
    expect(await firstIp()).toBe("10.0.0.1");
    await editor().fill(CONFIG("10.0.0.2"));
    await w.page.getByRole("button", { name: "Validate" }).click();
    await w.page.getByTestId("config-message").getByText("The configuration is valid (2 plugins).").waitFor();

    await w.page.getByTestId("config-save").click();
    const version = sha(CONFIG("10.0.0.2"));
    await w.page.getByTestId("config-message").getByText(`Saved version ${version.slice(0, 12)} and reloaded: it is running now.`).waitFor();
    expect(readFileSync(configPath, "utf8")).toBe(CONFIG("10.0.0.2"));
    expect(await w.page.getByTestId("config-version").textContent()).toBe(version.slice(0, 12));
    const status = (await (await s.api("/api/reload/status")).json()) as { status: string; running_version: string };
    expect(status).toMatchObject({ status: "ok", running_version: version });
    await w.page.getByTestId("reload-status").getByText("ok", { exact: true }).waitFor();
    expect(await firstIp()).toBe("10.0.0.2");
    await w.screenshot("config-saved");
    expect(w.problems()).toEqual([]);
  });

  test("a save against a changed file shows both versions, saves nothing, and overwrites only when asked", async () => {
    await openConfig();
    const loaded = readFileSync(configPath, "utf8");
    // Someone else saves meanwhile (through the API, with its own base_version).
    const theirs = CONFIG("10.0.0.3");
    const put = await s.api("/api/config", { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify({ content: theirs, base_version: sha(loaded) }) });
    expect(put.status).toBe(200);

    await editor().fill(CONFIG("10.0.0.4"));
    await w.page.getByTestId("config-save").click();
    const conflict = w.page.getByTestId("conflict");
    await conflict.waitFor();
    expect(await conflict.getByTestId("conflict-mine").inputValue()).toBe(CONFIG("10.0.0.4"));
    expect(await conflict.getByTestId("conflict-server").inputValue()).toBe(theirs);
    expect(await conflict.getByTestId("conflict-server-version").textContent()).toBe(sha(theirs).slice(0, 12));
    expect(readFileSync(configPath, "utf8")).toBe(theirs);
    expect(await w.page.getByTestId("config-save").isDisabled()).toBe(true);
    await w.screenshot("config-conflict");

    // Discarding loads the server's file into the editor; nothing is written.
    await conflict.getByRole("button", { name: "Discard my edit, load the server version" }).click();
    await conflict.waitFor({ state: "detached" });
    expect(await editor().inputValue()).toBe(theirs);
    expect(readFileSync(configPath, "utf8")).toBe(theirs);

    // A second conflict, resolved by choosing to save over the server's version: written and running.
    writeFileSync(configPath, CONFIG("10.0.0.5"));
    await editor().fill(CONFIG("10.0.0.4"));
    await w.page.getByTestId("config-save").click();
    await conflict.waitFor();
    expect(readFileSync(configPath, "utf8")).toBe(CONFIG("10.0.0.5"));
    await conflict.getByRole("button", { name: `Save my edit over version ${sha(CONFIG("10.0.0.5")).slice(0, 12)}` }).click();
    await w.page.getByTestId("config-message").getByText(`Saved version ${sha(CONFIG("10.0.0.4")).slice(0, 12)} and reloaded`).waitFor();
    expect(readFileSync(configPath, "utf8")).toBe(CONFIG("10.0.0.4"));
    expect(await firstIp()).toBe("10.0.0.4");
    expect(w.problems([{ status: 409, path: "/api/config" }])).toEqual([]);
  });

  test("Reload now reports success, and a failed reload with its error while the old configuration serves", async () => {
    await openConfig();
    await w.page.getByRole("button", { name: "Reload now" }).click();
    await w.page.getByTestId("config-message").getByText("Reloaded.", { exact: true }).waitFor();

    // A file that parses but names an unknown plugin type: the reload fails, the old runtime answers.
    writeFileSync(configPath, CONFIG("10.0.0.6").replace("type: sequence", "type: no_such_type"));
    await w.page.getByRole("button", { name: "Reload now" }).click();
    await w.page.getByTestId("config-message").getByText(/^Reload failed; the previous configuration keeps serving: .*no_such_type/).waitFor();
    await w.page.getByTestId("reload-status").getByText("failed", { exact: true }).waitFor();
    expect(await firstIp()).toBe("10.0.0.4");
    await w.screenshot("config-reload-failed");
    expect(w.problems()).toEqual([]);
  });
});
