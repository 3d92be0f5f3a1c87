// The sign-in form for Basic auth. The credentials are checked against the server at once and kept
// for this tab only (sessionStorage).

import { useSignal } from "@preact/signals";
import { authMessage, errorText, signIn } from "../api";
import { Notice } from "../components/ui";

export function SignIn() {
  const user = useSignal("");
  const password = useSignal("");
  const busy = useSignal(false);
  const error = useSignal<string | null>(null);

  const submit = async (e: Event): Promise<void> => {
    e.preventDefault();
    busy.value = true;
    error.value = null;
    try {
      await signIn(user.value, password.value);
    } catch (err) {
      error.value = `The server could not be reached: ${errorText(err)}`;
    } finally {
      busy.value = false;
      password.value = "";
    }
  };

  return (
    <main id="main" class="sign-in">
      <form class="card" onSubmit={(e) => void submit(e)} aria-labelledby="sign-in-title" data-testid="sign-in">
        <h1 id="sign-in-title">Sign in to Sluice</h1>
        <p class="hint">This server asks for the user name and password of its management API (api.http.auth). They are kept for this browser tab only.</p>
        {authMessage.value && <Notice tone="error">{authMessage.value}</Notice>}
        {error.value && <Notice tone="error">{error.value}</Notice>}
        <label>
          User name
          <input name="username" autocomplete="username" required value={user.value} onInput={(e) => (user.value = (e.currentTarget).value)} />
        </label>
        <label>
          Password
          <input name="password" type="password" autocomplete="current-password" required value={password.value} onInput={(e) => (password.value = (e.currentTarget).value)} />
        </label>
        <button type="submit" class="primary" disabled={busy.value}>
          {busy.value ? "Signing in…" : "Sign in"}
        </button>
      </form>
    </main>
  );
}
