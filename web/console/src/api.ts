// The console's API client: the generated Connect-ES service over the
// Connect protocol (JSON) on /api, with the CSRF header the console's
// server checks on every call.

import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { ConsoleService } from "@meshplane/client/console/v1/console_pb.js";
import { CSRF_HEADER, csrfHeaders } from "./lib/cookie";

let unauthenticated: () => void = () => {};

/** onUnauthenticated sets what happens when a call finds the session gone. */
export function onUnauthenticated(f: () => void): void {
  unauthenticated = f;
}

const csrf: Interceptor = (next) => async (req) => {
  for (const [k, v] of Object.entries(csrfHeaders(document.cookie))) req.header.set(k, v);
  try {
    return await next(req);
  } catch (e) {
    if (ConnectError.from(e).code === Code.Unauthenticated) unauthenticated();
    throw e;
  }
};

export const api = createClient(
  ConsoleService,
  createConnectTransport({ baseUrl: "/api", interceptors: [csrf] }),
);

export interface ApiError {
  code: Code;
  message: string;
}

/** apiError keeps the server's own words ("user \"alice\" may not list …"). */
export function apiError(e: unknown): ApiError {
  const ce = ConnectError.from(e);
  if (ce.code === Code.Unauthenticated) unauthenticated();
  return { code: ce.code, message: ce.rawMessage || ce.message };
}

export function isCanceled(e: unknown): boolean {
  return ConnectError.from(e).code === Code.Canceled;
}

export { Code };

/** signIn posts a Kubernetes bearer token to /auth/login. */
export async function signIn(token: string): Promise<{ error?: string }> {
  let res: Response;
  try {
    res = await fetch("/auth/login", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ token }),
    });
  } catch {
    return { error: "The console could not be reached." };
  }
  if (res.ok) return {};
  let msg = "";
  try {
    const body: unknown = await res.json();
    if (body && typeof body === "object" && "error" in body && typeof body.error === "string") msg = body.error;
  } catch {
    // Not JSON: fall through to the status.
  }
  return { error: msg || `Sign-in failed (HTTP ${res.status}).` };
}

/** signOut ends the session; the console clears its cookies. */
export async function signOut(): Promise<void> {
  try {
    const res = await fetch("/auth/logout", {
      method: "POST",
      credentials: "same-origin",
      headers: { [CSRF_HEADER]: csrfHeaders(document.cookie)[CSRF_HEADER] ?? "" },
    });
    await res.text();
  } catch {
    // Signed out locally either way.
  }
}
