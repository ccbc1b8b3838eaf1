import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

// The console's build goes straight into the Go adapter that embeds it
// (//go:embed all:dist), so the committed dist must be reproducible: hashed
// names, no source maps, nothing that depends on the machine or the clock.
export default defineConfig({
  base: "/",
  resolve: {
    alias: {
      // The generated Connect-ES client, used from the source tree rather
      // than as a package, so that a proto change needs no publish step.
      "@meshplane/client": here("../../clients/ts/gen/meshplane"),
    },
    // clients/ts/gen has no node_modules of its own: its imports of the
    // runtime must resolve to ours, so that exactly one copy is bundled.
    dedupe: ["@bufbuild/protobuf", "@connectrpc/connect"],
  },
  oxc: {
    jsx: { runtime: "automatic" },
  },
  build: {
    outDir: here("../../services/console/internal/adapters/web/dist"),
    emptyOutDir: true,
    sourcemap: false,
    assetsDir: "assets",
    target: "es2022",
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
  },
  // `npm run dev` against a running console (e.g. the demo's, or one with
  // --insecure-plaintext on loopback): MESHPLANE_CONSOLE=https://127.0.0.1:9443.
  server: {
    proxy: Object.fromEntries(
      ["/api", "/auth"].map((p) => [p, { target: process.env.MESHPLANE_CONSOLE ?? "http://127.0.0.1:9443", secure: false, changeOrigin: false }]),
    ),
  },
  test: {
    include: ["src/**/*.test.ts"],
    environment: "node",
  },
});
