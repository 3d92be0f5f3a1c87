// Builds the dashboard into dist/webui, which the management API serves at / by default.
// JSX goes through Oxc with the jsxImportSource of webui/tsconfig.json (preact); no Babel preset.
import { defineConfig } from "vite";

export default defineConfig({
  root: import.meta.dirname,
  // Relative asset URLs: the dashboard also works behind a reverse proxy under a sub-path.
  base: "./",
  logLevel: "warn",
  build: {
    outDir: "../dist/webui",
    emptyOutDir: true,
    target: "es2022",
    sourcemap: false,
    reportCompressedSize: false,
  },
});
