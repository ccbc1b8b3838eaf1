import { useEffect, useMemo, useRef, useState } from "react";
import cytoscape, { type Core, type ElementDefinition, type StylesheetJson } from "cytoscape";
import { api } from "../api";
import { ErrorBox, Link, Loading } from "../components";
import { absolute, millis, rate } from "../lib/format";
import { EDGE_KINDS, type EdgeData, type EdgeKind, type Elements, structureKey, tiledLayout, toElements } from "../lib/graph";
import { usePoll } from "../lib/hooks";
import { href, policyRefRoute, refRoute } from "../lib/route";

// The layout is lib/graph's tiledLayout for every size: linear, deterministic,
// and it keeps positions across polls. Cytoscape's force layout (cose) took
// about a second for a dozen compound nodes here and is not deterministic.
//
// Up to COMPOUND_MAX_NODES nodes, clusters and meshes are Cytoscape compound
// nodes. Above, they are drawn as plain boxes behind their members, at the
// rectangles the tiled layout computed: Cytoscape re-dirties a compound's
// whole subtree for every style property it applies, which doubled the time
// to the first frame of 1,000 destinations (about 0.4 s against 0.8 s on 2
// loaded cores). The picture is the same; only dragging is off.
const COMPOUND_MAX_NODES = 300;
const CY_STYLESHEET_ID = "__________cytoscape_stylesheet";

const FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif';

const STYLE: StylesheetJson = [
  {
    selector: "node",
    style: {
      label: "data(label)",
      "font-family": FONT,
      "font-size": 11,
      "text-valign": "center",
      "text-halign": "center",
      "text-wrap": "none",
      "text-max-width": "140px",
      "min-zoomed-font-size": 7,
      shape: "round-rectangle",
      width: 150,
      height: 34,
      "background-color": "#e8eef7",
      "border-width": 1,
      "border-color": "#7b8ba3",
      color: "#1b2330",
    },
  },
  { selector: 'node[kind = "virtualdestination"]', style: { "background-color": "#fff4e0", "border-color": "#b7791f", shape: "hexagon" } },
  { selector: 'node[kind = "workload"]', style: { "background-color": "#eef7ee", "border-color": "#4a8a4a", shape: "ellipse" } },
  {
    selector: ":parent",
    style: {
      "text-valign": "top",
      "text-halign": "center",
      "font-weight": "bold",
      "background-color": "#f7f9fc",
      "background-opacity": 1,
      "border-color": "#9aa7b8",
      padding: "14px",
      shape: "round-rectangle",
    },
  },
  { selector: 'node[kind = "cluster"]', style: { "border-width": 2, "border-color": "#445066", "background-color": "#fbfcfe", "font-size": 15 } },
  { selector: 'node[kind = "mesh"]', style: { "border-style": "dashed", "background-color": "#f1f5fb", "font-size": 13 } },
  {
    selector: "node.box",
    style: {
      width: "data(w)",
      height: "data(h)",
      "text-valign": "top",
      "text-margin-y": 20,
      "font-weight": "bold",
      "background-color": "#f7f9fc",
      events: "no",
      "z-compound-depth": "bottom",
      "z-index": 0,
    },
  },
  { selector: 'node.box[kind = "cluster"]', style: { "border-width": 2, "border-color": "#445066", "background-color": "#fbfcfe" } },
  { selector: 'node.box[kind = "mesh"]', style: { "border-style": "dashed", "background-color": "#f1f5fb", "z-index": 1 } },
  { selector: "node:selected", style: { "border-width": 3, "border-color": "#1d4ed8" } },
  {
    selector: "edge",
    style: {
      width: 1.5,
      "curve-style": "bezier",
      "target-arrow-shape": "triangle",
      "arrow-scale": 0.8,
      "font-family": FONT,
      "font-size": 10,
      "text-background-color": "#ffffff",
      "text-background-opacity": 0.85,
      "text-background-padding": "2px",
      "min-zoomed-font-size": 7,
      label: "data(label)",
    },
  },
  { selector: 'edge[kind = "federation"]', style: { "line-style": "dashed", "line-color": "#2563eb", "target-arrow-color": "#2563eb" } },
  { selector: 'edge[kind = "failover"]', style: { "line-color": "#c2410c", "target-arrow-color": "#c2410c", width: 2 } },
  { selector: 'edge[kind = "access"]', style: { "line-style": "dotted", "line-color": "#047857", "target-arrow-color": "#047857", width: 2 } },
  {
    selector: 'edge[kind = "traffic"]',
    style: { "line-color": "#6b7280", "target-arrow-color": "#6b7280", width: "mapData(requestRate, 0, 50, 1.5, 6)" },
  },
  { selector: 'edge[kind = "traffic"][errorRate > 0]', style: { "line-color": "#b91c1c", "target-arrow-color": "#b91c1c" } },
  { selector: ".hidden", style: { display: "none" } },
];

const KIND_LABEL: Record<EdgeKind, string> = {
  federation: "Federation (a mesh reaches an exported host)",
  failover: "Failover (VirtualDestination backend, in order)",
  access: "Access (an AccessPolicy allows)",
  traffic: "Traffic (requests/s, 5xx/s)",
};

const round = (ms: number) => Math.round(ms * 10) / 10;

interface Render {
  ready: boolean;
  ms: number;
  drawMs: number;
  nodes: number;
  edges: number;
}

export default function Graph() {
  const { data, error, loaded, at } = usePoll("graph", (signal) => api.getGraph({}, { signal }));
  const el: Elements | undefined = useMemo(() => (data ? toElements(data) : undefined), [data]);
  const [kinds, setKinds] = useState<Record<string, boolean>>(() => Object.fromEntries(EDGE_KINDS.map((k) => [k, true])));
  const [listOpen, setListOpen] = useState(false);
  const [render, setRender] = useState<Render>({ ready: false, ms: 0, drawMs: 0, nodes: 0, edges: 0 });

  const box = useRef<HTMLDivElement>(null);
  const cy = useRef<Core | null>(null);
  const laidOut = useRef("");

  useEffect(() => {
    // Cytoscape adds a <style> element for its container's position unless
    // one with this id exists; the CSP forbids inline styles, and
    // styles.css carries the rule.
    if (!document.getElementById(CY_STYLESHEET_ID)) {
      const marker = document.createElement("meta");
      marker.id = CY_STYLESHEET_ID;
      document.head.append(marker);
    }
    const c = cytoscape({
      container: box.current,
      style: STYLE,
      minZoom: 0.05,
      maxZoom: 3,
      boxSelectionEnabled: false,
      textureOnViewport: true,
      hideEdgesOnViewport: true,
      pixelRatio: 1,
    });
    c.on("tap", "node", (ev) => {
      const to = refRoute(ev.target.id());
      if (to) location.assign(href(to));
    });
    cy.current = c;
    return () => {
      c.destroy();
      cy.current = null;
    };
  }, []);

  useEffect(() => {
    const c = cy.current;
    if (!c || !el) return;
    const key = structureKey(el.nodes);
    if (key === laidOut.current) {
      updateEdges(c, el.edges, kinds);
      setRender((r) => ({ ...r, edges: el.edges.length }));
      return;
    }
    laidOut.current = key;
    setRender((r) => ({ ...r, ready: false }));
    const tiles = tiledLayout(el.nodes);
    const flat = el.nodes.length > COMPOUND_MAX_NODES;
    const defs: ElementDefinition[] = [];
    for (const n of el.nodes) {
      const box = tiles.boxes.get(n.id);
      if (flat) {
        const { parent: _, ...data } = n;
        if (box) defs.push({ group: "nodes", data: { ...data, w: box.w, h: box.h }, position: { x: box.x, y: box.y }, classes: "box" });
        else defs.push({ group: "nodes", data, position: tiles.positions.get(n.id) ?? { x: 0, y: 0 } });
      } else {
        defs.push({ group: "nodes", data: { ...n }, position: tiles.positions.get(n.id) ?? { x: 0, y: 0 } });
      }
    }
    for (const e of el.edges) defs.push({ group: "edges", data: { ...e }, classes: kinds[e.kind] === false ? "hidden" : "" });
    c.autoungrabify(flat);
    c.batch(() => {
      c.elements().remove();
      c.add(defs);
    });
    // The nodes went in at their tiled positions: the layout is done once
    // the viewport fits them. data-render-ms is from the answer's arrival to
    // here (what the benchmark reads); data-draw-ms to the first frame drawn.
    c.fit(undefined, 30);
    setRender({ ready: true, ms: round(performance.now() - at), drawMs: 0, nodes: el.nodes.length, edges: el.edges.length });
    c.one("render", () => setRender((r) => ({ ...r, drawMs: round(performance.now() - at) })));
    // kinds is applied by its own effect below, which needs no new layout.
  }, [el, at]);

  useEffect(() => {
    const c = cy.current;
    if (!c) return;
    c.batch(() => c.edges().forEach((e) => void e.toggleClass("hidden", kinds[e.data("kind") as string] === false)));
  }, [kinds]);

  const shownEdges = (el?.edges ?? []).filter((e) => kinds[e.kind] !== false);

  return (
    <section
      data-testid="graph"
      data-ready={String(render.ready)}
      data-render-ms={String(render.ms)}
      data-draw-ms={String(render.drawMs)}
      data-nodes={String(render.nodes)}
      data-edges={String(render.edges)}
      aria-busy={!render.ready}
    >
      <h1>Graph</h1>
      <ErrorBox error={error} />
      <Loading loaded={loaded} />
      <div className="toolbar">
        <fieldset className="kinds">
          <legend>Edges</legend>
          {EDGE_KINDS.map((k) => (
            <label key={k} title={KIND_LABEL[k]}>
              <input type="checkbox" checked={kinds[k]} onChange={(e) => setKinds({ ...kinds, [k]: e.target.checked })} data-testid={`graph-kind-${k}`} />{" "}
              <span className={`swatch ${k}`} aria-hidden="true" /> {k}
            </label>
          ))}
        </fieldset>
        <button type="button" onClick={() => cy.current?.fit(undefined, 30)}>
          Fit
        </button>
        <button type="button" aria-expanded={listOpen} aria-controls="graph-list" onClick={() => setListOpen(!listOpen)} data-testid="graph-list-toggle">
          {listOpen ? "Hide list view" : "List view"}
        </button>
        <span className="muted" aria-live="polite">
          {render.ready ? `${render.nodes} nodes, ${render.edges} edges, laid out in ${render.ms} ms.` : data ? "Laying out…" : ""}
        </span>
      </div>
      {data && !data.trafficAvailable && (
        <p className="note">No access logs reach the console (no AccessLogPolicy, or ingest's tail is not reachable): the graph has no traffic edges.</p>
      )}
      {data?.trafficAvailable && data.trafficSince && <p className="muted small">Traffic counted since {absolute(millis(data.trafficSince))}.</p>}
      <div
        className="graph-canvas"
        ref={box}
        role="img"
        aria-label="Service graph of clusters, meshes and destinations. The list view has the same edges as a table."
      />
      <ul className="legend" aria-label="Legend">
        {EDGE_KINDS.map((k) => (
          <li key={k}>
            <span className={`swatch ${k}`} aria-hidden="true" /> {KIND_LABEL[k]}
          </li>
        ))}
        <li>
          <span className="swatch node destination" aria-hidden="true" /> destination (select to open)
        </li>
        <li>
          <span className="swatch node virtualdestination" aria-hidden="true" /> VirtualDestination
        </li>
        <li>
          <span className="swatch node mesh" aria-hidden="true" /> mesh, inside its <span className="swatch node cluster" aria-hidden="true" /> cluster
        </li>
      </ul>
      <div id="graph-list" hidden={!listOpen}>
        <h2>Edges</h2>
        <table data-testid="graph-edges">
          <thead>
            <tr>
              <th scope="col">Kind</th>
              <th scope="col">Source</th>
              <th scope="col">Target</th>
              <th scope="col">Order</th>
              <th scope="col">Requests</th>
              <th scope="col">5xx</th>
              <th scope="col">Policy</th>
              <th scope="col">Label</th>
            </tr>
          </thead>
          <tbody>
            {shownEdges.map((e) => (
              <EdgeRow key={e.id} e={e} />
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}

function NodeRef({ id }: { id: string }) {
  const to = refRoute(id);
  return to ? <Link to={to}>{id}</Link> : <>{id}</>;
}

function EdgeRow({ e }: { e: EdgeData }) {
  const pol = e.policy ? policyRefRoute(e.policy) : undefined;
  return (
    <tr data-testid="graph-edge" data-kind={e.kind} data-source={e.source} data-target={e.target}>
      <td>{e.kind}</td>
      <td>
        <NodeRef id={e.source} />
      </td>
      <td>
        <NodeRef id={e.target} />
      </td>
      <td className="num">{e.order || ""}</td>
      <td className="num">{e.kind === "traffic" ? rate(e.requestRate) : ""}</td>
      <td className="num">{e.kind === "traffic" ? rate(e.errorRate) : ""}</td>
      <td>{pol ? <Link to={pol}>{e.policy}</Link> : e.policy}</td>
      <td>{e.label}</td>
    </tr>
  );
}

/** updateEdges brings the edges up to date without touching the nodes' positions. */
function updateEdges(c: Core, edges: EdgeData[], kinds: Record<string, boolean>) {
  const want = new Map(edges.map((e) => [e.id, e]));
  c.batch(() => {
    c.edges().forEach((ce) => {
      const e = want.get(ce.id());
      if (!e) ce.remove();
      else {
        ce.data({ label: e.label, requestRate: e.requestRate, errorRate: e.errorRate });
        want.delete(e.id);
      }
    });
    if (want.size > 0) {
      c.add([...want.values()].map((e) => ({ group: "edges" as const, data: { ...e }, classes: kinds[e.kind] === false ? "hidden" : "" })));
    }
  });
}
