// Which server binary the tests start (locateServer in server.ts); no server needed.

import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";

import { describeServer, locateServer } from "./server.js";

const roots: string[] = [];
after(() => roots.forEach((root) => rmSync(root, { recursive: true, force: true })));

function repo(): string {
  const root = mkdtempSync(join(tmpdir(), "oanquan-locate-"));
  roots.push(root);
  return root;
}

function fakeBinary(root: string, profile: string, mtime: number, mode = 0o755): string {
  const dir = join(root, "target", profile);
  mkdirSync(dir, { recursive: true });
  const path = join(dir, "oanquan-server");
  writeFileSync(path, "#!/bin/sh\n");
  chmodSync(path, mode);
  utimesSync(path, mtime, mtime);
  return path;
}

test("a release build alone is found", () => {
  // The README's quick start builds only target/release.
  const root = repo();
  const release = fakeBinary(root, "release", 1_000);
  assert.equal(locateServer(root, {}).binary, release);
  assert.match(describeServer({}, root), /^oanquan-server: target\/release\/oanquan-server \(/);
});

test("the binary built last wins, release on a tie", () => {
  const root = repo();
  const release = fakeBinary(root, "release", 1_000);
  const debug = fakeBinary(root, "debug", 2_000);
  assert.deepEqual(locateServer(root, {}), {
    binary: debug,
    why: "built more recently than target/release/oanquan-server",
  });
  utimesSync(release, 3_000, 3_000);
  assert.equal(locateServer(root, {}).binary, release);
  utimesSync(debug, 3_000, 3_000);
  assert.equal(locateServer(root, {}).binary, release);
});

test("OANQUAN_SERVER_BIN comes first", () => {
  const root = repo();
  fakeBinary(root, "release", 1_000);
  const mine = fakeBinary(join(root, "elsewhere"), "debug", 500);
  assert.deepEqual(locateServer(root, { OANQUAN_SERVER_BIN: mine }), {
    binary: mine,
    why: "from OANQUAN_SERVER_BIN",
  });
  assert.throws(() => locateServer(root, { OANQUAN_SERVER_BIN: join(root, "missing") }), /not an executable file/);
});

test("no binary says how to build one", () => {
  const root = repo();
  fakeBinary(root, "debug", 1_000, 0o644);
  assert.throws(() => locateServer(root, {}), /cargo build --release -p oanquan-server/);
  assert.match(describeServer({}, root), /^oanquan-server: none: /);
  assert.equal(
    describeServer({ OANQUAN_SERVER_ADDR: "127.0.0.1:1" }, root),
    "oanquan-server: the running server at 127.0.0.1:1 (from OANQUAN_SERVER_ADDR)",
  );
});
