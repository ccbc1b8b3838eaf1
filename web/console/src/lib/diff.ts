import { structuredPatch } from "diff";

export interface DiffLine {
  kind: "add" | "del" | "ctx" | "hunk";
  text: string;
}

/** lineDiff gives a unified diff of two YAML documents, three lines of context, as lines to render. */
export function lineDiff(from: string, to: string, context = 3): DiffLine[] {
  const patch = structuredPatch("from", "to", from, to, "", "", { context });
  const out: DiffLine[] = [];
  for (const h of patch.hunks) {
    out.push({ kind: "hunk", text: `@@ -${h.oldStart},${h.oldLines} +${h.newStart},${h.newLines} @@` });
    for (const l of h.lines) {
      if (l.startsWith("\\")) continue; // "\ No newline at end of file"
      out.push({ kind: l[0] === "+" ? "add" : l[0] === "-" ? "del" : "ctx", text: l });
    }
  }
  return out;
}
