// The console's session cookie is HttpOnly; its CSRF cookie (mp_csrf) is
// readable on purpose: the browser app echoes it in X-CSRF-Token on every
// API call and on sign-out, which a cross-site page cannot do.

export const CSRF_COOKIE = "mp_csrf";
export const CSRF_HEADER = "X-CSRF-Token";

/** readCookie returns the named cookie's value from a document.cookie string, or "". */
export function readCookie(cookieString: string, name: string): string {
  for (const part of cookieString.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() !== name) continue;
    const raw = part.slice(eq + 1).trim();
    try {
      return decodeURIComponent(raw);
    } catch {
      return raw;
    }
  }
  return "";
}

/** csrfHeaders returns the header the console's API and /auth/logout need. */
export function csrfHeaders(cookieString: string): Record<string, string> {
  const token = readCookie(cookieString, CSRF_COOKIE);
  return token ? { [CSRF_HEADER]: token } : {};
}
