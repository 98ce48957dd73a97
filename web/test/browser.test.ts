// The page in real headless Chromium (Debian's `chromium`, driven by playwright-core) against
// the real server binary: run by .ci/browser.sh, never by `cargo test`.
//
//   OANQUAN_SERVER_BIN=../target/debug/oanquan-server npm test
//
// Writes screenshots into docs/screenshots/ and measurements into test-results/bench.json.

import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

import { create, fromBinary } from "@bufbuild/protobuf";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { createClient } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";

import { AccountService } from "../src/gen/oanquan/v1/account_pb.js";
import { GameService, TimeControlSchema, WatchGameRequestSchema, type TimeControl } from "../src/gen/oanquan/v1/game_pb.js";
import { timeControlText } from "../src/format.js";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../..");
const bin = process.env.OANQUAN_SERVER_BIN ?? join(root, "target/debug/oanquan-server");
const chromiumPath = process.env.CHROMIUM_BIN ?? "/usr/bin/chromium";
const shots = join(root, "docs/screenshots");
const results = join(here, "../test-results");
const WAIT = 20_000;

const DESKTOP = { viewport: { width: 1200, height: 860 } };
const PHONE = { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, deviceScaleFactor: 2 };

class Server {
  process!: ChildProcess;
  address = "";
  constructor(
    readonly database: string,
    readonly listen = "127.0.0.1:0",
    readonly flags: string[] = [],
  ) {}

  async start(): Promise<this> {
    this.process = spawn(bin, ["--listen", this.listen, "--database", this.database, ...this.flags], {
      stdio: ["ignore", "pipe", "inherit"],
      env: { ...process.env, RUST_LOG: process.env.RUST_LOG ?? "warn" },
    });
    const lines = createInterface({ input: this.process.stdout! });
    this.address = await new Promise<string>((resolveAddress, reject) => {
      const timer = setTimeout(() => reject(new Error("the server did not start in 20 s")), WAIT);
      this.process.once("exit", (code) => reject(new Error(`the server exited (${code})`)));
      lines.on("line", (line) => {
        const match = /^oanquan-server listening on (\S+)$/.exec(line);
        if (match) {
          clearTimeout(timer);
          resolveAddress(match[1]);
        }
      });
    });
    return this;
  }

  get url(): string {
    return `http://${this.address}/`;
  }

  /** SIGTERM, and waits for the exit (streams end with UNAVAILABLE first). */
  async stop(): Promise<void> {
    if (this.process.exitCode !== null) return;
    const exited = new Promise((r) => this.process.once("exit", r));
    this.process.kill("SIGTERM");
    await exited;
  }
}

let browser: Browser;
let server: Server;
let dir: string;
const contexts: BrowserContext[] = [];
const bench: Record<string, unknown> = {};

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "oanquan-browser-"));
  server = await new Server(join(dir, "oanquan.db")).start();
  browser = await chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox"] });
  mkdirSync(shots, { recursive: true });
  mkdirSync(results, { recursive: true });
});

after(async () => {
  for (const context of contexts) await context.close().catch(() => {});
  await browser?.close();
  await server?.stop();
  writeFileSync(join(results, "bench.json"), JSON.stringify(bench, null, 2) + "\n");
  rmSync(dir, { recursive: true, force: true });
});

/** A fresh browser profile (its own localStorage: its own seats), animations off. With
 * `silenceMs`, the page drops a stream silent that long instead of 40 s (STREAM_SILENCE_MS). */
async function player(name: string, options = DESKTOP, speed = "0", silenceMs?: number): Promise<Page> {
  const context = await browser.newContext(options);
  contexts.push(context);
  await context.addInitScript(
    ([name, speed, silenceMs]) => {
      localStorage.setItem("oanquan.name", name);
      localStorage.setItem("oanquan.speed", speed);
      if (silenceMs) (window as { oanquanStreamSilenceMs?: number }).oanquanStreamSilenceMs = Number(silenceMs);
    },
    [name, speed, silenceMs ? String(silenceMs) : ""],
  );
  const page = await context.newPage();
  const outside: string[] = [];
  page.on("request", (request) => {
    const url = request.url();
    if (!url.startsWith(server.url) && !url.startsWith("data:")) outside.push(url);
  });
  page.on("pageerror", (error) => console.error(`[${name}] page error:`, error));
  page.on("dialog", (dialog) => void dialog.accept());
  (page as Page & { outside: string[] }).outside = outside;
  await page.goto(server.url);
  await page.getByTestId("open-games").waitFor();
  return page;
}

async function movesOf(page: Page): Promise<number> {
  const text = (await page.getByTestId("move-count").textContent()) ?? "";
  return Number(/moves: (\d+)/.exec(text)?.[1] ?? -1);
}

const isOver = (page: Page) => page.getByTestId("game-over").isVisible();

async function until(what: string, check: () => Promise<boolean>, timeout = WAIT): Promise<void> {
  const end = Date.now() + timeout;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function gameIdOf(page: Page): Promise<string> {
  await page.waitForURL(/#\/game\//);
  return /#\/game\/([A-Za-z0-9_-]+)/.exec(page.url())![1];
}

/** Creates a game from the lobby: (the creator's page with the game open, the game id). */
async function createGame(page: Page, timeControl = ""): Promise<string> {
  await page.getByTestId("time-control").selectOption(timeControl);
  await page.getByTestId("create-game").click();
  return gameIdOf(page);
}

async function joinGame(page: Page, id: string, touch = false) {
  const button = page.locator(`[data-testid=open-games] li[data-game="${id}"] [data-testid=join]`);
  if (touch) await button.tap();
  else await button.click();
  await page.waitForURL(new RegExp(`#/game/${id}$`));
}

/** The player to move clicks (or taps) their first playable square and a direction. */
async function playOneMove(page: Page, ply: number, touch: boolean) {
  const square = page.locator(".row.bottom .square.playable").first();
  const direction = page.getByTestId(ply % 3 === 0 ? "dir-left" : "dir-right");
  if (touch) {
    await square.tap();
    await direction.tap();
  } else {
    await square.click();
    await direction.click();
  }
}

async function whoseTurn(pages: Page[]): Promise<Page | undefined> {
  let mover: Page | undefined;
  await until("someone's turn or the end", async () => {
    if (await isOver(pages[0])) return true;
    for (const page of pages) {
      if ((await page.getByTestId("turn").textContent()) === "Your turn") {
        mover = page;
        return true;
      }
    }
    return false;
  });
  return mover;
}

test("two players play a whole game by clicks; a spectator sees every move; a restart resumes", async () => {
  const lan = await player("Lan");
  const lobbyShot = await player("Visitor");
  const minh = await player("Minh", PHONE);

  const id = await createGame(lan);
  // Nothing to pick yet: the hint says what the game waits for.
  await lan.getByTestId("hint").filter({ hasText: "Waiting for an opponent to join." }).waitFor();
  // The open game appears live in the other lobbies.
  await minh.locator(`[data-testid=open-games] li[data-game="${id}"]`).waitFor();
  await lobbyShot.locator(`[data-testid=open-games] li[data-game="${id}"]`).waitFor();
  // A screen reader tells the lobby's buttons apart by the game they act on.
  await minh.getByRole("button", { name: "Join Lan's game, standard, untimed" }).waitFor();
  await minh.getByRole("button", { name: "Watch Lan's game, standard, untimed" }).waitFor();
  await minh.getByRole("combobox", { name: "Leaderboard speed" }).waitFor();
  // The leaderboard answered (a refused call would read "unavailable: ..."). It cannot know of
  // provisional ratings (left off it), so it does not claim there are no rated games.
  await lobbyShot.getByTestId("leaderboard").getByText("no settled ratings yet (provisional ones are not listed)").waitFor();
  await lobbyShot.screenshot({ path: join(shots, "lobby-desktop.png") });
  await minh.screenshot({ path: join(shots, "lobby-phone.png") });
  await joinGame(minh, id, true);

  const spectator = await player("Watcher");
  await spectator.goto(`${server.url}#/game/${id}`);
  await spectator.getByTestId("board").waitFor();
  // A spectator owns no square, also for a screen reader.
  await until("the spectator's board", async () => (await spectator.getByTestId("count-3").textContent()) === "5");
  const spectatorLabels = await spectator.locator("[data-square]").evaluateAll((squares) => squares.map((b) => b.getAttribute("aria-label") ?? ""));
  assert.equal(spectatorLabels.filter((label) => /^(first|second) player's square [1-5], /.test(label)).length, 10, spectatorLabels.join("; "));
  // Each player hears their own row counted 1-5 from their own left, as moves are given.
  for (const page of [lan, minh]) {
    const ownRow = await page.locator(".row.bottom .square").evaluateAll((e) => e.map((s) => s.getAttribute("aria-label") ?? ""));
    assert.deepEqual(
      ownRow.map((label) => label.split(",")[0]),
      ["your square 1", "your square 2", "your square 3", "your square 4", "your square 5"],
    );
    const theirs = await page.locator(".row.top .square").evaluateAll((e) => e.map((s) => s.getAttribute("aria-label") ?? ""));
    assert.ok(theirs.every((label) => /^opponent's square [1-5], /.test(label)), theirs.join("; "));
  }

  // Each side sees its own row at the bottom.
  const bottomRow = async (page: Page) => {
    await page.getByTestId("turn").filter({ hasText: /move|turn/ }).waitFor();
    return page.locator(".row.bottom .square").evaluateAll((e) => e.map((s) => s.getAttribute("data-square")).join());
  };
  const rows = [await bottomRow(lan), await bottomRow(minh)].sort();
  assert.deepEqual(rows, ["1,2,3,4,5", "7,8,9,10,11"]);
  // Only the player to move is told to pick a square.
  const mover = await whoseTurn([lan, minh]);
  const waiter = mover === lan ? minh : lan;
  await mover!.getByTestId("hint").filter({ hasText: /^Pick one of your squares/ }).waitFor();
  await until("no pick hint off turn", async () => ((await waiter.getByTestId("hint").textContent()) ?? "") === "");

  const pages = [lan, minh];
  let restarted = false;
  for (let ply = 0; ; ply++) {
    const mover = await whoseTurn(pages);
    if (!mover) break;
    const before = await movesOf(mover);
    await playOneMove(mover, ply, mover === minh);
    // Every page, the spectator's included, shows this move before the next one is played.
    for (const page of [lan, minh, spectator]) {
      await until(`move ${before + 1} on every page`, async () => (await movesOf(page)) > before || isOver(page));
    }
    const squares = async (page: Page) =>
      page.locator("[data-testid^=count-]").evaluateAll((elements) =>
        elements.map((e) => `${e.getAttribute("data-testid")}=${e.textContent}`).sort().join(),
      );
    if (!(await isOver(lan))) {
      const seen = await squares(spectator);
      assert.equal(seen, await squares(lan), "the spectator sees the players' board");
    }
    if (ply === 5) {
      await lan.screenshot({ path: join(shots, "game-desktop.png") });
      await minh.screenshot({ path: join(shots, "game-phone.png") });
    }
    if (ply === 7 && !restarted) {
      restarted = true;
      const port = server.address;
      await server.stop();
      for (const page of [lan, minh, spectator]) {
        await page.getByText("reconnecting…").waitFor({ timeout: WAIT });
        // Nothing to play while the move could not be sent.
        assert.equal(await page.locator(".square.playable").count(), 0);
      }
      server = await new Server(server.database, port).start();
      for (const page of [lan, minh, spectator]) {
        await until("reconnected", async () => (await page.getByTestId("connection").textContent()) === "", WAIT);
      }
    }
    assert.ok(ply < 2000, "the game ends");
  }
  assert.ok(restarted, "the server was restarted mid-game");
  for (const page of [lan, minh, spectator]) {
    await page.getByTestId("game-over").waitFor();
    assert.match((await page.getByTestId("game-over").textContent()) ?? "", /^Game over: /);
  }
  const final = await movesOf(lan);
  assert.equal(await movesOf(spectator), final);
  assert.equal(await movesOf(minh), final);
  await lan.screenshot({ path: join(shots, "finished-desktop.png") });
  await minh.screenshot({ path: join(shots, "finished-phone.png") });
  for (const page of [lan, minh, spectator, lobbyShot]) {
    assert.deepEqual((page as Page & { outside: string[] }).outside, [], "nothing fetched from elsewhere");
  }
});

test("a draw is offered to a person, not to the computer", async () => {
  const lan = await player("Lan");
  const minh = await player("Minh");
  const id = await createGame(lan);
  await joinGame(minh, id);
  await lan.getByTestId("board").waitFor();
  await lan.getByTestId("draw").waitFor({ state: "visible" });
  // Against the computer the button is not there: the server refuses such an offer.
  const solo = await player("Solo");
  await solo.getByTestId("opponent").selectOption("1");
  await solo.getByTestId("create-game").click();
  await gameIdOf(solo);
  await solo.getByTestId("resign").waitFor({ state: "visible" });
  assert.equal(await solo.getByTestId("draw").isVisible(), false);
  // The computer's seat reads as the server and the command-line client name it.
  await solo.getByTestId("top-player").getByText("Computer (random)").waitFor();
});

test("a timed game's flag falls in the page", async () => {
  const first = await player("Flag");
  const second = await player("Fall");
  const id = await createGame(first, "15000+0");
  await joinGame(second, id);
  // One move each starts both clocks; then nobody moves.
  for (let ply = 0; ply < 2; ply++) {
    const mover = await whoseTurn([first, second]);
    assert.ok(mover);
    const before = await movesOf(mover);
    await playOneMove(mover, ply, false);
    await until("the move", async () => (await movesOf(first)) > before && (await movesOf(second)) > before);
  }
  await first.getByTestId("bottom-clock").waitFor();
  const shown = await first.getByTestId("bottom-clock").textContent();
  assert.match(shown ?? "", /^0:\d\d/);
  for (const page of [first, second]) {
    await page.getByTestId("game-over").waitFor({ timeout: 40_000 });
    // Who ran out, and each side's score by name: the winner on time may have the fewer points.
    const over = (await page.getByTestId("game-over").textContent()) ?? "";
    const parts = /^Game over: (Flag|Fall) wins \((Flag|Fall) ran out of time\) · (Flag|Fall) \d+, (Flag|Fall) \d+$/.exec(over);
    assert.ok(parts, over);
    assert.notEqual(parts[1], parts[2], over);
    assert.notEqual(parts[3], parts[4], over);
  }
});

test("in a fast game the opponent's move is shown within a small part of the clock", async () => {
  // The slow animation (400 ms a step) would take 2.4 s or more of a 15-second clock.
  const first = await player("Quick", DESKTOP, "400");
  const second = await player("Brisk", DESKTOP, "400");
  const id = await createGame(first, "15000+0");
  await joinGame(second, id);
  for (let ply = 0; ply < 3; ply++) {
    const mover = await whoseTurn([first, second]);
    assert.ok(mover);
    const waiter = mover === first ? second : first;
    const before = await movesOf(mover);
    const sent = Date.now();
    await playOneMove(mover, ply, false);
    await waiter.locator(".row.bottom .square.playable").first().waitFor({ timeout: 10_000 });
    const shownAfter = Date.now() - sent;
    await until("the move", async () => (await movesOf(first)) > before && (await movesOf(second)) > before);
    // From the third ply both clocks have run: a twentieth of at most 15 s, and the wire.
    if (ply === 2) assert.ok(shownAfter < 2_000, `the move took ${shownAfter} ms to show`);
  }
  await first.getByTestId("resign").click();
});

test("against a quick computer in a fast game, your own move's animation gives way to your clock", async () => {
  // The computer answers within a fraction of a second, while the page still shows the
  // player's own move at 400 ms a step: an outside probe lost 1.5-4 s a move so, and a game.
  const lan = await player("Quick", DESKTOP, "400");
  await lan.getByTestId("opponent").selectOption("1");
  const id = await createGame(lan, "15000+0");
  assert.ok(id);
  const playable = lan.locator(".row.bottom .square.playable").first();
  // Lan's turn, or the end: the computer may lose on time on a loaded machine (a debug build
  // searches slowly), but Lan never may, which is what this test is about.
  const turnOrEnd = async (ply: number) => {
    await until(`Lan's turn or the end before move ${ply}`, async () => (await playable.isVisible()) || isOver(lan), 20_000);
    if (!(await isOver(lan))) return false;
    const over = (await lan.getByTestId("game-over").textContent()) ?? "";
    assert.doesNotMatch(over, /Quick ran out of time/, `before move ${ply}: ${over}`);
    return true;
  };
  for (let ply = 0; ply < 4; ply++) {
    if (await turnOrEnd(ply)) break;
    const sent = Date.now();
    await playOneMove(lan, ply, false);
    // Gone while the move is sent; back once the computer's answer has been shown.
    await playable.waitFor({ state: "detached", timeout: 5_000 }).catch(() => {});
    if (await turnOrEnd(ply + 1)) break;
    const back = Date.now() - sent;
    // In its last 30 seconds nothing is animated on Lan's clock: the turn is back as soon as
    // the computer's answer is (about 0.5 s here). An outside probe lost 11 of its 15 seconds
    // when each move still took a twentieth of the time left (about 2 s a turn here).
    assert.ok(ply < 1 || back < 1_500, `move ${ply}: ${back} ms until the turn came back`);
  }
  await lan.getByTestId("resign").click().catch(() => {});
});

test("a seek is answered from another lobby", async () => {
  const seeker = await player("Seeker");
  const taker = await player("Taker", PHONE);
  await seeker.getByTestId("seek").click();
  await seeker.getByText("looking for an opponent…").waitFor();
  // The seeker's own seek is marked, with nothing to accept: that would seat it against itself.
  const own = seeker.locator("[data-testid=seeks] li", { hasText: "Seeker" });
  await own.getByTestId("own-seek").waitFor();
  assert.equal(await own.getByTestId("accept-seek").count(), 0);
  const offer = taker.locator("[data-testid=seeks] li", { hasText: "Seeker" });
  await offer.waitFor();
  await offer.getByTestId("accept-seek").tap();
  const id = await gameIdOf(taker);
  assert.equal(await gameIdOf(seeker), id);
  await whoseTurn([seeker, taker]);
  await seeker.getByTestId("resign").click();
  for (const page of [seeker, taker]) {
    await page.getByTestId("game-over").waitFor();
    assert.match((await page.getByTestId("game-over").textContent()) ?? "", /^Game over: Taker wins \(Seeker resigned\) · /);
  }
});

test("the lobby offers one's own games to open and play, others' to join and watch", async () => {
  const lan = await player("Lan");
  const minh = await player("Minh");
  const visitor = await player("Visitor");
  const id = await createGame(lan);
  await lan.locator("a.brand").click();
  const row = (page: Page, list: string) => page.locator(`[data-testid=${list}] li[data-game="${id}"]`);
  const buttons = (page: Page, list: string) =>
    row(page, list).locator("button").evaluateAll((all) => all.map((b) => b.getAttribute("data-testid")).join());
  await row(lan, "open-games").waitFor();
  assert.equal(await buttons(lan, "open-games"), "open");
  await row(minh, "open-games").waitFor();
  assert.equal(await buttons(minh, "open-games"), "join,watch");
  await joinGame(minh, id);
  await minh.locator("a.brand").click();
  for (const [page, expected] of [[lan, "play"], [minh, "play"], [visitor, "watch"]] as const) {
    await row(page, "active-games").waitFor();
    assert.equal(await buttons(page, "active-games"), expected);
  }
  // Play opens the game with the page's seat: its own row is playable when its turn comes.
  await row(lan, "active-games").getByTestId("play").click();
  await lan.waitForURL(new RegExp(`#/game/${id}$`));
  await row(minh, "active-games").getByTestId("play").click();
  const mover = await whoseTurn([lan, minh]);
  assert.ok(mover);
  await mover.locator(".row.bottom .square.playable").first().waitFor();
  await lan.getByTestId("resign").click();
});

test("a waiting game's link is shown and copied for a friend, who joins by it", async () => {
  const lan = await player("Lan");
  await lan.context().grantPermissions(["clipboard-read", "clipboard-write"], { origin: new URL(server.url).origin });
  const id = await createGame(lan);
  const link = `${new URL(server.url).origin}/#/game/${id}`;
  await lan.getByTestId("invite").waitFor();
  assert.equal(await lan.getByTestId("invite-link").inputValue(), link);
  await lan.getByTestId("copy-link").click();
  await lan.locator("#status").getByText("Link copied: whoever opens it can join this game.").waitFor();
  // Beside the button too, where a phone's screen shows it.
  assert.equal(await lan.getByTestId("copy-note").textContent(), "Link copied: whoever opens it can join this game.");
  assert.equal(await lan.evaluate(() => navigator.clipboard.readText()), link);
  const minh = await player("Minh");
  await minh.goto(link);
  await minh.getByTestId("join-game").click();
  // Seated: the invitation has done its work, on both pages; a spectator never sees it.
  await minh.getByTestId("resign").waitFor();
  await lan.getByTestId("invite").waitFor({ state: "hidden" });
  assert.ok(await minh.getByTestId("invite").isHidden());
  const visitor = await player("Visitor");
  await visitor.goto(link);
  await visitor.getByTestId("board").waitFor();
  assert.ok(await visitor.getByTestId("invite").isHidden());
  await lan.getByTestId("resign").click();
});

/** Every square's count as the page shows it, e.g. "count-0=10,count-1=5,…" (sorted). */
const boardOf = (page: Page) =>
  page.locator("[data-testid^=count-]").evaluateAll((elements) =>
    elements.map((e) => `${e.getAttribute("data-testid")}=${e.textContent}`).sort().join(),
  );

test("a move is animated step by step from its trace and ends on the server's board", async () => {
  const animated = await player("Slow", DESKTOP, "50");
  const still = await player("Still");
  const id = await createGame(animated);
  await joinGame(still, id);
  const mover = await whoseTurn([animated, still]);
  assert.ok(mover);
  await animated.getByTestId("count-1").waitFor();
  const start = await boardOf(animated);
  // Every board the animated page shows, as the DOM changes. (A string: tsx would wrap named
  // functions in a helper the page does not have.)
  await animated.evaluate(`{
    const board = document.querySelector("[data-testid=board]");
    const snapshot = () =>
      [...board.querySelectorAll("[data-testid^=count-]")]
        .map((e) => e.getAttribute("data-testid") + "=" + e.textContent)
        .sort()
        .join();
    const frames = [snapshot()];
    window.frames_ = frames;
    new MutationObserver(() => {
      const now = snapshot();
      if (frames[frames.length - 1] !== now) frames.push(now);
    }).observe(board, { childList: true, subtree: true, characterData: true });
  }`);
  const square = await mover.locator(".row.bottom .square.playable").first().getAttribute("data-square");
  await playOneMove(mover, 1, false);
  for (const page of [animated, still]) await until("the move shown", async () => (await movesOf(page)) === 1);

  const frames = await animated.evaluate(() => (window as unknown as { frames_: string[] }).frames_);
  const picked = frames.map((frame) => Number(new RegExp(`count-${square}=(\\d+)`).exec(frame)?.[1]));
  assert.equal(new RegExp(`count-${square}=(\\d+)`).exec(start)?.[1], "5", "the picked square held 5");
  assert.deepEqual(picked.slice(0, 2), [5, 0], `the first step empties the picked square: ${picked.join(" ")}`);
  // Pick up, then one board per stone sown (5 at least), then the final one.
  assert.ok(frames.length >= 6, `intermediate boards shown: ${frames.length}`);
  for (const [i, frame] of frames.entries()) {
    const total = [...frame.matchAll(/=(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
    const startTotal = [...start.matchAll(/=(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
    // While sowing, the stones in hand are off the board: never more than at the start.
    assert.ok(total <= startTotal, `frame ${i} has no stones from nowhere`);
  }
  assert.equal(await boardOf(animated), await boardOf(still), "the animated board ends as the other");
  // Each page has its own side at the bottom: compare the pair of scores.
  const scores = async (page: Page) =>
    [await page.getByTestId("top-score").textContent(), await page.getByTestId("bottom-score").textContent()].sort();
  assert.deepEqual(await scores(animated), await scores(still));
  assert.equal(await animated.locator(".square.pick, .square.sow, .square.capture").count(), 0, "no light left on");
  await animated.getByTestId("resign").click();
  for (const page of [animated, still]) {
    await page.getByTestId("game-over").waitFor();
    assert.ok(await page.getByTestId("hint").isHidden(), "no 'pick a square' hint once the game is over");
  }
});

test("a second move cannot be sent while the first is on its way", async () => {
  const quick = await player("Quick");
  const other = await player("Other");
  const id = await createGame(quick);
  await joinGame(other, id);
  const mover = await whoseTurn([quick, other]);
  assert.ok(mover);
  // Hold the move's request in the browser: the server has not seen it, so no event comes back,
  // and the page must not offer the same turn again meanwhile.
  let sent = 0;
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  await mover.route("**/oanquan.v1.GameService/PlayMove", async (route) => {
    sent++;
    await held;
    await route.continue();
  });
  await playOneMove(mover, 1, false);
  await until("the move sent", async () => sent === 1);
  assert.equal(await mover.locator(".row.bottom .square.playable").count(), 0, "no square playable in flight");
  assert.equal(await mover.getByTestId("turn").textContent(), "Move sent…");
  // A quick second click on a square with stones selects nothing and sends nothing. (Forced: the
  // square says it cannot be played now, aria-disabled, so Playwright would wait for it.)
  await mover.locator(".row.bottom .square").first().click({ force: true });
  assert.ok(await mover.getByTestId("dir-left").isHidden(), "no direction offered in flight");
  release();
  for (const page of [quick, other]) await until("the move shown", async () => (await movesOf(page)) === 1);
  assert.equal(sent, 1, "one move request");
  assert.doesNotMatch((await mover.locator("#status").textContent()) ?? "", /refused/);
  await mover.unroute("**/oanquan.v1.GameService/PlayMove");
  await quick.getByTestId("resign").click();
  for (const page of [quick, other]) await page.getByTestId("game-over").waitFor();
});

/** Registers an account through the server's gRPC-Web (as the page speaks it): its API key. */
async function register(username: string): Promise<string> {
  const client = createClient(AccountService, createGrpcWebTransport({ baseUrl: server.url, useBinaryFormat: true }));
  return (await client.register({ username })).apiKey;
}

/** Signs a page in with an API key, as a person does in the account bar. */
async function signIn(page: Page, key: string, username: string) {
  await page.locator("#apikey").fill(key);
  await page.locator("#signin").click();
  await page.locator("#me").getByText(username).waitFor();
}

test("an account's game made in another browser is the account's to open there, not to join", async () => {
  const key = await register("lan_two_browsers");
  const home = await player("Lan");
  const work = await player("Lan");
  await signIn(home, key, "lan_two_browsers");
  const id = await createGame(home);
  await signIn(work, key, "lan_two_browsers");
  const row = work.locator(`[data-testid=open-games] li[data-game="${id}"]`);
  await row.getByTestId("open").waitFor();
  assert.equal(await row.getByTestId("join").count(), 0);
  await row.getByTestId("open").click();
  await work.waitForURL(new RegExp(`#/game/${id}$`));
  // The seat is the account's here too: it may call the game off.
  await work.getByTestId("abort").waitFor();
  await work.getByTestId("abort").click();
  await home.getByTestId("game-over").waitFor();
});

/** Two new accounts signed in on pages of their own, the first's rated 3+2 game joined by the
 * second: (first's page, second's page, the game id). */
async function ratedBlitzGame(first: string, second: string): Promise<[Page, Page, string]> {
  const creator = await player("Hoa");
  const joiner = await player("Binh");
  await signIn(creator, await register(first), first);
  await signIn(joiner, await register(second), second);
  await creator.getByTestId("rated").check();
  const id = await createGame(creator, "180000+2000");
  await joinGame(joiner, id);
  return [creator, joiner, id];
}

test("a rated game ended before both players moved says the ratings are unchanged, and why", async () => {
  const [hoa, binh] = await ratedBlitzGame("hoa_unchanged", "binh_unchanged");
  const mover = await whoseTurn([hoa, binh]);
  assert.ok(mover);
  await playOneMove(mover, 0, false);
  const waiter = mover === hoa ? binh : hoa;
  await until("the move shown", async () => (await movesOf(waiter)) === 1);
  // The move in words for a screen reader, on the other page only.
  const moverName = mover === hoa ? "hoa_unchanged" : "binh_unchanged";
  assert.match(
    (await waiter.getByTestId("move-said").textContent()) ?? "",
    new RegExp(`^${moverName} \\(\\d+\\?\\) played their square [1-5]( and captured [^.]+)?\\. Your turn\\.$`),
  );
  assert.equal(await mover.getByTestId("move-said").textContent(), "");
  await waiter.getByTestId("resign").click();
  for (const page of [hoa, binh]) {
    await page.getByTestId("game-over").waitFor();
    assert.match(
      (await page.getByTestId("game-over").textContent()) ?? "",
      / · ratings unchanged \(the game ended before both players moved\)$/,
    );
  }
});

/** Each player makes a move, then `resigner` resigns (a finished game, rated if it can be). */
async function bothMoveThenResigns(resigner: Page, other: Page) {
  for (let ply = 0; ply < 2; ply++) {
    const mover = await whoseTurn([resigner, other]);
    assert.ok(mover, "the game goes on");
    await playOneMove(mover, ply + 1, false);
    for (const page of [resigner, other]) await until("the move shown", async () => (await movesOf(page)) === ply + 1);
  }
  await whoseTurn([resigner, other]);
  await resigner.getByTestId("resign").click();
}

test("a player's profile opens from a seat's name and leads back to the lobby", async () => {
  // A rated blitz game (3+2), resigned once both have moved: both accounts get a blitz rating.
  const [hoa, binh, id] = await ratedBlitzGame("hoa_profile", "binh_profile");
  await bothMoveThenResigns(hoa, binh);
  await hoa.getByTestId("game-over").waitFor();
  // The result says what it did to the ratings, not only what they were before.
  const over = (await hoa.getByTestId("game-over").textContent()) ?? "";
  const changes = / · ratings: (\w+) (\d+) → (\d+)\?, (\w+) (\d+) → (\d+)\?$/.exec(over);
  assert.ok(changes, over);
  const after = new Map([[changes[1], [Number(changes[2]), Number(changes[3])]], [changes[4], [Number(changes[5]), Number(changes[6])]]]);
  assert.ok(after.get("binh_profile")![1] > after.get("binh_profile")![0], over);
  assert.ok(after.get("hoa_profile")![1] < after.get("hoa_profile")![0], over);

  await hoa.getByTestId("top-player").getByTestId("player-link").click();
  await hoa.waitForURL(/#\/player\/binh_profile$/);
  await hoa.getByTestId("profile-name").getByText("binh_profile", { exact: true }).waitFor();
  const blitz = hoa.locator("[data-testid=ratings] tr[data-speed=blitz]");
  await blitz.waitFor();
  // One game: the rating is provisional, shown with a "?".
  assert.match((await blitz.textContent()) ?? "", /^Blitz\d+\?\d+1$/);
  assert.equal(await hoa.getByTestId("record").textContent(), "1 won · 0 drawn · 0 lost");
  await hoa.locator(`[data-testid=recent-games] li[data-game="${id}"]`).waitFor();
  await hoa.screenshot({ path: join(shots, "profile-desktop.png") });
  await hoa.getByTestId("back").click();
  await hoa.getByTestId("open-games").waitFor();
});

test("a profile link that does not decode shows the lobby, not an empty page", async () => {
  const page = await player("Lan");
  await page.getByTestId("open-games").waitFor();
  const errors: string[] = [];
  page.on("pageerror", (error) => errors.push(error.message));
  await page.goto(`${server.url}#/player/%E0%A4%A`);
  await page.getByTestId("open-games").waitFor();
  assert.deepEqual(errors, []);
});

test("an aborted game has no winner, and a game that does not exist is not waited for", async () => {
  const lan = await player("Lan");
  const id = await createGame(lan);
  // A screen reader hears each square's count, not only its number.
  await until("the board shown", async () => (await lan.getByTestId("count-3").textContent()) === "5");
  const labels = await lan.locator("[data-square]").evaluateAll((squares) => squares.map((b) => b.getAttribute("aria-label")));
  assert.ok(labels.some((label) => /^mandarin square on the left, 10 stones/.test(label ?? "")), labels.join("; "));
  // Whichever seat the creator got, five of the squares are theirs.
  assert.equal(labels.filter((label) => /^your square [1-5], 5 stones$/.test(label ?? "")).length, 5, labels.join("; "));
  // The opponent joins and aborts before the first move, from a program.
  const games = createClient(GameService, createGrpcWebTransport({ baseUrl: server.url, useBinaryFormat: true }));
  const joined = await games.joinGame({ gameId: id, displayName: "Quitter" });
  await games.abortGame({ gameId: id }, { headers: { authorization: `Bearer ${joined.playerToken}` } });
  await lan.getByTestId("game-over").waitFor();
  const over = (await lan.getByTestId("game-over").textContent()) ?? "";
  assert.match(over, /No result \(aborted\)/);
  assert.doesNotMatch(over, /wins/);

  // A game nobody joined is called off from the page; a day's clock reads in days.
  await lan.goto(server.url);
  await lan.getByTestId("open-games").waitFor();
  await createGame(lan, "c86400000");
  await until("the clock shown", async () => (await lan.locator(".clock").first().textContent()) === "1d 00:00");
  await lan.getByTestId("abort").click();
  await lan.getByTestId("game-over").getByText("No result (aborted)").waitFor();

  let watches = 0;
  lan.on("request", (request) => {
    if (request.url().endsWith("/WatchGame")) watches++;
  });
  await lan.goto(`${server.url}#/game/doesnotexist123`);
  // (The status line says it too, in a sentence: "There is no such game".)
  await lan.getByTestId("connection").getByText("no such game").waitFor();
  // No board of zeros for a game that is not there.
  await lan.getByTestId("no-game").waitFor();
  assert.equal(await lan.getByTestId("board").count(), 0);
  await new Promise((r) => setTimeout(r, 3000));
  assert.equal(watches, 1, "one WatchGame, not a retry every few seconds");
});

test("a rematch offered before a reload keeps its seat when it is accepted", async () => {
  const hoa = await player("Hoa");
  const binh = await player("Binh");
  const id = await createGame(hoa);
  await joinGame(binh, id);
  await bothMoveThenResigns(hoa, binh);
  for (const page of [hoa, binh]) await page.getByTestId("game-over").waitFor();
  await hoa.getByTestId("rematch").click();
  await hoa.getByText("Rematch offered").first().waitFor();
  await hoa.reload();
  await hoa.getByTestId("game-over").waitFor();
  await until("the offer still shown as made", async () => (await hoa.getByTestId("rematch").textContent()) === "Rematch offered");
  await until("the offer reaches the other page", async () => (await binh.getByTestId("rematch").textContent()) === "Accept rematch");
  await binh.getByTestId("rematch").click();
  await binh.waitForURL((url) => !url.hash.endsWith(id));
  const next = await gameIdOf(binh);
  await hoa.waitForURL(new RegExp(`#/game/${next}$`));
  // Hoa plays the rematch from the seat offered before the reload, not as a spectator.
  await hoa.getByTestId("resign").waitFor();
});

/** The other page of a pair. */
const otherOf = (pair: Page[], page: Page) => (pair[0] === page ? pair[1] : pair[0]);

/** Two players in a game started between them: the one to move, and the one who waits. */
async function moverAndWaiter(first = "Lan", second = "Minh"): Promise<{ mover: Page; waiter: Page }> {
  const [a, b] = [await player(first), await player(second)];
  await joinGame(b, await createGame(a));
  const mover = await whoseTurn([a, b]);
  assert.ok(mover);
  return { mover, waiter: otherOf([a, b], mover) };
}

test("errors read as sentences for a player, not as the server's words for programmers", async () => {
  // What only a programmer understands: gRPC metadata, API names, markdown.
  const forProgrammers = /`|Bearer|authorization|metadata|Service|<|>/;
  const status = async (page: Page, prefix: string) => {
    const line = page.locator("#status");
    await until(`"${prefix}…" shown`, async () => ((await line.textContent()) ?? "").startsWith(prefix));
    const text = (await line.textContent()) ?? "";
    assert.doesNotMatch(text, forProgrammers);
    return text;
  };

  // Rated without an account (the server's ErrorInfo reason RATED_NEEDS_ACCOUNT).
  const lan = await player("Lan");
  await lan.getByTestId("rated").check();
  await lan.getByTestId("time-control").selectOption("180000+2000");
  await lan.getByTestId("create-game").click();
  assert.equal(
    await status(lan, "Cannot create"),
    "Cannot create the game: rated games need an account; sign in with your API key, or play unrated",
  );

  // A name the server refuses (BadRequest on display_name): the server's words, which say why.
  const bracketed = await player("Lan (2000)");
  await bracketed.getByTestId("create-game").click();
  assert.equal(
    await status(bracketed, "Cannot create"),
    `Cannot create the game: "Lan (2000)" ends in a part in brackets, which players' screens use for a rating or a computer's level; choose a name without it`,
  );
  const staff = await player("admin");
  await staff.getByTestId("create-game").click();
  assert.match(await status(staff, "Cannot create"), /reads as "admin", a name of the service and its staff; choose another$/);
  // Too long: the sentence says it is the name (an outside probe read only "must be 1 to 32
  // characters").
  const long = await player("L".repeat(40));
  await long.getByTestId("create-game").click();
  assert.equal(
    await status(long, "Cannot create"),
    "Cannot create the game: a name must be 1 to 32 characters long after trimming, got 40",
  );

  // A key with characters no key has is not sent (a browser could not send it in a header).
  for (const key of ["oqk_\u00e9", "oqk_\u202eabc"]) {
    await staff.locator("#apikey").fill(key);
    await staff.locator("#signin").click();
    await until("the key refused", async () => /characters no key has/.test((await staff.locator("#me").textContent()) ?? ""));
  }

  // A mistyped API key (UNAUTHENTICATED, BAD_API_KEY) in the account bar.
  await lan.locator("#apikey").fill("oqk_mistyped");
  await lan.locator("#signin").click();
  await until("the refusal shown", async () => /^not signed in/.test((await lan.locator("#me").textContent()) ?? ""));
  assert.equal(await lan.locator("#me").textContent(), "not signed in: that API key is not valid (mistyped or revoked)");

  // The key refused, the error that said to sign in still stands beside it; signed in, it
  // is gone (an outside probe saw it beside the account's name).
  assert.match((await lan.locator("#status").textContent()) ?? "", /rated games need an account/);
  await signIn(lan, await register("lan_errors"), "lan_errors");
  await until("the stale error cleared", async () => ((await lan.locator("#status").textContent()) ?? "") === "");

  // Signed in, a rated game with no clock (BadRequest on rated).
  await lan.getByTestId("time-control").selectOption("");
  await lan.getByTestId("create-game").click();
  await until("a new refusal", async () => /clock/.test((await lan.locator("#status").textContent()) ?? ""));
  assert.equal(await status(lan, "Cannot create"), "Cannot create the game: only games between two people on a clock can be rated");

  // A game that does not exist, alone on the status line: a sentence.
  await lan.goto(`${server.url}#/game/doesnotexist456`);
  assert.equal(await status(lan, "There"), "There is no such game");
});

test("each player's first move shows its own time limit, counting down", async () => {
  const lan = await player("Early");
  const minh = await player("Late");
  const id = await createGame(lan, "60000+1000");
  await joinGame(minh, id);
  const limit = (page: Page, where: "top" | "bottom") => page.getByTestId(`${where}-first-move`).textContent();
  const seconds = (text: string | null) => Number(/^First move within 0:(\d\d)/.exec(text ?? "")?.[1] ?? NaN);

  const first = await whoseTurn([lan, minh]);
  assert.ok(first);
  const second = otherOf([lan, minh], first);
  // The mover sees it under their own row, the opponent above the board; nobody else's is shown.
  await until("the first mover's limit shown", async () => /^First move within 0:\d\d$/.test((await limit(first, "bottom")) ?? ""));
  const before = seconds(await limit(first, "bottom"));
  assert.ok(before > 15 && before <= 30, `about 30 s to make the first move: ${before}`);
  await until("the opponent sees it", async () => /^First move within 0:\d\d$/.test((await limit(second, "top")) ?? ""));
  assert.equal(await limit(first, "top"), "");
  assert.equal(await limit(second, "bottom"), "");
  assert.ok(await first.getByText(/^First move within/).isVisible());
  // It counts down.
  await until("a second less", async () => seconds(await limit(first, "bottom")) < before, 5_000);

  // The first move played, the second player has their own limit.
  await playOneMove(first, 1, false);
  await until("the second player's limit shown", async () => /^First move within 0:\d\d$/.test((await limit(second, "bottom")) ?? ""));
  assert.ok(seconds(await limit(second, "bottom")) > 15, "a fresh limit");
  await until("the first player sees it", async () => /^First move within/.test((await limit(first, "top")) ?? ""));
  assert.equal(await limit(first, "bottom"), "");

  // After both first moves the clocks run: no limit shown anywhere.
  await playOneMove(second, 2, false);
  for (const page of [first, second]) {
    await until("the move shown", async () => (await movesOf(page)) === 2);
    await until("no limit", async () => (await limit(page, "top")) === "" && (await limit(page, "bottom")) === "");
  }
  await first.getByTestId("resign").click();
  for (const page of [first, second]) await page.getByTestId("game-over").waitFor();
});

test("signing out forgets the key and the account's seats, and keeps the anonymous ones", async () => {
  const page = await player("Guest");
  assert.ok(await page.locator("#signout").isHidden(), "nothing to sign out of");
  const anonymous = await createGame(page);
  await page.getByTestId("bottom-player").getByText("Guest (you)").waitFor();
  await page.goto(server.url);
  await signIn(page, await register("signs_out"), "signs_out");
  await page.locator("#signout").waitFor({ state: "visible" });
  const own = await createGame(page);
  await page.getByTestId("bottom-player").getByText(/signs_out.*\(you\)/).waitFor();
  // A second tab of the same browser on the account's game.
  const tab = await page.context().newPage();
  await tab.goto(`${server.url}#/game/${own}`);
  await tab.getByTestId("bottom-player").getByText(/signs_out.*\(you\)/).waitFor();

  await page.locator("#signout").click();
  await until("signed out", async () => (await page.locator("#me").textContent()) === "anonymous");
  assert.equal(await page.locator("#apikey").inputValue(), "");
  assert.ok(await page.locator("#signout").isHidden());
  // The account's game on screen is drawn again as the next person at this computer sees it:
  // a stranger's view, with the free seat to join and no seat of its own.
  await page.getByTestId("join-game").waitFor({ state: "visible" });
  assert.equal(await page.getByTestId("bottom-player").getByText("(you)").count(), 0);
  const kept = await page.evaluate(() => Object.keys(localStorage).filter((key) => key.startsWith("oanquan.seat.")));
  assert.deepEqual(kept, [`oanquan.seat.${anonymous}`]);
  assert.equal(await page.evaluate(() => localStorage.getItem("oanquan.apiKey")), null);
  // The other tab follows: signed out, its view of the game a stranger's.
  await until("the other tab signed out", async () => (await tab.locator("#me").textContent()) === "anonymous");
  await tab.getByTestId("join-game").waitFor({ state: "visible" });
  assert.equal(await tab.getByTestId("bottom-player").getByText("(you)").count(), 0);
  // Signed in again, then the key field emptied and Sign in pressed: that signs out too, and
  // the account's seats go with it.
  await page.goto(server.url);
  const secondKey = await register("signs_out_2");
  await signIn(page, secondKey, "signs_out_2");
  const second = await createGame(page);
  await page.getByTestId("bottom-player").getByText(/signs_out_2.*\(you\)/).waitFor();
  await page.locator("#apikey").fill("");
  await page.locator("#signin").click();
  await until("signed out by an empty key", async () => (await page.locator("#me").textContent()) === "anonymous");
  assert.equal(await page.evaluate((id) => localStorage.getItem(`oanquan.seat.${id}`), second), null);
  // The anonymous game is still played from this browser.
  await page.goto(`${server.url}#/game/${anonymous}`);
  await page.getByTestId("bottom-player").getByText("Guest (you)").waitFor();
  assert.ok(await page.getByTestId("join-game").isHidden());
  assert.ok(own !== anonymous);
  // Signed in again with that key, on the account's game: the key plays its seat again (it
  // stands in for the seat token), where an outside probe was left a spectator of its own game.
  await page.goto(`${server.url}#/game/${second}`);
  await page.getByTestId("join-game").waitFor({ state: "visible" });
  await signIn(page, secondKey, "signs_out_2");
  await page.getByTestId("bottom-player").getByText(/signs_out_2.*\(you\)/).waitFor();
  assert.ok(await page.getByTestId("join-game").isHidden());
  // Another account's key typed over it signs the first out: the game is a stranger's again,
  // where an outside probe went on moving for the first account.
  await signIn(page, await register("signs_out_3"), "signs_out_3");
  await page.getByTestId("join-game").waitFor({ state: "visible" });
  assert.equal(await page.getByTestId("bottom-player").getByText("(you)").count(), 0);
});

test("signing out and in again in one of two tabs plays the seat in both", async () => {
  // An outside probe's tab that signed in again stayed a spectator: the other tab took the
  // seat back first.
  const page = await player("Twice");
  const key = await register("two_tabs");
  await signIn(page, key, "two_tabs");
  const id = await createGame(page);
  await page.getByTestId("bottom-player").getByText(/two_tabs.*\(you\)/).waitFor();
  const tab = await page.context().newPage();
  await tab.goto(`${server.url}#/game/${id}`);
  await tab.getByTestId("bottom-player").getByText(/two_tabs.*\(you\)/).waitFor();
  await page.locator("#signout").click();
  for (const p of [page, tab]) await p.getByTestId("join-game").waitFor({ state: "visible" });
  await signIn(page, key, "two_tabs");
  for (const p of [page, tab]) {
    await p.getByTestId("bottom-player").getByText(/two_tabs.*\(you\)/).waitFor();
    assert.ok(await p.getByTestId("join-game").isHidden());
  }
  await tab.close();
});

test("an opponent's draw offer is no longer announced once the game is over", async () => {
  const { mover, waiter } = await moverAndWaiter();
  await mover.getByTestId("draw").click();
  await waiter.locator("#status").getByText(/offers a draw$/).waitFor();
  await mover.getByTestId("resign").click();
  await waiter.getByTestId("game-over").waitFor();
  await until("the offer's notice gone", async () => !/offers a draw/.test((await waiter.locator("#status").textContent()) ?? ""));
});

test("a seat taken while the account signs out in another tab is not kept", async () => {
  const page = await player("Racer");
  await signIn(page, await register("signs_out_race"), "signs_out_race");
  const other = await page.context().newPage();
  await other.goto(server.url);
  await other.locator("#signout").waitFor({ state: "visible" });
  // The CreateGame call leaves with the key, and is held on its way long enough to sign out.
  await page.route("**/CreateGame", async (route) => {
    await new Promise((r) => setTimeout(r, 1500));
    await route.continue();
  });
  await page.getByTestId("create-game").click();
  await other.locator("#signout").click();
  await page.locator("#status").getByText("You signed out while the seat was being taken").waitFor({ timeout: 10_000 });
  const seats = await page.evaluate(() => Object.keys(localStorage).filter((key) => key.startsWith("oanquan.seat.")));
  assert.deepEqual(seats, []);
});

test("provisional ratings are shown as provisional, not as no rated games", async () => {
  const an = await player("An");
  const bao = await player("Bao");
  await signIn(an, await register("an_prov"), "an_prov");
  await signIn(bao, await register("bao_prov"), "bao_prov");
  await an.getByTestId("rated").check();
  const id = await createGame(an, "180000+2000");
  await joinGame(bao, id);
  await bothMoveThenResigns(an, bao);
  await an.getByTestId("game-over").waitFor();
  // Each account bar says the new rating at once, without a reload (an outside probe's stayed
  // at the old one until then).
  for (const [page, name] of [
    [an, "an_prov"],
    [bao, "bao_prov"],
  ] as const) {
    await until(`${name}'s bar after the game`, async () =>
      new RegExp(`^${name} \\(blitz \\d+\\?\\)$`).test((await page.locator("#me").textContent()) ?? ""),
    );
  }

  // The lobby: the leaderboard leaves provisional ratings off, and says so; the player's own is shown.
  await an.goto(server.url);
  await an.locator("[data-testid=leaderboard] li").first().waitFor();
  const board = (await an.getByTestId("leaderboard").textContent()) ?? "";
  assert.doesNotMatch(board, /no rated games/);
  assert.match(board, /provisional/);
  const own = an.getByTestId("own-rating");
  await own.waitFor();
  assert.match((await own.textContent()) ?? "", /^Your blitz rating \d+\? is provisional \(1 rated game\): not listed until it settles\.$/);
  // The account bar marks it too.
  await until("the account bar", async () => /^an_prov \(blitz \d+\?\)$/.test((await an.locator("#me").textContent()) ?? ""));

  // The profile: the rating with its "?" and what that means; no "no rated games yet".
  await an.goto(`${server.url}#/player/an_prov`);
  const blitz = an.locator("[data-testid=ratings] tr[data-speed=blitz]");
  await blitz.waitFor();
  assert.match((await blitz.textContent()) ?? "", /^Blitz\d+\?\d+1$/);
  await an.getByTestId("provisional-note").waitFor();
  assert.match((await an.getByTestId("provisional-note").textContent()) ?? "", /provisional/);
  assert.doesNotMatch((await an.getByTestId("ratings").textContent()) ?? "", /no rated games/);

  // An account that has played no rated game: that, and only that, says so.
  await register("cam_unrated");
  await an.goto(`${server.url}#/player/cam_unrated`);
  await an.getByTestId("ratings").getByText("no rated games yet").waitFor();
  assert.ok(await an.getByTestId("provisional-note").isHidden());
});

test("only the squares the player can play now are Tab stops; the others still say their counts", async () => {
  const { mover, waiter } = await moverAndWaiter("Tab", "Stop");
  await until("the board shown", async () => (await waiter.getByTestId("count-3").textContent()) === "5");

  /** The squares that Tab reaches, going once round the whole page from its start. */
  const tabStops = async (page: Page) => {
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    const seen = new Set<string>();
    for (let i = 0; i < 40; i++) {
      await page.keyboard.press("Tab");
      const square = await page.evaluate(() => document.activeElement?.getAttribute("data-square") ?? "");
      if (square) seen.add(square);
    }
    return [...seen].sort((a, b) => Number(a) - Number(b));
  };
  /** The page's own squares that hold stones: those its player may pick on their turn. */
  const ownWithStones = async (page: Page) =>
    page
      .locator(".row.bottom .square")
      .evaluateAll((e) =>
        e
          .filter((s) => s.querySelector(".count")?.textContent !== "0")
          .map((s) => s.getAttribute("data-square")!)
          .sort((a, b) => Number(a) - Number(b)),
      );
  // The player to move tabs through their own five squares, not the opponent's nor the mandarins'.
  assert.deepEqual(await tabStops(mover), await ownWithStones(mover));
  // Waiting for the opponent: no square to play, none a Tab stop.
  assert.deepEqual(await tabStops(waiter), []);
  // Not playable, they still tell a screen reader their counts, and that they cannot be played.
  const labels = await waiter.locator("[data-square]").evaluateAll((squares) =>
    squares.map((b) => `${b.getAttribute("aria-label")}|${b.getAttribute("aria-disabled")}`),
  );
  assert.equal(labels.filter((l) => /^(your|opponent's) square [1-5], 5 stones\|true$/.test(l)).length, 10, labels.join("; "));
  assert.equal(labels.filter((l) => /^mandarin square on the (left|right), 10 stones( and the mandarin piece)?\|true$/.test(l)).length, 2, labels.join("; "));

  // By keyboard alone: Tab to a square, Enter picks it, → plays it.
  await mover.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
  for (let i = 0; i < 40; i++) {
    await mover.keyboard.press("Tab");
    if (await mover.evaluate(() => document.activeElement?.hasAttribute("data-square") ?? false)) break;
  }
  // Before a pick, no own square is pressed; the pick is said as "pressed", and the direction
  // buttons name the square they sow, not their arrows.
  assert.deepEqual(
    await mover.locator(".square.playable").evaluateAll((e) => [...new Set(e.map((b) => b.getAttribute("aria-pressed")))]),
    ["false"],
  );
  await mover.keyboard.press("Enter");
  await mover.getByTestId("dir-right").waitFor();
  const picked = await mover.evaluate(() => document.activeElement?.getAttribute("aria-label") ?? "");
  assert.match(picked, /^your square [1-5], /);
  assert.deepEqual(
    await mover.locator("[aria-pressed=true]").evaluateAll((e) => e.map((b) => b.getAttribute("aria-label"))),
    [picked],
  );
  const square = picked.split(",")[0];
  assert.ok(await mover.getByRole("button", { name: `Sow ${square} to the left`, exact: true }).isVisible());
  assert.ok(await mover.getByRole("button", { name: `Sow ${square} to the right`, exact: true }).isVisible());
  // The rules are a click away, folded until asked for.
  const howTo = mover.getByTestId("how-to-play");
  assert.ok(!(await howTo.evaluate((d) => (d as HTMLDetailsElement).open)));
  assert.match((await howTo.textContent()) ?? "", /How to play.*mandarin/s);
  await mover.keyboard.press("ArrowRight");
  for (const page of [mover, waiter]) await until("the move shown", async () => (await movesOf(page)) === 1);
  // Now the other player's five squares are the Tab stops, on their page.
  assert.deepEqual(await tabStops(waiter), await ownWithStones(waiter));
  assert.deepEqual(await tabStops(mover), []);
  // When the turn comes back, focus left on the square just played (out of the Tab order now)
  // goes to one that can be played: an outside probe needed up to 8 Tabs to find one. (Focus
  // is put on a square of the opponent's row, which the turn cannot make playable; counting
  // the Tab stops above moved it off the board, and the square just played may get stones.)
  await mover.evaluate(() => (document.querySelector(".row.top .square") as HTMLElement | null)?.focus());
  assert.ok(await mover.evaluate(() => document.activeElement?.closest(".row.top") !== null));
  await waiter.locator(".square.playable").first().click();
  await waiter.getByTestId("dir-right").click();
  for (const page of [mover, waiter]) await until("the reply shown", async () => (await movesOf(page)) === 2);
  await until("the mover's focus on a playable square", async () =>
    mover.evaluate(() => document.activeElement?.classList.contains("playable") ?? false),
  );
  await mover.getByTestId("resign").click();
  for (const page of [mover, waiter]) await page.getByTestId("game-over").waitFor();
});

test("bundle size and first render", async () => {
  const dist = join(root, "crates/oanquan-server/web-dist");
  let raw = 0;
  let gzipped = 0;
  const walk = (path: string): string[] =>
    readdirSync(path, { withFileTypes: true }).flatMap((entry) =>
      entry.isDirectory() ? walk(join(path, entry.name)) : [join(path, entry.name)],
    );
  for (const file of walk(dist)) {
    const data = readFileSync(file);
    raw += data.length;
    gzipped += gzipSync(data, { level: 9 }).length;
  }
  const times: number[] = [];
  for (let i = 0; i < 7; i++) {
    const context = await browser.newContext(DESKTOP);
    const page = await context.newPage();
    await page.goto(server.url);
    // The lobby's lists filled from the live stream: the page is usable.
    await page.locator("[data-testid=open-games][data-live] li").first().waitFor();
    times.push(await page.evaluate(() => performance.now()));
    await context.close();
  }
  times.sort((a, b) => a - b);
  Object.assign(bench, {
    bundle_bytes: raw,
    bundle_gzip_bytes: gzipped,
    first_render_ms_median: Math.round(times[3]),
    first_render_ms_max: Math.round(times[6]),
    chromium: browser.version(),
  });
  console.log("bench:", JSON.stringify(bench));
});

/** The API as a program (not a page) speaks it, through gRPC-Web. */
const gameApi = () => createClient(GameService, createGrpcWebTransport({ baseUrl: server.url, useBinaryFormat: true }));

test("time controls read exactly, whatever the API was given", () => {
  const realTime = (initial: number, increment: number): { timeControl: TimeControl } => ({
    timeControl: create(TimeControlSchema, {
      kind: { case: "realTime", value: { initial: durationFromMs(initial), increment: durationFromMs(increment) } },
    }),
  });
  const perMove = (ms: number): { timeControl: TimeControl } => ({
    timeControl: create(TimeControlSchema, { kind: { case: "correspondence", value: { perMove: durationFromMs(ms) } } }),
  });
  const cases: [{ timeControl?: TimeControl }, string][] = [
    [{}, "untimed"],
    [realTime(15_000, 0), "15s+0"],
    [realTime(60_000, 1_000), "1+1"],
    [realTime(300_000, 3_000), "5+3"],
    [realTime(67_000, 0), "1m7s+0"],
    [realTime(90_500, 2_500), "1m30.5s+2.5"],
    [realTime(10_800_000, 180_000), "180+180"],
    // A hair under a minute is not a minute.
    [{ timeControl: create(TimeControlSchema, { kind: { case: "realTime", value: { initial: { seconds: 59n, nanos: 999_900_000 } } } }) }, "59.999s+0"],
    [perMove(60_000), "1 min/move"],
    [perMove(600_000), "10 min/move"],
    [perMove(5_400_000), "1 h 30 min/move"],
    [perMove(86_400_000), "1 d/move"],
    [perMove(2 * 86_400_000), "2 d/move"],
    [perMove(30 * 86_400_000), "30 d/move"],
    [perMove(86_400_000 + 7_200_000 + 60_000), "1 d 2 h 1 min/move"],
    [perMove(90_000), "1 min 30 s/move"],
  ];
  for (const [game, label] of cases) assert.equal(timeControlText(game), label);
});

test("a game made through the API with an unusual clock shows it exactly in the lobby", async () => {
  const page = await player("Looker");
  const created = await gameApi().createGame({
    displayName: "Odd",
    timeControl: create(TimeControlSchema, {
      kind: { case: "realTime", value: { initial: durationFromMs(67_000), increment: durationFromMs(0) } },
    }),
  });
  const row = page.locator(`[data-testid=open-games] li[data-game="${created.game!.id}"]`);
  await row.waitFor();
  assert.match((await row.textContent()) ?? "", /· 1m7s\+0/);
  await gameApi().abortGame({ gameId: created.game!.id }, { headers: { authorization: `Bearer ${created.playerToken}` } });
});

test("a friend joins from a shared link to a game waiting for a second player", async () => {
  const host = await player("Host");
  const id = await createGame(host);
  await host.getByTestId("turn").getByText("Waiting for an opponent…").waitFor();
  // The creator's own page has nothing to join.
  assert.ok(await host.getByTestId("join-game").isHidden());

  const friend = await player("Friend", PHONE);
  await friend.goto(`${server.url}#/game/${id}`);
  await friend.getByTestId("join-game").waitFor({ state: "visible" });
  await friend.getByTestId("join-game").tap();
  // The page now plays the seat: the friend's name with "(you)" at the bottom, resign offered.
  await friend.getByTestId("bottom-player").getByText("Friend (you)").waitFor();
  await friend.getByTestId("resign").waitFor({ state: "visible" });
  assert.ok(await friend.getByTestId("join-game").isHidden());
  await host.getByTestId("top-player").getByText("Friend").waitFor();
  await whoseTurn([host, friend]);

  // A full game offers no seat to whoever opens its link.
  const late = await player("Late");
  await late.goto(`${server.url}#/game/${id}`);
  // The name comes after the page's own words, so that a player named "Your turn" cannot
  // read as the page telling the opponent it is theirs.
  await late.getByTestId("turn").filter({ hasText: /^Waiting for .+ to move$/ }).waitFor();
  assert.ok(await late.getByTestId("join-game").isHidden());
  await friend.getByTestId("resign").tap();
  for (const page of [host, friend]) await page.getByTestId("game-over").waitFor();
});

test("a game created while the lobby is open goes on top, newest first", async () => {
  const visitor = await player("Visitor");
  const older = await createGame(await player("Anh"));
  await visitor.locator(`[data-testid=open-games] li[data-game="${older}"]`).waitFor();
  const newer = await createGame(await player("Binh"));
  await visitor.locator(`[data-testid=open-games] li[data-game="${newer}"]`).waitFor();
  const order = await visitor.locator("[data-testid=open-games] li").evaluateAll((rows) => rows.map((row) => row.getAttribute("data-game")));
  assert.ok(order.indexOf(newer) < order.indexOf(older), order.join());
  assert.equal(order[0], newer);
});

test("a draw offer shows as made until it is declined or the opponent moves", async () => {
  const { mover, waiter } = await moverAndWaiter();
  const drawButton = (page: Page, text: string) =>
    until(`"${text}" on the draw button`, async () => (await page.getByTestId("draw").textContent()) === text);

  // The player to move offers: shown as made (and not offered twice), the opponent may accept.
  await mover.getByTestId("draw").click();
  await drawButton(mover, "Draw offered");
  assert.ok(await mover.getByTestId("draw").isDisabled());
  await drawButton(waiter, "Accept draw");
  // The offerer's own move leaves the offer standing (game.proto).
  await playOneMove(mover, 1, false);
  for (const page of [mover, waiter]) await until("the move shown", async () => (await movesOf(page)) === 1);
  assert.equal(await mover.getByTestId("draw").textContent(), "Draw offered");
  assert.equal(await waiter.getByTestId("draw").textContent(), "Accept draw");
  // The opponent is told in words, not only by a button; after a reload too (an outside
  // probe's reload left only the buttons).
  await waiter.locator("#status").getByText(/offers a draw$/).waitFor();
  await waiter.reload();
  await waiter.locator("#status").getByText(/offers a draw$/).waitFor();
  await drawButton(waiter, "Accept draw");
  // Declined: offerable again, and the offerer is told.
  await waiter.getByTestId("decline-draw").click();
  await until("the notice gone", async () => !/offers a draw/.test((await waiter.locator("#status").textContent()) ?? ""));
  await drawButton(mover, "Offer draw");
  assert.ok(await mover.getByTestId("draw").isEnabled());
  await mover.locator("#status").getByText("Your draw offer was declined").waitFor();

  // The other player offers; the offerer's opponent moves, and the offer lapses.
  await waiter.getByTestId("draw").click();
  await drawButton(waiter, "Draw offered");
  await drawButton(mover, "Accept draw");
  await playOneMove(waiter, 2, false);
  for (const page of [mover, waiter]) await until("the move shown", async () => (await movesOf(page)) === 2);
  assert.equal(await waiter.getByTestId("draw").textContent(), "Draw offered", "the offerer's own move keeps it");
  await playOneMove(mover, 3, false);
  await drawButton(waiter, "Offer draw");
  await drawButton(mover, "Offer draw");
  await mover.getByTestId("resign").click();
  for (const page of [mover, waiter]) await page.getByTestId("game-over").waitFor();
});

test("a profile link with a name no account can have shows no such player, without the text", async () => {
  const page = await player("Curious");
  const long = "x".repeat(5000);
  await page.goto(`${server.url}#/player/${long}`);
  await page.getByTestId("profile-name").getByText("No such player", { exact: true }).waitFor();
  assert.doesNotMatch((await page.locator("body").textContent()) ?? "", /xxxxxxxxxxxxxxxxxxxxx/);
  await page.goto(`${server.url}#/player/${encodeURIComponent("Call +1 555 now!")}`);
  await page.getByTestId("profile-name").getByText("No such player", { exact: true }).waitFor();
  assert.doesNotMatch((await page.locator("body").textContent()) ?? "", /555/);
  // A name that could be an account's but is none: the same, with nothing half-drawn.
  for (const name of ["nobody_here", "admin"]) {
    await page.goto(`${server.url}#/player/${name}`);
    await page.getByTestId("profile-name").getByText("No such player", { exact: true }).waitFor();
    assert.equal(await page.getByTestId("recent-games").count(), 0);
  }
  // The shortest usernames there are, two characters, have profiles.
  await register("Hà");
  await page.goto(`${server.url}#/player/${encodeURIComponent("Hà")}`);
  await page.getByTestId("ratings").getByText("no rated games yet").waitFor();
  assert.equal(await page.getByTestId("profile-name").textContent(), "Hà");
  // A game link that can name no game says so.
  await page.goto(`${server.url}#/game/${encodeURIComponent("<img src=x>")}`);
  await page.locator("#status").getByText("There is no such game").waitFor();
});

/** A 10+5 game of Lan, whose page counts a stream dead after `silence` ms (40 s in use), and
 * Minh: (Lan's page, Minh's page). */
async function quickWatchdogGame(silence: number): Promise<[Page, Page]> {
  const lan = await player("Lan", DESKTOP, "0", silence);
  const minh = await player("Minh");
  const id = await createGame(lan, "600000+5000");
  await joinGame(minh, id);
  return [lan, minh];
}

test("a right-to-left name is isolated from the text around it", async () => {
  // An outside probe's result line read "0 2 عمر, Victim 0": the name's digit and the score
  // ran together with the Arabic letters.
  const omar = await player("عمر 2");
  const victim = await player("Victim");
  const id = await createGame(omar);
  await joinGame(victim, id);
  await omar.getByTestId("resign").click();
  const over = victim.getByTestId("game-over");
  await over.waitFor();
  const text = (await over.textContent()) ?? "";
  assert.ok(text.includes("\u2068عمر 2\u2069 0"), JSON.stringify(text));
  // A name in one direction is left as it is.
  assert.ok(text.includes("Victim 0") && !text.includes("\u2068Victim"), JSON.stringify(text));
});

test("a move missed while the page was away sets its clock from the server's reading", async () => {
  // Minh moves while Lan's page hears nothing; the resumed stream replays the move with the
  // clocks as they were then, and Lan's page counted them down from when they arrived: it
  // showed Lan the whole outage as extra time (an outside probe's, by 50 s).
  const SILENCE = 1_500;
  const [lan, minh] = await quickWatchdogGame(SILENCE);
  // Both first moves start the clocks; then one more if need be, so that Minh is to move.
  for (let ply = 0; ply < 3; ply++) {
    const mover = await whoseTurn([lan, minh]);
    if (ply >= 2 && mover === minh) break;
    assert.ok(mover);
    const before = await movesOf(mover);
    await playOneMove(mover, ply, false);
    await until("the move", async () => (await movesOf(lan)) > before && (await movesOf(minh)) > before);
  }
  assert.equal(await whoseTurn([lan, minh]), minh);
  await lan.route("**/oanquan.v1.GameService/WatchGame", () => {});
  await lan.getByTestId("connection").getByText("reconnecting…").waitFor({ timeout: 3 * SILENCE + 2_000 });
  const moves = await movesOf(minh);
  await playOneMove(minh, 3, false);
  await until("Minh's move", async () => (await movesOf(minh)) > moves);
  // Lan's clock runs on the server from here; the page hears of it a while later.
  await new Promise((r) => setTimeout(r, 4_000));
  await lan.unrouteAll({ behavior: "ignoreErrors" });
  await until("the missed move", async () => (await movesOf(lan)) > moves, 10_000);
  await until("reconnected", async () => (await lan.getByTestId("connection").textContent()) === "");
  const seconds = (text: string | null) => {
    const [m, s] = (text ?? "").split(":").map(Number);
    return m * 60 + s;
  };
  // Lan's own clock on Lan's page, and as Minh's page (never away) shows it.
  await until(
    "Lan's clock as the server has it",
    async () =>
      Math.abs(
        seconds(await lan.getByTestId("bottom-clock").textContent()) -
          seconds(await minh.getByTestId("top-clock").textContent()),
      ) <= 1,
    3_000,
  );
  await lan.getByTestId("resign").click();
});

test("a move not sent for want of a network is no longer an error once the page is back", async () => {
  const lan = await player("Lan");
  const minh = await player("Minh");
  const id = await createGame(lan);
  await joinGame(minh, id);
  const mover = await whoseTurn([lan, minh]);
  assert.ok(mover);
  await mover.context().setOffline(true);
  await playOneMove(mover, 0, false);
  await mover.locator("#status").getByText(/^The move was not sent/).waitFor();
  await mover.context().setOffline(false);
  // An outside probe still saw the error 15 s later, beside "Your turn".
  await until("the error gone", async () => !/was not sent/.test((await mover.locator("#status").textContent()) ?? ""), 15_000);
  assert.equal(await mover.getByTestId("turn").textContent(), "Your turn");
  await playOneMove(mover, 0, false);
  await until("the move made", async () => (await movesOf(otherOf([lan, minh], mover))) === 1);
});

test("a draw offer not sent for want of a network is no longer an error once the page is back", async () => {
  const lan = await player("Lan");
  const minh = await player("Minh");
  const id = await createGame(lan);
  await joinGame(minh, id);
  await lan.getByTestId("draw").waitFor({ state: "visible" });
  await lan.context().setOffline(true);
  await lan.getByTestId("draw").click();
  await lan.locator("#status").getByText(/check your connection$/).waitFor();
  await lan.context().setOffline(false);
  // An outside probe still saw "No answer from the server" beside "Your turn" moves later.
  await until(
    "the error gone",
    async () => !/check your connection/.test((await lan.locator("#status").textContent()) ?? ""),
    15_000,
  );
  await lan.getByTestId("draw").click();
  await minh.locator("#status").getByText(/offers a draw$/).waitFor();
});

test("clicks on Create game while one is on its way make one game", async () => {
  const impatient = await player("Impatient");
  const lobby = await player("Onlooker");
  await impatient.getByTestId("create-game").click({ clickCount: 3 });
  const id = await gameIdOf(impatient);
  await lobby.locator(`[data-testid=open-games] li[data-game="${id}"]`).waitFor();
  // An outside probe's triple click left three games waiting.
  await new Promise((r) => setTimeout(r, 1_000));
  const waiting = await lobby.locator("[data-testid=open-games] li", { hasText: "Impatient" }).count();
  assert.equal(waiting, 1);
});

test("a game stream that goes silent is dropped and resumed after its last event", async () => {
  // Lan's page counts a stream dead after 1.5 s of silence (40 s in use); the server's
  // heartbeat comes every 15 s, so a held request stays silent long enough.
  const SILENCE = 1_500;
  const [lan, minh] = await quickWatchdogGame(SILENCE);
  // Lan to move: Minh plays first if the first move is his.
  if ((await whoseTurn([lan, minh])) === minh) {
    await playOneMove(minh, 1, false);
    await until("Lan's turn", async () => (await lan.getByTestId("turn").textContent()) === "Your turn");
  }
  const moves = await movesOf(lan);

  // The network stops forwarding: Lan's page's watches get no answer, not even an error.
  const watches: (bigint | undefined)[] = [];
  lan.on("request", (request) => {
    if (!request.url().endsWith("/WatchGame")) return;
    // gRPC-Web: a 5-byte frame header, then the request message.
    const body = request.postDataBuffer();
    if (body) watches.push(fromBinary(WatchGameRequestSchema, body.subarray(5)).afterSequence);
  });
  await lan.route("**/oanquan.v1.GameService/WatchGame", () => {});
  await lan.getByTestId("connection").getByText("reconnecting…").waitFor({ timeout: 3 * SILENCE + 2_000 });
  // Still Lan's turn, said as such; nothing playable while the move could not be sent.
  assert.equal(await lan.getByTestId("turn").textContent(), "Your turn");
  assert.equal(await lan.locator(".square.playable").count(), 0);
  // The clocks still count, marked as a guess: a server restart would give the time back.
  assert.equal(await lan.locator(".clock.stale").count(), 2);
  assert.equal(await lan.locator(".clock.stale").first().getAttribute("title"), "estimated: reconnecting to the server");
  // Meanwhile Minh offers a draw: an event Lan's page must get when it is back.
  await minh.getByTestId("draw").click();
  await until("a watch retried", async () => watches.length >= 2, 4 * SILENCE + 2_000);
  await lan.unrouteAll({ behavior: "ignoreErrors" });
  await until("reconnected", async () => (await lan.getByTestId("connection").textContent()) === "");
  await until("the missed offer shown", async () => (await lan.getByTestId("draw").textContent()) === "Accept draw");
  assert.equal(await lan.locator(".clock.stale").count(), 0);
  assert.equal(await movesOf(lan), moves);
  // Every retry resumed after the last event seen, none started over.
  assert.ok(watches.length >= 2 && watches.every((after) => after !== undefined && after > 0n), `watches: ${watches.join()}`);
  await lan.getByTestId("resign").click();
  for (const page of [lan, minh]) await page.getByTestId("game-over").waitFor();
});

test("a lobby stream that goes silent is dropped and resumed", async () => {
  const SILENCE = 1_500;
  const visitor = await player("Visitor", DESKTOP, "0", SILENCE);
  await visitor.locator("[data-testid=open-games][data-live]").waitFor();
  await visitor.route("**/oanquan.v1.GameService/WatchLobby", () => {});
  await visitor.locator("#status").getByText("Reconnecting to the lobby…").waitFor({ timeout: 3 * SILENCE + 2_000 });
  // A game created while the lobby is away appears once it is back.
  const created = await gameApi().createGame({ displayName: "Meanwhile" });
  await new Promise((r) => setTimeout(r, SILENCE));
  await visitor.unrouteAll({ behavior: "ignoreErrors" });
  await visitor.locator(`[data-testid=open-games] li[data-game="${created.game!.id}"]`).waitFor();
  await gameApi().abortGame({ gameId: created.game!.id }, { headers: { authorization: `Bearer ${created.playerToken}` } });
});

test("one's own game and the games being played stay listed when many newer games wait", async () => {
  // A server of its own: the flood would crowd every later test's lobby.
  const flood = await new Server(join(dir, "flood.db")).start();
  try {
    const api = createClient(GameService, createGrpcWebTransport({ baseUrl: flood.url, useBinaryFormat: true }));
    const standard = { kind: { case: "preset" as const, value: "standard" } };
    const gus = await player("Gus");
    await gus.goto(flood.url);
    await gus.getByTestId("open-games").waitFor();
    const own = await createGame(gus);
    const played = await api.createGame({ rules: standard, displayName: "Ann" });
    await api.joinGame({ gameId: played.game!.id, displayName: "Ben" });
    // More waiting games than a snapshot holds, all newer than both (an outside probe's 210).
    for (let i = 0; i < 205; i++) await api.createGame({ rules: standard, displayName: `flood${i}` });
    await gus.goto(flood.url);
    await gus.reload();
    await gus.getByTestId("open-cut").waitFor();
    await gus.locator(`[data-testid=open-games] li[data-game="${own}"] [data-testid=open]`).waitFor();
    await gus.locator(`[data-testid=active-games] li[data-game="${played.game!.id}"]`).waitFor();
    // A computer opponent is not sought: the page says where it is played instead.
    await gus.getByTestId("opponent").selectOption("2");
    assert.ok(await gus.getByTestId("seek").isDisabled());
    assert.match((await gus.getByTestId("seek-state").textContent()) ?? "", /to play the computer, Create game/);
    await gus.getByTestId("opponent").selectOption("");
    assert.ok(await gus.getByTestId("seek").isEnabled());
  } finally {
    await flood.stop();
  }
});

test("a screen reader hears the result, and a square picked before another tab moved is dropped", async () => {
  const { mover, waiter } = await moverAndWaiter("Ida", "Jon");
  // The same seat in a second tab of the mover's browser.
  const second = await mover.context().newPage();
  await second.goto(mover.url());
  await second.locator(".row.bottom .square.playable").first().waitFor();
  await second.locator(".row.bottom .square.playable").last().click();
  await second.getByTestId("dir-right").waitFor();
  // The first tab moves: the second's pick was made on the board before it.
  await mover.locator(".row.bottom .square.playable").first().click();
  await mover.getByTestId("dir-left").click();
  await until("the move shown in the second tab", async () => (await movesOf(second)) === 1);
  assert.ok(await second.getByTestId("dir-right").isHidden(), "no direction offered for the old pick");
  assert.equal(await second.locator("[aria-pressed=true]").count(), 0);
  // The result is said in words where the moves are.
  await waiter.getByTestId("resign").click();
  for (const page of [mover, second, waiter]) {
    await until("the result said", async () =>
      /^Game over: .* wins \(.* resigned\)/.test((await page.getByTestId("move-said").textContent()) ?? ""),
    );
  }
});

test("an aborted game says whether its player called it off or let the first move's time run out", async () => {
  // A server of its own, with a first-move limit short enough to miss.
  const quick = await new Server(join(dir, "quick.db"), "127.0.0.1:0", ["--first-move-time", "3s"]).start();
  try {
    const [a, b] = [await player("Ula"), await player("Vic")];
    for (const page of [a, b]) {
      await page.goto(quick.url);
      await page.getByTestId("open-games").waitFor();
    }
    // Called off: the player to move aborts before their first move.
    await joinGame(b, await createGame(a, "60000+1000"));
    let mover = await whoseTurn([a, b]);
    assert.ok(mover);
    await mover.getByTestId("abort").click();
    for (const page of [a, b]) {
      await until("the abort said", async () => / aborted the game$/.test((await page.getByTestId("game-over").textContent()) ?? ""));
    }
    // Missed: nobody moves within the limit.
    for (const page of [a, b]) {
      await page.goto(quick.url);
      await page.getByTestId("open-games").waitFor();
    }
    await joinGame(b, await createGame(a, "60000+1000"));
    mover = await whoseTurn([a, b]);
    assert.ok(mover);
    for (const page of [a, b]) {
      await until(
        "the missed first move said",
        async () => / did not make their first move in time$/.test((await page.getByTestId("game-over").textContent()) ?? ""),
        10_000,
      );
    }
  } finally {
    await quick.stop();
  }
});

test("a game whose stored data is damaged says so once, not reconnecting for ever", async () => {
  const path = join(dir, "damaged.db");
  let damaged = await new Server(path).start();
  const api = createClient(GameService, createGrpcWebTransport({ baseUrl: damaged.url, useBinaryFormat: true }));
  const made = await api.createGame({ rules: { kind: { case: "preset", value: "standard" } }, displayName: "Ann" });
  const id = made.game!.id;
  await damaged.stop();
  // One flipped byte in a key of the stored game (python3's sqlite3: the machine's own).
  const edit = spawnSync("python3", [
    "-c",
    "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(\"UPDATE games SET info=replace(info,'\\\"seats\\\"','\\\"seatz\\\"') WHERE id=?\", (sys.argv[2],)); c.commit()",
    path,
    id,
  ]);
  assert.equal(edit.status, 0, String(edit.stderr));
  damaged = await new Server(path).start();
  try {
    const page = await player("Wes");
    await page.goto(`${damaged.url}#/game/${id}`);
    await until("the damage said", async () => (await page.getByTestId("connection").textContent()) === "this game's stored data is damaged");
    assert.match((await page.locator("#status").textContent()) ?? "", /damaged/);
  } finally {
    await damaged.stop();
  }
});
