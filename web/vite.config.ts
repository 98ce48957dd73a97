import { defineConfig } from "vite";

// The bundle goes where the server embeds it (include_dir!), and is committed: the same
// sources must give the same bytes (.ci/browser.sh checks), so no timestamps and no
// environment-dependent paths end up in it.
export default defineConfig({
  base: "/",
  build: {
    outDir: "../crates/oanquan-server/web-dist",
    emptyOutDir: true,
    assetsDir: "assets",
    target: "es2022",
    sourcemap: false,
    modulePreload: { polyfill: false },
    reportCompressedSize: true,
  },
  server: {
    // `npm run dev`: the API from a server on the default port (start it with
    // --cors-origin http://localhost:5173).
    port: 5173,
  },
});
