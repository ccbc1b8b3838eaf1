import { useEffect, useRef, useState } from "react";
import type { AccessLogEntry } from "@meshplane/client/observability/v1/access_log_policy_pb.js";
import { api, type ApiError, apiError, Code, isCanceled } from "../api";
import { ErrorBox, Link } from "../components";
import { prepend } from "../lib/buffer";
import { clock, duration, millis } from "../lib/format";
import { href, type LogFilters } from "../lib/route";

const MAX_ROWS = 1000;
const RETRY_MS = 2000;

interface Row {
  key: number;
  e: AccessLogEntry;
}

export function AccessLogs({ filters }: { filters: LogFilters }) {
  const [rows, setRows] = useState<Row[]>([]);
  const [paused, setPaused] = useState(false);
  const [held, setHeld] = useState(0);
  const [error, setError] = useState<ApiError>();
  const [live, setLive] = useState(false);
  const pausedRef = useRef(false);
  const pending = useRef<Row[]>([]);
  const seq = useRef(0);
  const fkey = JSON.stringify(filters);

  useEffect(() => {
    const ctl = new AbortController();
    let retry: ReturnType<typeof setTimeout> | undefined;
    setRows([]);
    pending.current = [];
    setHeld(0);
    setError(undefined);

    const run = async () => {
      // A fresh tail after a reconnect replaces the rows, so nothing shows twice.
      let fresh = true;
      try {
        const stream = api.tailAccessLogs(
          {
            cluster: filters.cluster,
            namespace: filters.namespace,
            workload: filters.workload,
            policy: filters.policy,
            minResponseCode: filters.minCode,
            tail: 100,
          },
          { signal: ctl.signal },
        );
        setLive(true);
        for await (const res of stream) {
          const batch = res.entries.map((e) => ({ key: ++seq.current, e }));
          if (fresh) {
            fresh = false;
            pending.current = [];
            setRows([]);
          }
          if (batch.length === 0) continue;
          setError(undefined);
          if (pausedRef.current) {
            pending.current = pending.current.concat(batch).slice(-MAX_ROWS);
            setHeld(pending.current.length);
          } else {
            setRows((r) => prepend(r, batch, MAX_ROWS));
          }
        }
      } catch (e) {
        if (ctl.signal.aborted || isCanceled(e)) return;
        const err = apiError(e);
        setError(err);
        setLive(false);
        if (err.code === Code.PermissionDenied || err.code === Code.Unauthenticated) return;
      }
      if (ctl.signal.aborted) return;
      setLive(false);
      retry = setTimeout(run, RETRY_MS);
    };
    void run();
    return () => {
      ctl.abort();
      clearTimeout(retry);
      setLive(false);
    };
    // fkey stands for the filters: a new object with the same values must
    // not restart the stream.
  }, [fkey]);

  const togglePause = () => {
    const next = !paused;
    pausedRef.current = next;
    setPaused(next);
    if (!next && pending.current.length > 0) {
      const batch = pending.current;
      pending.current = [];
      setHeld(0);
      setRows((r) => prepend(r, batch, MAX_ROWS));
    }
  };

  return (
    <section data-testid="accesslogs">
      <h1>Access logs</h1>
      <FilterForm filters={filters} />
      <div className="toolbar">
        <button type="button" onClick={togglePause} aria-pressed={paused} data-testid="logs-pause">
          {paused ? "Resume" : "Pause"}
        </button>
        <span role="status" className="muted" data-testid="logs-status" data-live={String(live)}>
          {paused ? `Paused; ${held} new entr${held === 1 ? "y" : "ies"} held.` : live ? "Live." : "Connecting…"} Showing the last{" "}
          {rows.length} (at most {MAX_ROWS}), newest first.
        </span>
      </div>
      <ErrorBox error={error} />
      <div className="scroll">
        <table className="logs">
          <thead>
            <tr>
              <th scope="col">Time (UTC)</th>
              <th scope="col">Cluster</th>
              <th scope="col">Workload</th>
              <th scope="col">Direction</th>
              <th scope="col">Method</th>
              <th scope="col">Authority</th>
              <th scope="col">Path</th>
              <th scope="col">Code</th>
              <th scope="col">Duration</th>
            </tr>
          </thead>
          <tbody>
            {rows.map(({ key, e }) => (
              <tr key={key} data-testid="log-row" data-cluster={e.cluster} data-path={e.path} data-code={e.responseCode}>
                <td>
                  <time dateTime={e.startTime ? new Date(millis(e.startTime)!).toISOString() : undefined}>{clock(millis(e.startTime))}</time>
                </td>
                <td>{e.cluster}</td>
                <td>
                  {e.workload ? (
                    <Link to={{ page: "workload", cluster: e.workload.cluster || e.cluster, namespace: e.workload.namespace, name: e.workload.name }}>
                      {e.workload.name}.{e.workload.namespace}
                    </Link>
                  ) : null}
                </td>
                <td>{e.direction}</td>
                <td>{e.method}</td>
                <td>{e.authority}</td>
                <td className="path">{e.path}</td>
                <td className={e.responseCode >= 500 ? "num bad-text" : e.responseCode >= 400 ? "num warn-text" : "num"}>{e.responseCode}</td>
                <td className="num">{duration(e.duration)}</td>
              </tr>
            ))}
          </tbody>
        </table>
        {rows.length === 0 && <p className="muted">No entries yet.</p>}
      </div>
    </section>
  );
}

function FilterForm({ filters }: { filters: LogFilters }) {
  const [f, setF] = useState(filters);
  useEffect(() => setF(filters), [filters]);
  const field = (name: keyof Omit<LogFilters, "minCode">, label: string) => (
    <label>
      {label}{" "}
      <input name={name} value={f[name]} onChange={(e) => setF({ ...f, [name]: e.target.value })} size={14} />
    </label>
  );
  return (
    <form
      className="filters"
      aria-label="Filters"
      onSubmit={(e) => {
        e.preventDefault();
        location.assign(href({ page: "accesslogs", filters: { ...f, cluster: f.cluster.trim(), namespace: f.namespace.trim(), workload: f.workload.trim(), policy: f.policy.trim() } }));
      }}
    >
      {field("cluster", "Cluster")}
      {field("namespace", "Namespace")}
      {field("workload", "Workload")}
      {field("policy", "Policy")}
      <label>
        Min. code{" "}
        <input
          name="minCode"
          type="number"
          min={0}
          max={599}
          value={f.minCode || ""}
          onChange={(e) => setF({ ...f, minCode: Number.parseInt(e.target.value, 10) || 0 })}
          size={5}
        />
      </label>
      <button type="submit">Apply</button>
    </form>
  );
}
