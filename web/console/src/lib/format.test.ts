import { describe, expect, it } from "vitest";
import { absolute, clock, duration, millis, rate, relative, shortVersion, span } from "./format";
import { prepend } from "./buffer";

describe("time", () => {
  const now = Date.UTC(2026, 10, 26, 12, 0, 0);
  it("converts timestamps", () => {
    expect(millis({ seconds: 10n, nanos: 5_000_000 })).toBe(10_005);
    expect(millis(undefined)).toBeUndefined();
  });
  it("formats absolute instants in UTC", () => {
    expect(absolute(now)).toBe("2026-11-26 12:00:00Z");
    expect(absolute(undefined)).toBe("");
  });
  it.each([
    [0, "0s"],
    [59_999, "59s"],
    [60_000, "1m"],
    [3_600_000, "1h"],
    [3_900_000, "1h 5m"],
    [86_400_000, "1d"],
    [90_000_000, "1d 1h"],
  ])("span %d", (ms, want) => expect(span(ms)).toBe(want));
  it("formats relative instants", () => {
    expect(relative(now + 3 * 86_400_000 + 4 * 3_600_000, now)).toBe("in 3d 4h");
    expect(relative(now - 5 * 60_000, now)).toBe("5m ago");
    expect(relative(now + 200, now)).toBe("now");
    expect(relative(undefined, now)).toBe("");
  });
  it("formats log clocks", () => {
    expect(clock(now + 123)).toBe("12:00:00.123");
  });
});

describe("numbers", () => {
  it.each([
    [{ seconds: 0n, nanos: 850_000 }, "850µs"],
    [{ seconds: 0n, nanos: 1_234_000 }, "1.23ms"],
    [{ seconds: 0n, nanos: 12_345_000 }, "12.3ms"],
    [{ seconds: 1n, nanos: 200_000_000 }, "1.20s"],
  ])("duration #%#", (d, want) => expect(duration(d)).toBe(want));
  it.each([
    [0, "0/s"],
    [-1, "0/s"],
    [Number.NaN, "0/s"],
    [0.25, "0.25/s"],
    [2.34, "2.3/s"],
    [12.6, "13/s"],
  ])("rate %d", (r, want) => expect(rate(r)).toBe(want));
  it("shortens versions", () => {
    expect(shortVersion("abc")).toBe("abc");
    expect(shortVersion("0123456789abcdef")).toBe("0123456789ab…");
  });
});

describe("prepend", () => {
  it("keeps the newest first and bounds the list", () => {
    expect(prepend([3, 2, 1], [4, 5], 4)).toEqual([5, 4, 3, 2]);
    expect(prepend([], [1, 2, 3, 4, 5], 3)).toEqual([5, 4, 3]);
    expect(prepend([1], [], 3)).toEqual([1]);
  });
});
