// Hash routes, so that the console serves one index.html and the Go side
// needs no knowledge of the app's pages.

export type View = "overview" | "graph" | "policies" | "describe" | "output" | "accesslogs";

export type Route =
  | { page: "signin" }
  | { page: "overview" }
  | { page: "graph" }
  | { page: "policies"; kind: string; state: string }
  | { page: "policy"; kind: string; namespace: string; name: string; cluster: string }
  | { page: "destination"; cluster: string; namespace: string; name: string }
  | { page: "workload"; cluster: string; namespace: string; name: string }
  | { page: "output"; cluster: string }
  | { page: "accesslogs"; filters: LogFilters }
  | { page: "notfound"; path: string };

export interface LogFilters {
  cluster: string;
  namespace: string;
  workload: string;
  policy: string;
  minCode: number;
}

export const emptyLogFilters: LogFilters = { cluster: "", namespace: "", workload: "", policy: "", minCode: 0 };

/** The view (as WhoAmI names it) a route needs. */
export function viewOf(r: Route): View | undefined {
  switch (r.page) {
    case "overview":
    case "graph":
    case "policies":
    case "output":
    case "accesslogs":
      return r.page;
    case "policy":
      return "policies";
    case "destination":
    case "workload":
      return "describe";
    default:
      return undefined;
  }
}

function dec(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

const enc = encodeURIComponent;

function query(params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== "" && v !== 0) q.set(k, String(v));
  }
  const s = q.toString();
  return s ? "?" + s : "";
}

/** parseRoute reads a location.hash ("#/policies/TrafficPolicy/ns/name?cluster=c"). */
export function parseRoute(hash: string): Route {
  let h = hash.startsWith("#") ? hash.slice(1) : hash;
  if (!h.startsWith("/")) h = "/" + h;
  const qi = h.indexOf("?");
  const path = qi < 0 ? h : h.slice(0, qi);
  const q = new URLSearchParams(qi < 0 ? "" : h.slice(qi + 1));
  const seg = path.split("/").filter((s) => s !== "").map(dec);
  const [head, ...rest] = seg;
  switch (head) {
    case undefined:
    case "overview":
      if (rest.length === 0) return { page: "overview" };
      break;
    case "signin":
      return { page: "signin" };
    case "graph":
      if (rest.length === 0) return { page: "graph" };
      break;
    case "policies":
      if (rest.length === 0) return { page: "policies", kind: q.get("kind") ?? "", state: q.get("state") ?? "" };
      if (rest.length === 3) {
        return { page: "policy", kind: rest[0], namespace: rest[1], name: rest[2], cluster: q.get("cluster") ?? "" };
      }
      break;
    case "destinations":
    case "workloads":
      if (rest.length === 3) {
        return {
          page: head === "destinations" ? "destination" : "workload",
          cluster: rest[0],
          namespace: rest[1],
          name: rest[2],
        };
      }
      break;
    case "output":
      if (rest.length <= 1) return { page: "output", cluster: rest[0] ?? "" };
      break;
    case "accesslogs":
      if (rest.length === 0) {
        const code = Number.parseInt(q.get("code") ?? "", 10);
        return {
          page: "accesslogs",
          filters: {
            cluster: q.get("cluster") ?? "",
            namespace: q.get("namespace") ?? "",
            workload: q.get("workload") ?? "",
            policy: q.get("policy") ?? "",
            minCode: Number.isFinite(code) && code > 0 ? code : 0,
          },
        };
      }
      break;
  }
  return { page: "notfound", path };
}

/** href formats a route as a hash link; parseRoute(href(r)) gives r back. */
export function href(r: Route): string {
  switch (r.page) {
    case "signin":
    case "overview":
    case "graph":
      return "#/" + r.page;
    case "policies":
      return "#/policies" + query({ kind: r.kind, state: r.state });
    case "policy":
      return `#/policies/${enc(r.kind)}/${enc(r.namespace)}/${enc(r.name)}` + query({ cluster: r.cluster });
    case "destination":
    case "workload":
      return `#/${r.page}s/${enc(r.cluster)}/${enc(r.namespace)}/${enc(r.name)}`;
    case "output":
      return r.cluster ? `#/output/${enc(r.cluster)}` : "#/output";
    case "accesslogs": {
      const f = r.filters;
      return "#/accesslogs" + query({ cluster: f.cluster, namespace: f.namespace, workload: f.workload, policy: f.policy, code: f.minCode });
    }
    case "notfound":
      return "#" + r.path;
  }
}

/**
 * refRoute turns a "<kind>/<name>.<namespace>.<cluster>" reference (the
 * graph's node ids, Description.related) into a page. Namespaces are DNS
 * labels (no dots); a name may have dots, so the last two dot-separated
 * parts are the namespace and the cluster.
 */
export function refRoute(ref: string): Route | undefined {
  const slash = ref.indexOf("/");
  if (slash <= 0) return undefined;
  const kind = ref.slice(0, slash).toLowerCase();
  const parts = ref.slice(slash + 1).split(".");
  if (parts.length < 3) return undefined;
  const cluster = parts[parts.length - 1];
  const namespace = parts[parts.length - 2];
  const name = parts.slice(0, -2).join(".");
  if (!name || !namespace || !cluster) return undefined;
  switch (kind) {
    case "destination":
      return { page: "destination", cluster, namespace, name };
    case "workload":
      return { page: "workload", cluster, namespace, name };
    case "virtualdestination":
      return { page: "policy", kind: "VirtualDestination", namespace, name, cluster };
    default:
      return undefined;
  }
}

/** policyRefRoute turns a "<Kind>/<namespace>/<name>" policy reference (GraphEdge.policy) into its page. */
export function policyRefRoute(ref: string, cluster = ""): Route | undefined {
  const p = ref.split("/");
  if (p.length !== 3 || p.some((s) => s === "")) return undefined;
  return { page: "policy", kind: p[0], namespace: p[1], name: p[2], cluster };
}
