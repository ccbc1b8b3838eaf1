// Formatting shared by the pages. Pure functions of their inputs (the
// current time is an argument), so the tests need no fake clock.

/** A protobuf Timestamp or Duration as protobuf-es gives them. */
export interface Seconds {
  seconds: bigint;
  nanos: number;
}

export function millis(t: Seconds | undefined): number | undefined {
  if (!t) return undefined;
  return Number(t.seconds) * 1000 + Math.floor(t.nanos / 1e6);
}

/** absolute formats an instant in UTC, to the second: "2026-11-26 19:21:05Z". */
export function absolute(ms: number | undefined): string {
  if (ms === undefined) return "";
  return new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

/** span formats a positive length of time coarsely: "45s", "12m", "3h 5m", "4d 2h". */
export function span(ms: number): string {
  const s = Math.floor(Math.abs(ms) / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 24) return m % 60 ? `${h}h ${m % 60}m` : `${h}h`;
  const d = Math.floor(h / 24);
  return h % 24 ? `${d}d ${h % 24}h` : `${d}d`;
}

/** relative formats an instant against now: "in 3d 4h", "5m ago", "now". */
export function relative(ms: number | undefined, now: number): string {
  if (ms === undefined) return "";
  const d = ms - now;
  if (Math.abs(d) < 1000) return "now";
  return d > 0 ? `in ${span(d)}` : `${span(d)} ago`;
}

/** duration formats a protobuf Duration for a log row: "850µs", "12.3ms", "1.20s". */
export function duration(d: Seconds | undefined): string {
  if (!d) return "";
  const us = Number(d.seconds) * 1e6 + d.nanos / 1e3;
  if (us < 1000) return `${Math.round(us)}µs`;
  if (us < 1e6) return `${(us / 1000).toFixed(us < 1e4 ? 2 : 1)}ms`;
  return `${(us / 1e6).toFixed(2)}s`;
}

/** rate formats a per-second rate with two significant decimals: "0.25/s", "12/s". */
export function rate(perSecond: number): string {
  if (!Number.isFinite(perSecond) || perSecond <= 0) return "0/s";
  if (perSecond >= 10) return `${Math.round(perSecond)}/s`;
  if (perSecond >= 1) return `${perSecond.toFixed(1)}/s`;
  return `${perSecond.toFixed(2)}/s`;
}

/** shortVersion keeps a version readable in a table cell: the first 12 characters. */
export function shortVersion(v: string): string {
  return v.length > 12 ? v.slice(0, 12) + "…" : v;
}

/** clock formats a log time as HH:MM:SS.mmm UTC. */
export function clock(ms: number | undefined): string {
  if (ms === undefined) return "";
  return new Date(ms).toISOString().slice(11, 23);
}
