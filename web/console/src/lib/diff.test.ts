import { describe, expect, it } from "vitest";
import { lineDiff } from "./diff";

describe("lineDiff", () => {
  it("is empty for equal inputs", () => {
    expect(lineDiff("a\nb\n", "a\nb\n")).toEqual([]);
  });
  it("shows changed lines with context", () => {
    const from = ["kind: VirtualService", "metadata:", "  name: a", "spec:", "  hosts: [x]", ""].join("\n");
    const to = ["kind: VirtualService", "metadata:", "  name: a", "spec:", "  hosts: [y]", ""].join("\n");
    expect(lineDiff(from, to, 1)).toEqual([
      { kind: "hunk", text: "@@ -4,2 +4,2 @@" },
      { kind: "ctx", text: " spec:" },
      { kind: "del", text: "-  hosts: [x]" },
      { kind: "add", text: "+  hosts: [y]" },
    ]);
  });
  it("handles a missing final newline", () => {
    const d = lineDiff("a", "b");
    expect(d.map((l) => l.kind)).toEqual(["hunk", "del", "add"]);
  });
});
