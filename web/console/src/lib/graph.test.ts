import { describe, expect, it } from "vitest";
import { type GEdge, type GNode, structureKey, tiledLayout, toElements } from "./graph";

const node = (id: string, kind: string, parent = "", name = id.split("/").pop()!): GNode => ({
  id,
  kind,
  name,
  namespace: kind === "destination" ? "ns" : "",
  cluster: "east",
  parent,
  hosts: [],
});

const edge = (source: string, target: string, kind: string, extra: Partial<GEdge> = {}): GEdge => ({
  source,
  target,
  kind,
  order: 0,
  policy: "",
  requestRate: 0,
  errorRate: 0,
  label: "",
  ...extra,
});

describe("toElements", () => {
  const nodes = [
    node("destination/b.ns.east", "destination", "mesh/m.istio.east", "b"),
    node("cluster/east", "cluster", "", "east"),
    node("mesh/m.istio.east", "mesh", "cluster/east", "m"),
    node("destination/a.ns.east", "destination", "mesh/m.istio.east", "a"),
    node("destination/orphan.ns.east", "destination", "mesh/gone", "orphan"),
  ];

  it("sorts nodes by kind then id, keeps known parents only", () => {
    const el = toElements({ nodes, edges: [] });
    expect(el.nodes.map((n) => [n.id, n.parent])).toEqual([
      ["cluster/east", undefined],
      ["mesh/m.istio.east", "cluster/east"],
      ["destination/a.ns.east", "mesh/m.istio.east"],
      ["destination/b.ns.east", "mesh/m.istio.east"],
      ["destination/orphan.ns.east", undefined],
    ]);
    expect(el.nodes[2].label).toBe("a.ns");
    expect(el.nodes[1].label).toBe("mesh m");
  });

  it("breaks parent cycles and duplicate ids", () => {
    const el = toElements({
      nodes: [node("x", "mesh", "y"), node("y", "mesh", "x"), node("x", "mesh", ""), node("z", "mesh", "z")],
      edges: [],
    });
    expect(el.nodes.map((n) => n.id)).toEqual(["x", "y", "z"]);
    // x->y->x: one link of the cycle is cut, and nobody is its own parent.
    const parents = el.nodes.filter((n) => n.parent !== undefined);
    expect(parents.length).toBeLessThanOrEqual(1);
    expect(el.nodes.find((n) => n.id === "z")?.parent).toBeUndefined();
  });

  it("labels edges per kind and drops dangling ones", () => {
    const el = toElements({
      nodes,
      edges: [
        edge("destination/a.ns.east", "destination/b.ns.east", "failover", { order: 2 }),
        edge("destination/a.ns.east", "destination/b.ns.east", "traffic", { requestRate: 12.6, errorRate: 0.25 }),
        edge("destination/a.ns.east", "destination/b.ns.east", "traffic", { requestRate: 1 }),
        edge("mesh/m.istio.east", "destination/b.ns.east", "federation", { label: "b.ns.global" }),
        edge("destination/a.ns.east", "nowhere", "access"),
      ],
    });
    expect(el.dropped).toBe(1);
    expect(el.edges.map((e) => e.label)).toEqual(["#2", "13/s · 0.25/s 5xx", "1.0/s", "b.ns.global"]);
    expect(new Set(el.edges.map((e) => e.id)).size).toBe(4);
  });
});

describe("tiledLayout", () => {
  it("places every leaf inside its parent's box, without overlaps, deterministically", () => {
    const ns: GNode[] = [];
    for (const c of ["east", "west"]) {
      ns.push(node(`cluster/${c}`, "cluster"));
      ns.push(node(`mesh/m.${c}`, "mesh", `cluster/${c}`));
      for (let i = 0; i < 30; i++) ns.push(node(`destination/d${i}.ns.${c}`, "destination", `mesh/m.${c}`));
    }
    ns.push(node("virtualdestination/v.ns.mgmt", "virtualdestination"));
    const el = toElements({ nodes: ns, edges: [] });
    const { positions: pos, boxes } = tiledLayout(el.nodes);
    const leaves = el.nodes.filter((n) => !el.nodes.some((m) => m.parent === n.id));
    expect([...pos.keys()].sort()).toEqual(leaves.map((n) => n.id).sort());
    const seen = new Set<string>();
    for (const p of pos.values()) {
      const k = `${p.x},${p.y}`;
      expect(seen.has(k)).toBe(false);
      seen.add(k);
    }
    // East's destinations and west's do not interleave: their x or y ranges are apart.
    const range = (c: string) => {
      const ps = [...pos.entries()].filter(([id]) => id.endsWith(`.${c}`) && id.startsWith("destination/")).map(([, p]) => p);
      return { minX: Math.min(...ps.map((p) => p.x)), maxX: Math.max(...ps.map((p) => p.x)), minY: Math.min(...ps.map((p) => p.y)), maxY: Math.max(...ps.map((p) => p.y)) };
    };
    const e = range("east");
    const w = range("west");
    expect(e.maxX < w.minX || w.maxX < e.minX || e.maxY < w.minY || w.maxY < e.minY).toBe(true);
    expect(tiledLayout(el.nodes).positions).toEqual(pos);
    // Every compound has a box, and each leaf lies inside its parent's box.
    expect([...boxes.keys()].sort()).toEqual(el.nodes.filter((n) => !leaves.includes(n)).map((n) => n.id).sort());
    for (const n of leaves) {
      if (n.parent === undefined) continue;
      const b = boxes.get(n.parent)!;
      const p = pos.get(n.id)!;
      expect(Math.abs(p.x - b.x) < b.w / 2 && Math.abs(p.y - b.y) < b.h / 2).toBe(true);
    }
  });

  it("lays out 1,000 destinations quickly", () => {
    const ns: GNode[] = [];
    for (let c = 0; c < 4; c++) {
      ns.push(node(`cluster/c${c}`, "cluster"));
      ns.push(node(`mesh/m.c${c}`, "mesh", `cluster/c${c}`));
      for (let i = 0; i < 250; i++) ns.push(node(`destination/d${i}.ns.c${c}`, "destination", `mesh/m.c${c}`));
    }
    const el = toElements({ nodes: ns, edges: [] });
    const t = performance.now();
    const { positions, boxes } = tiledLayout(el.nodes);
    expect(performance.now() - t).toBeLessThan(200);
    expect(positions.size).toBe(1000);
    expect(boxes.size).toBe(8);
  });

  it("keys the structure by ids and parents only", () => {
    const a = toElements({ nodes: [node("cluster/e", "cluster"), node("mesh/m", "mesh", "cluster/e")], edges: [] });
    const b = toElements({ nodes: [node("mesh/m", "mesh", "cluster/e"), node("cluster/e", "cluster")], edges: [edge("mesh/m", "cluster/e", "access")] });
    expect(structureKey(a.nodes)).toBe(structureKey(b.nodes));
  });
});
