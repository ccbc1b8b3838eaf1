import { useEffect, useRef, useState } from "react";
import { api, type ApiError, apiError, isCanceled } from "../api";
import { ErrorBox, Loading } from "../components";
import { type DiffLine, lineDiff } from "../lib/diff";
import { usePoll } from "../lib/hooks";
import { href } from "../lib/route";

export function Output({ cluster, canListClusters }: { cluster: string; canListClusters: boolean }) {
  const [clusters, setClusters] = useState<string[]>([]);
  useEffect(() => {
    if (!canListClusters) return;
    const ctl = new AbortController();
    api.getOverview({}, { signal: ctl.signal }).then(
      (o) => setClusters(o.clusters.map((c) => c.cluster)),
      () => {},
    );
    return () => ctl.abort();
  }, [canListClusters]);

  const [draft, setDraft] = useState(cluster);
  useEffect(() => setDraft(cluster), [cluster]);

  return (
    <section data-testid="output-page">
      <h1>Output{cluster && <span className="muted"> of {cluster}</span>}</h1>
      <form
        className="filters"
        onSubmit={(e) => {
          e.preventDefault();
          location.assign(href({ page: "output", cluster: draft.trim() }));
        }}
      >
        <label>
          Cluster{" "}
          {clusters.length > 0 ? (
            <select
              data-testid="output-cluster"
              value={cluster}
              onChange={(e) => location.assign(href({ page: "output", cluster: e.target.value }))}
            >
              {!cluster && <option value="">Choose a cluster</option>}
              {[...new Set([...clusters, ...(cluster ? [cluster] : [])])].map((c) => (
                <option key={c}>{c}</option>
              ))}
            </select>
          ) : (
            <input data-testid="output-cluster" value={draft} onChange={(e) => setDraft(e.target.value)} placeholder="cluster name" />
          )}
        </label>
        {clusters.length === 0 && <button type="submit">Show</button>}
      </form>
      {cluster ? <ClusterOutput key={cluster} cluster={cluster} /> : <p className="muted">Choose a cluster to see its output snapshot.</p>}
    </section>
  );
}

function ClusterOutput({ cluster }: { cluster: string }) {
  // "" follows the latest version.
  const [version, setVersion] = useState("");
  const { data, error, loaded } = usePoll(`output/${cluster}/${version}`, (signal) => api.getOutput({ cluster, version }, { signal }));
  const versions = data?.versions ?? [];
  const lines = data ? data.yaml.split("\n").length : 0;

  return (
    <>
      <ErrorBox error={error} />
      <Loading loaded={loaded} />
      {data && (
        <>
          <div className="filters">
            <label>
              Version{" "}
              <select value={version} onChange={(e) => setVersion(e.target.value)} data-testid="output-version">
                <option value="">Latest{versions[0] ? ` (${versions[0]})` : ""}</option>
                {versions.map((v) => (
                  <option key={v} value={v}>
                    {v}
                  </option>
                ))}
              </select>
            </label>
            <span className="muted">
              Showing {data.version || "—"}, {lines} lines. The console keeps the versions it has seen since it started.
            </span>
          </div>
          <pre className="code yaml" data-testid="output-yaml" data-version={data.version} tabIndex={0} aria-label={`Output YAML of ${cluster}`}>
            {data.yaml || "# empty output"}
          </pre>
          <VersionDiff cluster={cluster} versions={versions} />
        </>
      )}
    </>
  );
}

function VersionDiff({ cluster, versions }: { cluster: string; versions: string[] }) {
  const [from, setFrom] = useState("");
  const [to, setTo] = useState("");
  const a = from || versions[1] || "";
  const b = to || versions[0] || "";
  const cache = useRef(new Map<string, string>());
  const [diff, setDiff] = useState<{ lines: DiffLine[]; error?: ApiError; key: string }>();

  useEffect(() => {
    if (!a || !b || a === b) return;
    const ctl = new AbortController();
    const get = async (v: string) => {
      const hit = cache.current.get(v);
      if (hit !== undefined) return hit;
      const res = await api.getOutput({ cluster, version: v }, { signal: ctl.signal });
      cache.current.set(v, res.yaml);
      return res.yaml;
    };
    Promise.all([get(a), get(b)]).then(
      ([x, y]) => setDiff({ lines: lineDiff(x, y), key: `${a}..${b}` }),
      (e) => {
        if (!isCanceled(e)) setDiff({ lines: [], error: apiError(e), key: `${a}..${b}` });
      },
    );
    return () => ctl.abort();
  }, [cluster, a, b]);

  return (
    <section aria-labelledby="diff-h">
      <h2 id="diff-h">Diff between two versions</h2>
      {versions.length < 2 ? (
        <p className="muted" data-testid="output-diff" data-state="one-version">
          The console holds one version of this cluster's output so far; a diff needs two.
        </p>
      ) : (
        <>
          <div className="filters">
            <label>
              From{" "}
              <select value={a} onChange={(e) => setFrom(e.target.value)} data-testid="diff-from">
                {versions.map((v) => (
                  <option key={v}>{v}</option>
                ))}
              </select>
            </label>
            <label>
              To{" "}
              <select value={b} onChange={(e) => setTo(e.target.value)} data-testid="diff-to">
                {versions.map((v) => (
                  <option key={v}>{v}</option>
                ))}
              </select>
            </label>
          </div>
          {a === b ? (
            <p className="muted" data-testid="output-diff" data-state="same">
              Choose two different versions.
            </p>
          ) : diff?.key !== `${a}..${b}` ? (
            <p className="muted" data-testid="output-diff" data-state="loading">
              Loading…
            </p>
          ) : diff.error ? (
            <div data-testid="output-diff" data-state="error">
              <ErrorBox error={diff.error} />
            </div>
          ) : diff.lines.length === 0 ? (
            <p data-testid="output-diff" data-state="equal">
              The two versions are identical.
            </p>
          ) : (
            <pre className="code diff" data-testid="output-diff" data-state="done" tabIndex={0} aria-label={`Diff from ${a} to ${b}`}>
              {diff.lines.map((l, i) => (
                <span key={i} className={`dl ${l.kind}`}>
                  {l.text}
                  {"\n"}
                </span>
              ))}
            </pre>
          )}
        </>
      )}
    </section>
  );
}
