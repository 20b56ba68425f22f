#!/usr/bin/env node
// Starts @tus/server with @tus/file-store for the tus-node target:
//   vaultbench-tus-node HOST PORT DATA_DIR [PATH]
// Uploads are kept as files under DATA_DIR/uploads; the collection (creation) URL is PATH
// (default /files/). `--version` prints the two packages' versions. TUS_PER_UPLOAD_BUSY_MS,
// when set, makes every finished upload burn that much CPU: a second build of the same server
// for an A/B run, never set by the preset.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

// This file runs from tools/tus/launcher (npm links it into tools/tus/node_modules).
const modules = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "node_modules");
const args = process.argv.slice(2);
if (args[0] === "--version") {
  const v = (name) => JSON.parse(readFileSync(path.join(modules, name, "package.json"), "utf8")).version;
  console.log(`@tus/server ${v("@tus/server")} @tus/file-store ${v("@tus/file-store")} node ${process.version}`);
  process.exit(0);
}
if (args.length < 3 || args.length > 4) {
  console.error("usage: vaultbench-tus-node HOST PORT DATA_DIR [PATH]");
  process.exit(2);
}
const [host, portText, data, route = "/files/"] = args;
const port = Number.parseInt(portText, 10);
if (!Number.isInteger(port) || port < 0 || port > 65535 || String(port) !== portText) {
  console.error(`vaultbench-tus-node: port ${JSON.stringify(portText)} is not a port number`);
  process.exit(2);
}
const busyMs = Number.parseInt(process.env.TUS_PER_UPLOAD_BUSY_MS ?? "0", 10) || 0;

const { Server, EVENTS } = await import("@tus/server");
const { FileStore } = await import("@tus/file-store");

const server = new Server({
  // @tus/server routes its collection without the trailing slash.
  path: route.replace(/\/+$/, "") || "/",
  datastore: new FileStore({ directory: path.join(data, "uploads") }),
});
if (busyMs > 0) {
  server.on(EVENTS.POST_FINISH, () => {
    const end = process.hrtime.bigint() + BigInt(busyMs) * 1000000n;
    while (process.hrtime.bigint() < end) {
      // CPU only: the A/B arm's per-upload change.
    }
  });
}
// Port 0 takes a free port; the line names the one bound (a test reads it).
const http = server.listen({ host, port }, () => {
  console.error(`vaultbench-tus-node: listening on ${host}:${http.address().port}${route}`);
});
const stop = () => http.close(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
