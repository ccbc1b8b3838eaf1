import type { Description } from "@meshplane/client/console/v1/console_pb.js";
import { api } from "../api";
import { Badge, ErrorBox, Link, Loading } from "../components";
import { usePoll } from "../lib/hooks";
import { refRoute } from "../lib/route";
import { ObjectTable } from "./Policies";

export function Describe(p: { kind: "destination" | "workload"; cluster: string; namespace: string; name: string }) {
  const key = `${p.kind}/${p.cluster}/${p.namespace}/${p.name}`;
  const { data, error, loaded } = usePoll(key, (signal) =>
    api.describe({ kind: p.kind, name: p.name, namespace: p.namespace, cluster: p.cluster }, { signal }),
  );
  return (
    <section data-testid="describe" data-kind={p.kind} data-loaded={data ? "true" : "false"} aria-busy={!loaded}>
      <p className="crumbs">{p.kind === "destination" ? "Destination" : "Workload"}</p>
      <h1>
        {p.name}.{p.namespace} <span className="muted">in {p.cluster}</span>
      </h1>
      <ErrorBox error={error} />
      <Loading loaded={loaded} />
      {data && data.descriptions.length === 0 && <p>Nothing matches: it may be gone.</p>}
      {data?.descriptions.map((d) => (
        <DescriptionCard key={`${d.kind}/${d.cluster}/${d.namespace}/${d.name}`} d={d} />
      ))}
    </section>
  );
}

function DescriptionCard({ d }: { d: Description }) {
  const applied = [...d.applied].sort((a, b) => a.acceptanceOrder - b.acceptanceOrder);
  return (
    <article className="card">
      <h2>
        {d.kind} {d.namespace}/{d.name} <span className="muted">in {d.cluster}</span>
      </h2>
      {d.details.length > 0 && (
        <dl className="details">
          {d.details.map((x, i) => (
            <div key={i}>
              <dt>{x.name}</dt>
              <dd>{x.value}</dd>
            </div>
          ))}
        </dl>
      )}
      {d.kind === "workload" && (
        <p>
          <Link to={{ page: "accesslogs", filters: { cluster: d.cluster, namespace: d.namespace, workload: d.name, policy: "", minCode: 0 } }}>
            Access logs of this workload
          </Link>
        </p>
      )}
      <h3>Related</h3>
      {d.related.length === 0 ? (
        <p className="muted">None.</p>
      ) : (
        <ul data-testid="related">
          {d.related.map((r) => {
            const to = refRoute(r);
            return <li key={r}>{to ? <Link to={to}>{r}</Link> : r}</li>;
          })}
        </ul>
      )}
      <h3>Applied policies, in acceptance order</h3>
      {applied.length === 0 ? (
        <p className="muted">None.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th scope="col">Order</th>
              <th scope="col">Kind</th>
              <th scope="col">Namespace/name</th>
              <th scope="col">Cluster</th>
            </tr>
          </thead>
          <tbody>
            {applied.map((a) => (
              <tr key={`${a.kind}/${a.cluster}/${a.namespace}/${a.name}`} data-testid="applied-policy" data-kind={a.kind} data-name={a.name}>
                <td className="num">{a.acceptanceOrder}</td>
                <td>{a.kind}</td>
                <th scope="row">
                  <Link to={{ page: "policy", kind: a.kind, namespace: a.namespace, name: a.name, cluster: a.cluster }}>
                    {a.namespace}/{a.name}
                  </Link>
                </th>
                <td>{a.cluster}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h3>Rejected policies</h3>
      {d.rejected.length === 0 ? (
        <p className="muted">None.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th scope="col">Kind</th>
              <th scope="col">Namespace/name</th>
              <th scope="col">Cluster</th>
              <th scope="col">State</th>
              <th scope="col">Errors</th>
            </tr>
          </thead>
          <tbody>
            {d.rejected.map((r) => (
              <tr key={`${r.kind}/${r.cluster}/${r.namespace}/${r.name}`} data-testid="rejected-policy" data-kind={r.kind} data-name={r.name}>
                <td>{r.kind}</td>
                <th scope="row">
                  <Link to={{ page: "policy", kind: r.kind, namespace: r.namespace, name: r.name, cluster: r.cluster }}>
                    {r.namespace}/{r.name}
                  </Link>
                </th>
                <td>{r.cluster}</td>
                <td>
                  <Badge value={r.state} />
                </td>
                <td>
                  <ul className="plain errors">
                    {r.errors.map((e, i) => (
                      <li key={i}>{e}</li>
                    ))}
                  </ul>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h3>Istio objects</h3>
      {d.objects.length === 0 ? <p className="muted">None.</p> : <ObjectTable objects={d.objects} testid="describe-object" />}
    </article>
  );
}
