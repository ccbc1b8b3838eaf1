// Conversion of GetGraph's answer into Cytoscape elements, and a tiled
// layout computed here rather than by a force simulation: it is linear in
// the number of nodes and deterministic, so a graph of 1,000 destinations
// lays out in milliseconds and the same answer always draws the same.

import { rate } from "./format";

export interface GNode {
  id: string;
  kind: string;
  name: string;
  namespace: string;
  cluster: string;
  parent: string;
  hosts: readonly string[];
}

export interface GEdge {
  source: string;
  target: string;
  kind: string;
  order: number;
  policy: string;
  requestRate: number;
  errorRate: number;
  label: string;
}

export const EDGE_KINDS = ["federation", "failover", "access", "traffic"] as const;
export type EdgeKind = (typeof EDGE_KINDS)[number];

export interface NodeData {
  id: string;
  kind: string;
  label: string;
  name: string;
  namespace: string;
  cluster: string;
  parent?: string;
}

export interface EdgeData {
  id: string;
  source: string;
  target: string;
  kind: string;
  label: string;
  order: number;
  policy: string;
  requestRate: number;
  errorRate: number;
}

export interface Elements {
  nodes: NodeData[];
  edges: EdgeData[];
  /** Edges left out because an end is not in the graph. */
  dropped: number;
}

const KIND_RANK: Record<string, number> = { cluster: 0, mesh: 1, virtualdestination: 2, destination: 3, workload: 4 };

function rank(kind: string): number {
  return KIND_RANK[kind] ?? 9;
}

export function nodeLabel(n: GNode): string {
  switch (n.kind) {
    case "cluster":
      return n.name || n.cluster;
    case "mesh":
      return `mesh ${n.name}`;
    case "destination":
    case "workload":
    case "virtualdestination":
      return n.namespace ? `${n.name}.${n.namespace}` : n.name;
    default:
      return n.name || n.id;
  }
}

export function edgeLabel(e: GEdge): string {
  switch (e.kind) {
    case "failover":
      return e.order > 0 ? `#${e.order}` : e.label;
    case "traffic": {
      const errs = e.errorRate > 0 ? ` · ${rate(e.errorRate)} 5xx` : "";
      return `${rate(e.requestRate)}${errs}`;
    }
    default:
      return e.label;
  }
}

/** toElements converts the graph, dropping parents and edges that name nodes it does not have. */
export function toElements(g: { nodes: readonly GNode[]; edges: readonly GEdge[] }): Elements {
  const byId = new Map<string, GNode>();
  for (const n of g.nodes) if (n.id && !byId.has(n.id)) byId.set(n.id, n);

  // A parent must exist and must not make a cycle (Cytoscape loops on one).
  const parentOf = new Map<string, string>();
  for (const n of byId.values()) {
    if (n.parent && n.parent !== n.id && byId.has(n.parent)) parentOf.set(n.id, n.parent);
  }
  for (const id of [...parentOf.keys()]) {
    const seen = new Set([id]);
    for (let p = parentOf.get(id); p !== undefined; p = parentOf.get(p)) {
      if (seen.has(p)) {
        parentOf.delete(id);
        break;
      }
      seen.add(p);
    }
  }

  const nodes: NodeData[] = [...byId.values()]
    .sort((a, b) => rank(a.kind) - rank(b.kind) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    .map((n) => {
      const d: NodeData = {
        id: n.id,
        kind: n.kind,
        label: nodeLabel(n),
        name: n.name,
        namespace: n.namespace,
        cluster: n.cluster,
      };
      const p = parentOf.get(n.id);
      if (p !== undefined) d.parent = p;
      return d;
    });

  const edges: EdgeData[] = [];
  const ids = new Set<string>();
  let dropped = 0;
  for (const e of g.edges) {
    if (!byId.has(e.source) || !byId.has(e.target)) {
      dropped++;
      continue;
    }
    const base = `${e.kind}|${e.source}|${e.target}|${e.order}|${e.policy}`;
    let id = base;
    for (let i = 2; ids.has(id); i++) id = `${base}|${i}`;
    ids.add(id);
    edges.push({
      id,
      source: e.source,
      target: e.target,
      kind: e.kind,
      label: edgeLabel(e),
      order: e.order,
      policy: e.policy,
      requestRate: e.requestRate,
      errorRate: e.errorRate,
    });
  }
  return { nodes, edges, dropped };
}

/**
 * structureKey identifies what a layout depends on: the nodes and their
 * nesting. A poll that changes only edges or rates keeps the positions.
 */
export function structureKey(nodes: readonly NodeData[]): string {
  return nodes.map((n) => `${n.id}<${n.parent ?? ""}`).join("\n");
}

export interface Point {
  x: number;
  y: number;
}

export interface TileOptions {
  cellWidth: number;
  cellHeight: number;
  /** Space around a compound's children (Cytoscape's padding plus its label). */
  padding: number;
  labelHeight: number;
  gap: number;
}

export const defaultTiles: TileOptions = { cellWidth: 170, cellHeight: 56, padding: 14, labelHeight: 22, gap: 24 };

export interface Rect {
  /** The centre, as Cytoscape positions a node. */
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface Tiles {
  /** Where each leaf goes. */
  positions: Map<string, Point>;
  /** The box each compound node covers, its padding and label included. */
  boxes: Map<string, Rect>;
}

interface Box {
  id: string;
  w: number;
  h: number;
  /** Places the box's leaves and inner boxes, from its top left corner. */
  place(x: number, y: number, out: Tiles): void;
}

/**
 * tiledLayout places leaf nodes in a grid inside their compound parents,
 * packing children (leaves and nested compounds) in rows, and the top-level
 * boxes likewise. Cytoscape derives compound nodes' boxes from their
 * children, so it needs only the leaves' positions; the boxes are there for
 * drawing the nesting without compound nodes.
 */
export function tiledLayout(nodes: readonly NodeData[], o: TileOptions = defaultTiles): Tiles {
  const children = new Map<string, NodeData[]>();
  const roots: NodeData[] = [];
  for (const n of nodes) {
    if (n.parent === undefined) roots.push(n);
    else {
      const c = children.get(n.parent);
      if (c) c.push(n);
      else children.set(n.parent, [n]);
    }
  }

  const box = (n: NodeData): Box => {
    const kids = children.get(n.id);
    if (!kids) {
      return {
        id: n.id,
        w: o.cellWidth,
        h: o.cellHeight,
        place: (x, y, out) => out.positions.set(n.id, { x: x + o.cellWidth / 2, y: y + o.cellHeight / 2 }),
      };
    }
    const inner = pack(kids.map(box), o.gap / 2);
    const w = inner.w + 2 * o.padding;
    const h = inner.h + 2 * o.padding + o.labelHeight;
    return {
      id: n.id,
      w,
      h,
      place: (x, y, out) => {
        out.boxes.set(n.id, { x: x + w / 2, y: y + h / 2, w, h });
        inner.place(x + o.padding, y + o.padding + o.labelHeight, out);
      },
    };
  };

  const top = pack(roots.map(box), o.gap);
  const out: Tiles = { positions: new Map(), boxes: new Map() };
  top.place(0, 0, out);
  return out;
}

/** pack arranges boxes in rows of about the width that makes the whole roughly square. */
function pack(items: Box[], gap: number): Omit<Box, "id"> {
  if (items.length === 0) return { w: 0, h: 0, place: () => {} };
  let area = 0;
  let widest = 0;
  for (const b of items) {
    area += (b.w + gap) * (b.h + gap);
    widest = Math.max(widest, b.w);
  }
  // A little wider than square: screens are wider than tall.
  const rowWidth = Math.max(widest, Math.sqrt(area) * 1.4);
  const placed: { b: Box; x: number; y: number }[] = [];
  let x = 0;
  let y = 0;
  let rowH = 0;
  let w = 0;
  for (const b of items) {
    if (x > 0 && x + b.w > rowWidth) {
      y += rowH + gap;
      x = 0;
      rowH = 0;
    }
    placed.push({ b, x, y });
    x += b.w + gap;
    w = Math.max(w, x - gap);
    rowH = Math.max(rowH, b.h);
  }
  const h = y + rowH;
  return {
    w,
    h,
    place: (ox, oy, out) => {
      for (const p of placed) p.b.place(ox + p.x, oy + p.y, out);
    },
  };
}
