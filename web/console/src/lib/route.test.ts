import { describe, expect, it } from "vitest";
import { href, parseRoute, policyRefRoute, refRoute, type Route, viewOf } from "./route";

describe("parseRoute", () => {
  it.each<[string, Route]>([
    ["", { page: "overview" }],
    ["#", { page: "overview" }],
    ["#/", { page: "overview" }],
    ["#/overview", { page: "overview" }],
    ["#/signin", { page: "signin" }],
    ["#/graph", { page: "graph" }],
    ["#/policies", { page: "policies", kind: "", state: "" }],
    ["#/policies?kind=AccessPolicy&state=INVALID", { page: "policies", kind: "AccessPolicy", state: "INVALID" }],
    [
      "#/policies/TrafficPolicy/bookinfo/retries?cluster=east",
      { page: "policy", kind: "TrafficPolicy", namespace: "bookinfo", name: "retries", cluster: "east" },
    ],
    ["#/policies/TrafficPolicy/ns/n", { page: "policy", kind: "TrafficPolicy", namespace: "ns", name: "n", cluster: "" }],
    ["#/destinations/east/bookinfo/reviews", { page: "destination", cluster: "east", namespace: "bookinfo", name: "reviews" }],
    ["#/workloads/west/bookinfo/reviews-v1", { page: "workload", cluster: "west", namespace: "bookinfo", name: "reviews-v1" }],
    ["#/workloads/a%2Fb/ns/x.y", { page: "workload", cluster: "a/b", namespace: "ns", name: "x.y" }],
    ["#/output", { page: "output", cluster: "" }],
    ["#/output/east", { page: "output", cluster: "east" }],
    ["#/accesslogs", { page: "accesslogs", filters: { cluster: "", namespace: "", workload: "", policy: "", minCode: 0 } }],
    [
      "#/accesslogs?cluster=east&workload=reviews-v1&code=500",
      { page: "accesslogs", filters: { cluster: "east", namespace: "", workload: "reviews-v1", policy: "", minCode: 500 } },
    ],
    ["#/accesslogs?code=abc", { page: "accesslogs", filters: { cluster: "", namespace: "", workload: "", policy: "", minCode: 0 } }],
    ["#/nope", { page: "notfound", path: "/nope" }],
    ["#/destinations/east", { page: "notfound", path: "/destinations/east" }],
    ["#/graph/extra", { page: "notfound", path: "/graph/extra" }],
  ])("%s", (hash, want) => {
    expect(parseRoute(hash)).toEqual(want);
  });
});

describe("href", () => {
  it.each<Route>([
    { page: "overview" },
    { page: "graph" },
    { page: "policies", kind: "VirtualMesh", state: "" },
    { page: "policy", kind: "TrafficPolicy", namespace: "a b", name: "c/d", cluster: "east" },
    { page: "destination", cluster: "east", namespace: "ns", name: "svc" },
    { page: "workload", cluster: "east", namespace: "ns", name: "w.x" },
    { page: "output", cluster: "west" },
    { page: "output", cluster: "" },
    { page: "accesslogs", filters: { cluster: "e", namespace: "n", workload: "w", policy: "p", minCode: 400 } },
  ])("round-trips %j", (r) => {
    expect(parseRoute(href(r))).toEqual(r);
  });
  it("formats the documented shapes", () => {
    expect(href({ page: "policy", kind: "TrafficPolicy", namespace: "ns", name: "n", cluster: "east" })).toBe(
      "#/policies/TrafficPolicy/ns/n?cluster=east",
    );
    expect(href({ page: "destination", cluster: "east", namespace: "ns", name: "svc" })).toBe("#/destinations/east/ns/svc");
  });
});

describe("refRoute", () => {
  it.each<[string, Route | undefined]>([
    ["destination/reviews.bookinfo.east", { page: "destination", cluster: "east", namespace: "bookinfo", name: "reviews" }],
    ["workload/reviews-v1.bookinfo.west", { page: "workload", cluster: "west", namespace: "bookinfo", name: "reviews-v1" }],
    ["workload/a.b.ns.c", { page: "workload", cluster: "c", namespace: "ns", name: "a.b" }],
    [
      "virtualdestination/global.ns.mgmt",
      { page: "policy", kind: "VirtualDestination", namespace: "ns", name: "global", cluster: "mgmt" },
    ],
    ["mesh/istiod.istio-system.east", undefined],
    ["cluster/east", undefined],
    ["destination/x.y", undefined],
    ["nokind", undefined],
  ])("%s", (ref, want) => {
    expect(refRoute(ref)).toEqual(want);
  });
  it("reads policy references", () => {
    expect(policyRefRoute("AccessPolicy/ns/allow", "east")).toEqual({
      page: "policy",
      kind: "AccessPolicy",
      namespace: "ns",
      name: "allow",
      cluster: "east",
    });
    expect(policyRefRoute("AccessPolicy/ns")).toBeUndefined();
  });
});

describe("viewOf", () => {
  it("maps pages to WhoAmI views", () => {
    expect(viewOf({ page: "destination", cluster: "", namespace: "", name: "" })).toBe("describe");
    expect(viewOf({ page: "policy", kind: "", namespace: "", name: "", cluster: "" })).toBe("policies");
    expect(viewOf({ page: "signin" })).toBeUndefined();
  });
});
