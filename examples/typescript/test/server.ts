// Starts the real oanquan-server for the tests (or uses OANQUAN_SERVER_ADDR).
//
//   OANQUAN_SERVER_ADDR  host:port of a running server (then none is started), or
//   OANQUAN_SERVER_BIN   path of the binary to start.
//
// Without either, locateServer() takes target/release/oanquan-server or
// target/debug/oanquan-server, whichever was built last (release on a tie): the README's quick
// start builds a release binary, `cargo build` a debug one, and the one built last is the one
// the user means. The same rule as examples/python/server_binary.py and .ci/examples.sh.
// `npm test` prints the choice first (test/which-server.ts).

import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants, statSync } from "node:fs";
import { isAbsolute, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";

const REPO = fileURLToPath(new URL("../../..", import.meta.url));
const CANDIDATES = ["target/release/oanquan-server", "target/debug/oanquan-server"];
const PREFIX = "oanquan-server listening on ";

/** The binary to start and why it was chosen. */
export interface ServerBinary {
  binary: string;
  why: string;
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** Which binary to start (see the top of this file); throws if there is none. */
export function locateServer(repo: string = REPO, env: NodeJS.ProcessEnv = process.env): ServerBinary {
  const given = env.OANQUAN_SERVER_BIN;
  if (given) {
    if (!executable(given)) throw new Error(`OANQUAN_SERVER_BIN=${given} is not an executable file`);
    return { binary: given, why: "from OANQUAN_SERVER_BIN" };
  }
  const found = CANDIDATES.map((candidate) => join(repo, candidate)).filter(executable);
  if (found.length === 0) {
    throw new Error(
      `no oanquan-server in ${join(repo, "target")}/{release,debug}: build one with ` +
        "`cargo build --release -p oanquan-server`, or set OANQUAN_SERVER_BIN",
    );
  }
  const mtime = (path: string) => statSync(path).mtimeMs;
  // Strictly newer only: release, listed first, wins a tie.
  const chosen = found.reduce((best, path) => (mtime(path) > mtime(best) ? path : best));
  const other = found.find((path) => path !== chosen);
  if (other === undefined) return { binary: chosen, why: "the only one built" };
  const shown = relative(repo, other);
  return mtime(other) === mtime(chosen)
    ? { binary: chosen, why: `as new as ${shown}; release wins a tie` }
    : { binary: chosen, why: `built more recently than ${shown}` };
}

/** One line for the top of the test output: which server the results are about. */
export function describeServer(env: NodeJS.ProcessEnv = process.env, repo: string = REPO): string {
  if (env.OANQUAN_SERVER_ADDR) {
    return `oanquan-server: the running server at ${env.OANQUAN_SERVER_ADDR} (from OANQUAN_SERVER_ADDR)`;
  }
  try {
    const { binary, why } = locateServer(repo, env);
    const shown = isAbsolute(binary) && !relative(repo, binary).startsWith("..") ? relative(repo, binary) : binary;
    return `oanquan-server: ${shown} (${why}; OANQUAN_SERVER_BIN picks another)`;
  } catch (error) {
    return `oanquan-server: none: ${(error as Error).message}`;
  }
}

export interface RunningServer {
  address: string;
  stop(): Promise<void>;
}

function startOnce(binary: string, args: string[], timeoutMs: number): Promise<RunningServer> {
  return new Promise((resolve, reject) => {
    const child: ChildProcess = spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    child.stderr!.on("data", (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-4000);
    });
    const fail = (why: string) => {
      clearTimeout(timer);
      child.kill("SIGKILL");
      reject(new Error(`${binary} ${args.join(" ")}: ${why}\n${stderr}`));
    };
    const timer = setTimeout(() => fail(`no listening line within ${timeoutMs}ms`), timeoutMs);
    child.once("error", (error) => fail(String(error)));
    child.once("exit", (code) => fail(`exited with ${code} before listening`));
    createInterface({ input: child.stdout! }).once("line", (line) => {
      if (!line.startsWith(PREFIX)) return fail(`unexpected first line ${JSON.stringify(line)}`);
      clearTimeout(timer);
      child.removeAllListeners("exit");
      resolve({
        address: line.slice(PREFIX.length).trim(),
        stop: () =>
          new Promise<void>((done) => {
            if (child.exitCode !== null || child.signalCode !== null) return done();
            const kill = setTimeout(() => child.kill("SIGKILL"), 10_000);
            child.once("exit", () => {
              clearTimeout(kill);
              done();
            });
            child.kill("SIGTERM");
          }),
      });
    });
  });
}

export async function startServer(): Promise<RunningServer> {
  const existing = process.env.OANQUAN_SERVER_ADDR;
  if (existing) return { address: existing, stop: async () => {} };
  const { binary } = locateServer();
  try {
    return await startOnce(binary, ["--listen", "127.0.0.1:0", "--in-memory"], 20_000);
  } catch {
    // An older server without --in-memory.
    return await startOnce(binary, ["--listen", "127.0.0.1:0"], 20_000);
  }
}
