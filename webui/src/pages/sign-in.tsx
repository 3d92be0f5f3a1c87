// The sign-in form: the user name and password go once to POST /api/session; the server answers with
// an HttpOnly session cookie, and the password is cleared from the form and kept nowhere. A throttled
// sign-in (429) counts down the seconds the server asks to wait.

import { useSignal } from "@preact/signals";
import { authMessage, errorText } from "../api";
import { useEvery } from "../components/every";
import { Notice } from "../components/ui";
import { signIn } from "../session";

export function SignIn() {
  const user = useSignal("");
  const password = useSignal("");
  const busy = useSignal(false);
  const error = useSignal<string | null>(null);
  /** Date.now() until which the server refuses sign-ins from here (429), or 0. */
  const blockedUntil = useSignal(0);
  const now = useSignal(Date.now());

  useEvery(1000, () => {
    if (blockedUntil.value === 0) return;
    now.value = Date.now();
    if (now.value >= blockedUntil.value) blockedUntil.value = 0;
  });

  const submit = async (e: Event): Promise<void> => {
    e.preventDefault();
    busy.value = true;
    error.value = null;
    try {
      const out = await signIn(user.value, password.value);
      if (!out.ok) {
        error.value = out.message;
        now.value = Date.now();
        blockedUntil.value = out.retryAfterS === null ? 0 : now.value + out.retryAfterS * 1000;
      }
    } catch (err) {
      error.value = `The server could not be reached: ${errorText(err)}`;
    } finally {
      busy.value = false;
      password.value = "";
    }
  };

  const wait = blockedUntil.value === 0 ? 0 : Math.max(1, Math.ceil((blockedUntil.value - now.value) / 1000));
  return (
    <main id="main" class="sign-in">
      <form class="card" onSubmit={(e) => void submit(e)} aria-labelledby="sign-in-title" data-testid="sign-in">
        <h1 id="sign-in-title">Sign in to Sluice</h1>
        <p class="hint">Sign in with your user of the management API (api.http.auth). The password is sent once; the server keeps the session in a cookie this page cannot read.</p>
        {authMessage.value && <Notice tone="warn" testId="sign-in-reason">{authMessage.value}</Notice>}
        {error.value && (
          <Notice tone="error" testId="sign-in-error">
            {error.value}
            {wait > 0 && ` Try again in ${wait} s.`}
          </Notice>
        )}
        <label>
          User name
          <input name="username" autocomplete="username" required value={user.value} onInput={(e) => (user.value = e.currentTarget.value)} />
        </label>
        <label>
          Password
          <input name="password" type="password" autocomplete="current-password" required value={password.value} onInput={(e) => (password.value = e.currentTarget.value)} />
        </label>
        <button type="submit" class="primary" disabled={busy.value || wait > 0}>
          {busy.value ? "Signing in…" : "Sign in"}
        </button>
      </form>
    </main>
  );
}
