// Access (admins): the API tokens (GET /api/tokens: name, role or scopes, created, expires, last used,
// no secrets), a form to create one (POST /api/tokens: name, role, lifetime) whose secret is shown once,
// here, with a copy button, and revocation (DELETE /api/tokens/<id>, confirmed inline), which the
// server applies at the token's next request. The secret lives in this component only: leaving the
// page drops it, and it is never stored.

import { useSignal } from "@preact/signals";
import { useEffect } from "preact/hooks";
import { api, errorText, refusalText, send } from "../api";
import { Badge, Notice, type Tone } from "../components/ui";
import { when } from "../format";
import type { Role } from "../session";

interface TokenInfo {
  id: string;
  name: string;
  role: Role | null;
  scopes: string[] | null;
  created_at_ms: number;
  expires_at_ms: number | null;
  last_used_at_ms: number | null;
  created_by: string;
}

const ROLES: { role: Role; hint: string }[] = [
  { role: "metrics", hint: "metrics and health probes only" },
  { role: "viewer", hint: "every read" },
  { role: "operator", hint: "reads and runtime controls" },
  { role: "admin", hint: "everything" },
];

const LIFETIMES: { value: string; label: string }[] = [
  { value: "1d", label: "1 day" },
  { value: "7d", label: "7 days" },
  { value: "30d", label: "30 days" },
  { value: "90d", label: "90 days" },
  { value: "365d", label: "1 year" },
  { value: "", label: "never expires" },
];

function CreateForm({ created }: { created: (t: TokenInfo, secret: string) => void }) {
  const name = useSignal("");
  const role = useSignal<Role>("metrics");
  const lifetime = useSignal("30d");
  const busy = useSignal(false);
  const error = useSignal<string | null>(null);

  const submit = async (e: Event): Promise<void> => {
    e.preventDefault();
    busy.value = true;
    error.value = null;
    try {
      const out = await send<{ token: TokenInfo; secret: string }>("POST", "api/tokens", { name: name.value.trim(), role: role.value, ...(lifetime.value ? { expires_in: lifetime.value } : {}) });
      name.value = "";
      created(out.token, out.secret);
    } catch (err) {
      error.value = refusalText(err);
    } finally {
      busy.value = false;
    }
  };

  return (
    <form class="inline-form token-form" onSubmit={(e) => void submit(e)} aria-label="Create a token" data-testid="token-form">
      <label>
        Name <input value={name.value} onInput={(e) => (name.value = e.currentTarget.value)} required maxLength={63} placeholder="prometheus" size={16} data-testid="token-name" />
      </label>
      <label>
        Role{" "}
        <select value={role.value} onChange={(e) => (role.value = ROLES.find((r) => r.role === e.currentTarget.value)?.role ?? "metrics")} data-testid="token-role">
          {ROLES.map((r) => (
            <option key={r.role} value={r.role}>
              {r.role} ({r.hint})
            </option>
          ))}
        </select>
      </label>
      <label>
        Expires{" "}
        <select value={lifetime.value} onChange={(e) => (lifetime.value = e.currentTarget.value)} data-testid="token-lifetime">
          {LIFETIMES.map((l) => (
            <option key={l.value} value={l.value}>
              {l.label}
            </option>
          ))}
        </select>
      </label>
      <button type="submit" class="primary" disabled={busy.value} data-testid="token-create">
        Create token
      </button>
      {error.value && <Notice tone="error">{error.value}</Notice>}
    </form>
  );
}

/** The new token's secret, shown this once. */
function Secret({ token, secret, dismiss }: { token: TokenInfo; secret: string; dismiss: () => void }) {
  const copied = useSignal<{ tone: Tone; text: string } | null>(null);
  const copy = async (): Promise<void> => {
    try {
      await navigator.clipboard.writeText(secret);
      copied.value = { tone: "ok", text: "Copied." };
    } catch {
      copied.value = { tone: "warn", text: "This browser did not allow copying; select the text and copy it." };
    }
  };
  return (
    <section class="card wide secret" aria-labelledby="secret-title" data-testid="token-secret">
      <h2 id="secret-title">Token {token.name} created</h2>
      <p>Copy the secret now: it is shown only this once (the server keeps a hash of it). Send it as <code>Authorization: Bearer &lt;secret&gt;</code>.</p>
      <div class="inline-form">
        <input class="mono secret-value" readOnly value={secret} aria-label={`Secret of ${token.name}`} onFocus={(e) => e.currentTarget.select()} data-testid="token-secret-value" />
        <button type="button" onClick={() => void copy()}>
          Copy
        </button>
        <button type="button" onClick={dismiss}>
          Done
        </button>
      </div>
      {copied.value && <Notice tone={copied.value.tone}>{copied.value.text}</Notice>}
    </section>
  );
}

export function AccessPage() {
  const tokens = useSignal<TokenInfo[] | null>(null);
  const error = useSignal<string | null>(null);
  const message = useSignal<{ tone: Tone; text: string } | null>(null);
  const fresh = useSignal<{ token: TokenInfo; secret: string } | null>(null);
  const revoking = useSignal<string | null>(null);

  const load = async (): Promise<void> => {
    try {
      tokens.value = (await api<{ tokens: TokenInfo[] }>("api/tokens")).tokens;
      error.value = null;
    } catch (err) {
      error.value = errorText(err);
    }
  };
  useEffect(() => {
    void load();
  }, []);

  const revoke = async (t: TokenInfo): Promise<void> => {
    revoking.value = null;
    try {
      await send("DELETE", `api/tokens/${encodeURIComponent(t.id)}`);
      message.value = { tone: "ok", text: `Revoked ${t.name}: it is refused from its next request on.` };
    } catch (err) {
      message.value = { tone: "error", text: refusalText(err) };
    }
    await load();
  };

  const now = Date.now();
  const list = tokens.value;
  return (
    <section aria-labelledby="access-title">
      <header class="page-head">
        <h1 id="access-title">Access</h1>
        <span class="hint">API tokens for scripts, monitoring and widgets; users are declared in api.http.auth.users</span>
      </header>
      <CreateForm
        created={(token, secret) => {
          fresh.value = { token, secret };
          message.value = null;
          void load();
        }}
      />
      {fresh.value && <Secret token={fresh.value.token} secret={fresh.value.secret} dismiss={() => (fresh.value = null)} />}
      {message.value && (
        <Notice tone={message.value.tone} testId="token-message">
          {message.value.text}
        </Notice>
      )}
      {error.value && <Notice tone="error">Could not read the tokens: {error.value}</Notice>}
      {list !== null && list.length === 0 && <p class="hint">No tokens yet.</p>}
      {list !== null && list.length > 0 && (
        <div class="table-wrap">
          <table class="stack" data-testid="tokens">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Role</th>
                <th scope="col">Created</th>
                <th scope="col">Expires</th>
                <th scope="col">Last used</th>
                <th scope="col">
                  <span class="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.map((t) => {
                const expired = t.expires_at_ms !== null && t.expires_at_ms <= now;
                return (
                  <tr key={t.id} data-token={t.name}>
                    <td class="mono" data-label="Name">
                      {t.name}
                    </td>
                    <td data-label="Role">
                      <span>
                        {t.role !== null ? <Badge tone={t.role === "admin" ? "warn" : "info"}>{t.role}</Badge> : <span class="mono">{(t.scopes ?? []).join(", ")}</span>}
                      </span>
                    </td>
                    <td data-label="Created">
                      <span>
                        {when(t.created_at_ms)} <span class="hint">by {t.created_by}</span>
                      </span>
                    </td>
                    <td data-label="Expires">
                      <span>
                        {t.expires_at_ms === null ? "never" : when(t.expires_at_ms)} {expired && <Badge tone="error">expired</Badge>}
                      </span>
                    </td>
                    <td data-label="Last used">{when(t.last_used_at_ms)}</td>
                    <td data-label="Actions">
                      {revoking.value === t.id ? (
                        <span class="confirm">
                          <button type="button" class="danger small" onClick={() => void revoke(t)}>
                            Yes, revoke {t.name}
                          </button>
                          <button type="button" class="small" onClick={() => (revoking.value = null)}>
                            Cancel
                          </button>
                        </span>
                      ) : (
                        <button type="button" class="small" onClick={() => (revoking.value = t.id)} aria-label={`Revoke ${t.name}`}>
                          Revoke…
                        </button>
                      )}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
