import type { ClusterOverview } from "@meshplane/client/console/v1/console_pb.js";
import { api } from "../api";
import { Badge, ErrorBox, Link, Loading, When } from "../components";
import { millis, shortVersion } from "../lib/format";
import { usePoll } from "../lib/hooks";

export function Overview() {
  const { data, error, loaded } = usePoll("overview", (signal) => api.getOverview({}, { signal }));
  const now = Date.now();
  return (
    <section data-testid="overview" data-loaded={data ? "true" : "false"} aria-busy={!loaded}>
      <h1>Overview</h1>
      <ErrorBox error={error} />
      <Loading loaded={loaded} />
      {data && (
        <>
          <p className={data.ok ? "status good" : "status bad"} role="status">
            {data.ok ? "Everything checks out." : `${data.problems.length} problem${data.problems.length === 1 ? "" : "s"}.`}
          </p>
          {data.problems.length > 0 && (
            <section aria-labelledby="problems-h">
              <h2 id="problems-h">Problems</h2>
              <ol className="problems">
                {data.problems.map((p, i) => (
                  <li key={i} data-testid="problem">
                    {p}
                  </li>
                ))}
              </ol>
            </section>
          )}
          <div className="columns">
            <section aria-labelledby="services-h">
              <h2 id="services-h">Services</h2>
              <table>
                <thead>
                  <tr>
                    <th scope="col">Service</th>
                    <th scope="col">Status</th>
                    <th scope="col">Error</th>
                  </tr>
                </thead>
                <tbody>
                  {data.services.map((s) => (
                    <tr key={s.name} data-testid="service-row" data-service={s.name}>
                      <th scope="row">{s.name}</th>
                      <td>
                        <Badge value={s.status} />
                      </td>
                      <td>{s.error}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </section>
            <section aria-labelledby="safe-h">
              <h2 id="safe-h">Safe mode</h2>
              {!data.safeMode?.checked ? (
                <p className="muted">Not checked: translation could not be asked.</p>
              ) : data.safeMode.on ? (
                <div data-testid="safe-mode" data-on="true">
                  <p>
                    <Badge value="on" tone="warn" /> Translation holds its output until every registered cluster has pushed.
                  </p>
                  {data.safeMode.waitingFor.length > 0 && <p>Waiting for: {data.safeMode.waitingFor.join(", ")}</p>}
                  {data.safeMode.missingClusters.length > 0 && <p>Missing: {data.safeMode.missingClusters.join(", ")}</p>}
                </div>
              ) : (
                <p data-testid="safe-mode" data-on="false">
                  <Badge value="off" tone="good" /> Translation publishes normally.
                </p>
              )}
            </section>
          </div>
          <section aria-labelledby="clusters-h">
            <h2 id="clusters-h">Clusters</h2>
            <div className="scroll">
              <table className="clusters">
                <thead>
                  <tr>
                    <th scope="col">Cluster</th>
                    <th scope="col">Push</th>
                    <th scope="col">Pull</th>
                    <th scope="col">Input version</th>
                    <th scope="col">Output: latest / applied</th>
                    <th scope="col">Apply errors</th>
                    <th scope="col">Held deletions</th>
                    <th scope="col">Registration</th>
                    <th scope="col">Certificate expires</th>
                    <th scope="col">Refused push</th>
                    <th scope="col">Agent</th>
                  </tr>
                </thead>
                <tbody>
                  {data.clusters.map((c) => (
                    <ClusterRow key={c.cluster} c={c} now={now} />
                  ))}
                </tbody>
              </table>
            </div>
          </section>
          {data.notes.length > 0 && (
            <section aria-labelledby="notes-h">
              <h2 id="notes-h">Checks that could not run</h2>
              <ul>
                {data.notes.map((n, i) => (
                  <li key={i}>{n}</li>
                ))}
              </ul>
            </section>
          )}
        </>
      )}
    </section>
  );
}

function ClusterRow({ c, now }: { c: ClusterOverview; now: number }) {
  return (
    <tr data-testid="cluster-row" data-cluster={c.cluster} data-push={c.push} data-pull={c.pull} data-up-to-date={String(c.upToDate)}>
      <th scope="row">
        <Link to={{ page: "output", cluster: c.cluster }}>{c.cluster}</Link>
        {c.management && <span className="muted"> (management)</span>}
      </th>
      <td>{c.management ? <span className="muted">—</span> : <Badge value={c.push} />}</td>
      <td>{c.management ? <span className="muted">—</span> : <Badge value={c.pull} />}</td>
      <td>
        <code title={c.inputVersion}>{shortVersion(c.inputVersion)}</code>
        {c.lastPush && (
          <div className="small">
            pushed <When ms={millis(c.lastPush)} now={now} />
          </div>
        )}
      </td>
      <td>
        <code title={c.latestVersion}>{shortVersion(c.latestVersion) || "—"}</code> /{" "}
        <code title={c.appliedVersion}>{shortVersion(c.appliedVersion) || "—"}</code>{" "}
        {c.upToDate ? <Badge value="yes" /> : <Badge value="behind" />}
        <span className="sr-only">{c.upToDate ? "up to date" : "not up to date"}</span>
      </td>
      <td className={c.applyErrors > 0 ? "num bad-text" : "num"}>{c.applyErrors}</td>
      <td className={c.heldDeletions > 0 ? "num warn-text" : "num"}>{c.heldDeletions}</td>
      <td>{c.registration ? <Badge value={c.registration} /> : <span className="muted">not checked</span>}</td>
      <td>
        <When ms={millis(c.certExpiresAt)} now={now} />
      </td>
      <td className={c.refused ? "bad-text" : ""}>{c.refused || <span className="muted">—</span>}</td>
      <td>{c.agentVersion || <span className="muted">—</span>}</td>
    </tr>
  );
}
