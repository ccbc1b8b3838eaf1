import { lazy, Suspense, useCallback, useEffect, useState } from "react";
import type { WhoAmIResponse } from "@meshplane/client/console/v1/console_pb.js";
import { api, apiError, Code, onUnauthenticated, signOut } from "./api";
import { ErrorBox } from "./components";
import { absolute, millis } from "./lib/format";
import { useRoute } from "./lib/hooks";
import { href, type Route, type View, viewOf } from "./lib/route";
import { SignIn } from "./pages/SignIn";
import { Overview } from "./pages/Overview";
import { Policies, PolicyPage } from "./pages/Policies";
import { Describe } from "./pages/Describe";
import { Output } from "./pages/Output";
import { AccessLogs } from "./pages/AccessLogs";

// Cytoscape is most of the app's weight: the graph page loads it on demand.
const Graph = lazy(() => import("./pages/Graph"));

const NAV: { view: View; route: Route; label: string }[] = [
  { view: "overview", route: { page: "overview" }, label: "Overview" },
  { view: "graph", route: { page: "graph" }, label: "Graph" },
  { view: "policies", route: { page: "policies", kind: "", state: "" }, label: "Policies" },
  { view: "output", route: { page: "output", cluster: "" }, label: "Output" },
  { view: "accesslogs", route: { page: "accesslogs", filters: { cluster: "", namespace: "", workload: "", policy: "", minCode: 0 } }, label: "Access logs" },
];

export function App() {
  const route = useRoute();
  // undefined: not asked yet; null: signed out.
  const [who, setWho] = useState<WhoAmIResponse | null | undefined>(undefined);
  const [error, setError] = useState<string>();

  const loadWho = useCallback(async () => {
    try {
      const w = await api.whoAmI({});
      setWho(w);
      setError(undefined);
      return w;
    } catch (e) {
      const err = apiError(e);
      if (err.code === Code.Unauthenticated) setWho(null);
      else setError(err.message);
      return undefined;
    }
  }, []);

  useEffect(() => {
    onUnauthenticated(() => setWho(null));
    void loadWho();
  }, [loadWho]);

  useEffect(() => {
    if (who === null && route.page !== "signin") location.replace(href({ page: "signin" }));
  }, [who, route.page]);

  // A bare "#/" opens the first view the user may open, not a page that
  // would only say they may not.
  useEffect(() => {
    if (!who || !/^#?\/?$/.test(location.hash) || who.views.includes("overview")) return;
    const first = NAV.find((n) => who.views.includes(n.view));
    if (first) location.replace(href(first.route));
  }, [who, route]);

  useEffect(() => {
    const view = viewOf(route);
    document.title = `${view ? view[0].toUpperCase() + view.slice(1) + " · " : ""}Meshplane console`;
  }, [route]);

  if (who === undefined) {
    return (
      <main className="center">
        {error ? (
          <div>
            <ErrorBox error={`The console could not be reached: ${error}`} />
            <button type="button" onClick={() => void loadWho()}>
              Try again
            </button>
          </div>
        ) : (
          <p className="muted">Loading…</p>
        )}
      </main>
    );
  }
  if (who === null || route.page === "signin") {
    return (
      <SignIn
        onSignedIn={async () => {
          const w = await loadWho();
          if (!w) return;
          // The overview, or the first view the user may open.
          const first = w.views.includes("overview") ? undefined : NAV.find((n) => w.views.includes(n.view));
          location.assign(href(first ? first.route : { page: "overview" }));
        }}
        error={error}
      />
    );
  }

  const current = viewOf(route);
  return (
    <>
      <a className="skip" href="#main" onClick={(e) => { e.preventDefault(); document.getElementById("main")?.focus(); }}>
        Skip to content
      </a>
      <header className="top">
        <span className="brand">Meshplane</span>
        <nav aria-label="Views">
          <ul>
            {NAV.filter((n) => who.views.includes(n.view)).map((n) => (
              <li key={n.view}>
                <a href={href(n.route)} data-testid={`nav-${n.view}`} aria-current={current === n.view ? "page" : undefined}>
                  {n.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <span className="user" title={who.sessionExpiresAt ? `Session expires at ${absolute(millis(who.sessionExpiresAt))}` : undefined}>
          Signed in as <strong data-testid="user">{who.username}</strong>
        </span>
        <button
          type="button"
          data-testid="signout"
          onClick={async () => {
            await signOut();
            setWho(null);
          }}
        >
          Sign out
        </button>
      </header>
      <main id="main" tabIndex={-1}>
        <Page route={route} views={who.views} />
      </main>
    </>
  );
}

function Page({ route, views }: { route: Route; views: string[] }) {
  switch (route.page) {
    case "overview":
      return <Overview />;
    case "graph":
      return (
        <Suspense fallback={<p className="muted">Loading the graph…</p>}>
          <Graph />
        </Suspense>
      );
    case "policies":
      return <Policies kind={route.kind} state={route.state} />;
    case "policy":
      return <PolicyPage route={route} />;
    case "destination":
    case "workload":
      return <Describe kind={route.page} cluster={route.cluster} namespace={route.namespace} name={route.name} />;
    case "output":
      return <Output cluster={route.cluster} canListClusters={views.includes("overview")} />;
    case "accesslogs":
      return <AccessLogs filters={route.filters} />;
    default:
      return (
        <section>
          <h1>Not found</h1>
          <p>
            No page at <code>{route.page === "notfound" ? route.path : ""}</code>. <a href={href({ page: "overview" })}>Go to the overview</a>.
          </p>
        </section>
      );
  }
}
