import { describe, expect, it } from "vitest";
import { csrfHeaders, readCookie } from "./cookie";

describe("readCookie", () => {
  it.each([
    ["", "mp_csrf", ""],
    ["mp_csrf=abc", "mp_csrf", "abc"],
    ["a=1; mp_csrf=x-y_z; b=2", "mp_csrf", "x-y_z"],
    ["xmp_csrf=no; mp_csrf=yes", "mp_csrf", "yes"],
    ["mp_csrf=a%3Db", "mp_csrf", "a=b"],
    ["mp_csrf=%E0%A4%A", "mp_csrf", "%E0%A4%A"],
    ["novalue; mp_csrf=v", "mp_csrf", "v"],
    ["mp_session=s", "mp_csrf", ""],
  ])("%j %s", (cookies, name, want) => {
    expect(readCookie(cookies, name)).toBe(want);
  });
});

describe("csrfHeaders", () => {
  it("sends the cookie's value", () => {
    expect(csrfHeaders("mp_csrf=tok")).toEqual({ "X-CSRF-Token": "tok" });
  });
  it("sends nothing without the cookie", () => {
    expect(csrfHeaders("other=1")).toEqual({});
  });
});
