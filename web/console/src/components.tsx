import type { ReactNode } from "react";
import type { ApiError } from "./api";
import { absolute, relative } from "./lib/format";
import { href, type Route } from "./lib/route";

export function ErrorBox({ error }: { error: ApiError | string | undefined }) {
  if (!error) return null;
  const msg = typeof error === "string" ? error : error.message;
  return (
    <div className="error" role="alert" data-testid="error">
      {msg}
    </div>
  );
}

export function Link({ to, children, className }: { to: Route; children: ReactNode; className?: string }) {
  return (
    <a href={href(to)} className={className}>
      {children}
    </a>
  );
}

const GOOD = new Set(["ACCEPTED", "APPROVED", "SERVING", "connected", "yes"]);
const WARN = new Set(["PENDING", "stale", "LAST_KNOWN_GOOD"]);

/** Badge shows a state word in a colour; the word itself carries the meaning. */
export function Badge({ value, testid, tone: forced }: { value: string; testid?: string; tone?: "good" | "warn" | "bad" }) {
  const tone = forced ?? (GOOD.has(value) ? "good" : WARN.has(value) ? "warn" : value === "" ? "none" : "bad");
  return (
    <span className={`badge ${tone}`} data-testid={testid}>
      {value || "—"}
    </span>
  );
}

export function When({ ms, now }: { ms: number | undefined; now: number }) {
  if (ms === undefined) return <span className="muted">—</span>;
  return (
    <time dateTime={new Date(ms).toISOString()} title={absolute(ms)}>
      {relative(ms, now)} <span className="muted">({absolute(ms)})</span>
    </time>
  );
}

export function Loading({ loaded }: { loaded: boolean }) {
  return loaded ? null : <p className="muted" aria-live="polite">Loading…</p>;
}
