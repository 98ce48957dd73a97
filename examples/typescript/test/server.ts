// Starts the real oanquan-server for the tests (or uses OANQUAN_SERVER_ADDR).
//
//   OANQUAN_SERVER_ADDR  host:port of a running server (then none is started), or
//   OANQUAN_SERVER_BIN   path of the binary (default: ../../target/debug/oanquan-server).

import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";

const DEFAULT_BIN = fileURLToPath(new URL("../../../target/debug/oanquan-server", import.meta.url));
const PREFIX = "oanquan-server listening on ";

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
  const binary = process.env.OANQUAN_SERVER_BIN ?? DEFAULT_BIN;
  try {
    accessSync(binary, constants.X_OK);
  } catch {
    throw new Error(`server binary ${binary} not found: build it with \`cargo build -p oanquan-server\``);
  }
  try {
    return await startOnce(binary, ["--listen", "127.0.0.1:0", "--in-memory"], 20_000);
  } catch {
    // An older server without --in-memory.
    return await startOnce(binary, ["--listen", "127.0.0.1:0"], 20_000);
  }
}
