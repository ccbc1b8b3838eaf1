import { type FormEvent, useState } from "react";
import { signIn } from "../api";

export function SignIn({ onSignedIn, error: outer }: { onSignedIn: () => Promise<void>; error?: string }) {
  const [token, setToken] = useState("");
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    if (!token.trim()) {
      setError("Paste a token first.");
      return;
    }
    setBusy(true);
    setError(undefined);
    const res = await signIn(token.trim());
    setBusy(false);
    if (res.error) {
      setError(res.error);
      return;
    }
    setToken("");
    await onSignedIn();
  };

  const shown = error ?? outer;
  return (
    <main className="signin">
      <h1>Meshplane console</h1>
      <form onSubmit={submit} aria-describedby="token-help">
        <label htmlFor="token">Kubernetes bearer token</label>
        <input
          id="token"
          name="token"
          type="password"
          autoComplete="off"
          spellCheck={false}
          value={token}
          onChange={(e) => setToken(e.target.value)}
          aria-invalid={shown ? true : undefined}
          aria-errormessage={shown ? "signin-error" : undefined}
          autoFocus
        />
        <div id="token-help" className="help">
          <p>Sign in with a token of the management cluster. The console checks it with a TokenReview, and your Kubernetes RBAC decides which views you see. For a service account:</p>
          <pre>kubectl create token &lt;serviceaccount&gt; -n &lt;namespace&gt;</pre>
          <p>The token is not stored: the console keeps a session, which expires.</p>
        </div>
        {shown && (
          <p className="error" role="alert" id="signin-error" data-testid="signin-error">
            {shown}
          </p>
        )}
        <button type="submit" data-testid="signin-submit" disabled={busy}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
      </form>
    </main>
  );
}
