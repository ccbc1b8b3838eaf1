import type { OutputObject, Policy, Target } from "@meshplane/client/console/v1/console_pb.js";
import { api } from "../api";
import { Badge, ErrorBox, Link, Loading } from "../components";
import { usePoll } from "../lib/hooks";
import { href, refRoute, type Route } from "../lib/route";

export const POLICY_KINDS = [
  "TrafficPolicy",
  "AccessPolicy",
  "VirtualMesh",
  "VirtualDestination",
  "WasmDeploymentPolicy",
  "AccessLogPolicy",
];

const STATES = ["ACCEPTED", "INVALID", "CONFLICT", "FAILED", "PENDING"];

function policyRoute(p: Policy): Route {
  return { page: "policy", kind: p.kind, namespace: p.namespace, name: p.name, cluster: p.cluster };
}

export function Policies({ kind, state }: { kind: string; state: string }) {
  const { data, error, loaded } = usePoll("policies", (signal) => api.listPolicies({}, { signal }));
  const all = data?.policies ?? [];
  const states = [...new Set([...STATES, ...all.map((p) => p.state).filter((s) => s !== "")])];
  const shown = all.filter((p) => (!kind || p.kind === kind) && (!state || p.state === state));
  const setFilter = (k: string, s: string) => location.replace(href({ page: "policies", kind: k, state: s }));

  return (
    <section data-testid="policies" data-loaded={data ? "true" : "false"} aria-busy={!loaded}>
      <h1>Policies</h1>
      <form className="filters" onSubmit={(e) => e.preventDefault()}>
        <label>
          Kind{" "}
          <select value={kind} onChange={(e) => setFilter(e.target.value, state)} data-testid="policy-kind-filter">
            <option value="">All kinds</option>
            {POLICY_KINDS.map((k) => (
              <option key={k}>{k}</option>
            ))}
          </select>
        </label>
        <label>
          State{" "}
          <select value={state} onChange={(e) => setFilter(kind, e.target.value)} data-testid="policy-state-filter">
            <option value="">All states</option>
            {states.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
        <span className="muted" aria-live="polite">
          {data ? `${shown.length} of ${all.length}` : ""}
        </span>
      </form>
      <ErrorBox error={error} />
      <Loading loaded={loaded} />
      {data && (
        <div className="scroll">
          <table>
            <thead>
              <tr>
                <th scope="col">Kind</th>
                <th scope="col">Namespace/name</th>
                <th scope="col">Cluster</th>
                <th scope="col">State</th>
                <th scope="col">Targets (acceptance order)</th>
                <th scope="col">Errors</th>
                <th scope="col">Objects</th>
              </tr>
            </thead>
            <tbody>
              {shown.map((p) => (
                <tr
                  key={`${p.kind}/${p.cluster}/${p.namespace}/${p.name}`}
                  data-testid="policy-row"
                  data-kind={p.kind}
                  data-name={p.name}
                  data-namespace={p.namespace}
                  data-cluster={p.cluster}
                  data-state={p.state}
                >
                  <td>{p.kind}</td>
                  <th scope="row">
                    <Link to={policyRoute(p)}>
                      {p.namespace}/{p.name}
                    </Link>
                  </th>
                  <td>{p.cluster}</td>
                  <td>
                    <Badge value={p.state} />
                    {p.lastKnownGood && <div className="small warn-text">last valid version in force</div>}
                  </td>
                  <td>
                    <ul className="plain">
                      {[...p.targets]
                        .sort((a, b) => a.acceptanceOrder - b.acceptanceOrder)
                        .map((t, i) => (
                          <li key={i}>
                            {t.state === "ACCEPTED" && <span className="order">#{t.acceptanceOrder}</span>} <TargetLink t={t} /> <Badge value={t.state} />
                          </li>
                        ))}
                    </ul>
                  </td>
                  <td>
                    <Errors errors={p.errors} />
                  </td>
                  <td className="num">{p.objects.length}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {shown.length === 0 && <p className="muted">No policies{kind || state ? " match the filter" : ""}.</p>}
        </div>
      )}
    </section>
  );
}

function Errors({ errors }: { errors: string[] }) {
  if (errors.length === 0) return null;
  return (
    <ul className="plain errors">
      {errors.map((e, i) => (
        <li key={i} data-testid="policy-error">
          {e}
        </li>
      ))}
    </ul>
  );
}

/** TargetLink links "destination <key>" to the destination's page where the key reads as one. */
function TargetLink({ t }: { t: Target }) {
  const sp = t.target.indexOf(" ");
  const r = sp > 0 ? refRoute(`${t.target.slice(0, sp)}/${t.target.slice(sp + 1)}`) : undefined;
  return r ? <Link to={r}>{t.target}</Link> : <span>{t.target}</span>;
}

export function PolicyPage({ route }: { route: Extract<Route, { page: "policy" }> }) {
  const { data, error, loaded } = usePoll(`policy/${route.kind}`, (signal) => api.listPolicies({ kind: route.kind }, { signal }));
  const matches = (data?.policies ?? []).filter(
    (p) => p.kind === route.kind && p.name === route.name && p.namespace === route.namespace && (!route.cluster || p.cluster === route.cluster),
  );
  return (
    <section data-testid="policy" data-loaded={data ? "true" : "false"} aria-busy={!loaded}>
      <p className="crumbs">
        <Link to={{ page: "policies", kind: route.kind, state: "" }}>Policies</Link> › {route.kind}
      </p>
      <h1>
        {route.kind} {route.namespace}/{route.name}
        {route.cluster && <span className="muted"> in {route.cluster}</span>}
      </h1>
      <ErrorBox error={error} />
      <Loading loaded={loaded} />
      {data && matches.length === 0 && <p>No such policy (it may have been deleted, or you may not list its kind in its namespace).</p>}
      {matches.map((p) => (
        <PolicyDetails key={p.cluster} p={p} />
      ))}
    </section>
  );
}

function PolicyDetails({ p }: { p: Policy }) {
  const byCluster = new Map<string, OutputObject[]>();
  for (const o of p.objects) {
    const l = byCluster.get(o.cluster);
    if (l) l.push(o);
    else byCluster.set(o.cluster, [o]);
  }
  return (
    <article className="card">
      <h2>Read from cluster {p.cluster}</h2>
      <dl className="details">
        <dt>State</dt>
        <dd>
          <span data-testid="policy-state" data-state={p.state}>
            <Badge value={p.state} />
          </span>
          {p.lastKnownGood && <span className="warn-text"> An invalid edit left the last valid version in force.</span>}
        </dd>
        <dt>Observed generation</dt>
        <dd>{String(p.observedGeneration)}</dd>
      </dl>
      {p.errors.length > 0 && (
        <>
          <h3>Errors</h3>
          <Errors errors={p.errors} />
        </>
      )}
      <h3>Targets</h3>
      {p.targets.length === 0 ? (
        <p className="muted">No targets.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th scope="col">Acceptance order (from 0)</th>
              <th scope="col">Target</th>
              <th scope="col">State</th>
              <th scope="col">Errors</th>
              <th scope="col">Warnings</th>
            </tr>
          </thead>
          <tbody>
            {[...p.targets]
              .sort((a, b) => a.acceptanceOrder - b.acceptanceOrder)
              .map((t, i) => (
                <tr key={i} data-testid="policy-target">
                  <td className="num">{t.state === "ACCEPTED" ? t.acceptanceOrder : "—"}</td>
                  <th scope="row">
                    <TargetLink t={t} />
                  </th>
                  <td>
                    <Badge value={t.state} />
                  </td>
                  <td>
                    <Errors errors={t.errors} />
                  </td>
                  <td>{t.warnings.join("; ")}</td>
                </tr>
              ))}
          </tbody>
        </table>
      )}
      <h3>Istio objects produced</h3>
      {p.objects.length === 0 && <p className="muted">None.</p>}
      {[...byCluster.entries()].map(([cluster, objs]) => (
        <section key={cluster}>
          <h4>
            In <Link to={{ page: "output", cluster }}>{cluster}</Link>
          </h4>
          <ObjectTable objects={objs} />
        </section>
      ))}
      {p.statusJson && (
        <details>
          <summary>Status as translation wrote it</summary>
          <pre className="code">{pretty(p.statusJson)}</pre>
        </details>
      )}
    </article>
  );
}

function pretty(json: string): string {
  try {
    return JSON.stringify(JSON.parse(json), null, 2);
  } catch {
    return json;
  }
}

export function ObjectTable({ objects, testid = "policy-object" }: { objects: OutputObject[]; testid?: string }) {
  return (
    <table>
      <thead>
        <tr>
          <th scope="col">Kind</th>
          <th scope="col">Namespace/name</th>
          <th scope="col">Cluster</th>
          <th scope="col">API version</th>
        </tr>
      </thead>
      <tbody>
        {objects.map((o) => (
          <tr
            key={`${o.cluster}/${o.kind}/${o.namespace}/${o.name}`}
            data-testid={testid}
            data-kind={o.kind}
            data-name={o.name}
            data-namespace={o.namespace}
            data-cluster={o.cluster}
          >
            <td>{o.kind}</td>
            <th scope="row">
              {o.namespace}/{o.name}
            </th>
            <td>
              <Link to={{ page: "output", cluster: o.cluster }}>{o.cluster}</Link>
            </td>
            <td className="muted">{o.apiVersion}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
