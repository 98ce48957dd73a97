// Online play against the real server: a timed game between two clients with the server's
// clocks, a flag falling on the server, and seek pairings.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { equals } from "@bufbuild/protobuf";
import { durationMs, timestampMs, type Duration } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";

import {
  EventFollower,
  bearer,
  clocksOf,
  connect,
  createGame,
  errorReason,
  formatTimeControl,
  joinGame,
  parseTimeControl,
  playOnline,
  seek,
  seededRandom,
  type OanQuan,
  type SeatPlayer,
} from "../src/client.js";
import { main as onlineMain } from "../src/online.js";
import {
  GameStatus,
  TimeControlSchema,
  type Clocks,
  type GameEvent_MovePlayed,
  type GameEvent_TurnStarted,
} from "../src/gen/oanquan/v1/game_pb.js";
import { EndReason, Player } from "../src/gen/oanquan/v1/rules_pb.js";
import { startServer, type RunningServer } from "./server.js";

// Seeks pair only with identical time controls: time controls used by no other test here (nor
// by the Python suite, which may run against the same server) keep a stray seek from pairing
// with these.
const SEEK_CONTROL = "8+3";
const ACCEPT_CONTROL = "8+4";

let server: RunningServer;
let api: OanQuan; // alice's client
let second: OanQuan; // bob's client: its own connection

before(async () => {
  server = await startServer();
  api = connect(server.address);
  second = connect(server.address);
});

after(async () => {
  await server?.stop();
});

const ms = (d: Duration | undefined) => (d ? durationMs(d) : NaN);
const left = (clocks: Clocks, player: Player) =>
  ms(player === Player.FIRST ? clocks.firstRemaining : clocks.secondRemaining);
const other = (player: Player) => (player === Player.FIRST ? Player.SECOND : Player.FIRST);

/** alice creates a timed game, a watcher follows it, bob joins from the second client. */
async function startTimedGame(control: string) {
  const played = await createGame(api, "alice", parseTimeControl(control));
  const watcher = new EventFollower(api, played.game.id).start();
  await watcher.waitUntil((w) => w.snapshots.length === 1);
  await joinGame(second, played, "bob");
  const players: SeatPlayer[] = [
    { api, seat: Player.FIRST, token: played.tokens.get(Player.FIRST)!, name: "alice" },
    { api: second, seat: Player.SECOND, token: played.tokens.get(Player.SECOND)!, name: "bob" },
  ];
  return { played, watcher, players };
}

test("time controls are written as players say them", () => {
  const control = parseTimeControl("3+2");
  assert.equal(control.kind.case, "realTime");
  if (control.kind.case === "realTime") {
    assert.deepEqual([ms(control.kind.value.initial), ms(control.kind.value.increment)], [180_000, 2_000]);
  }
  const shown: Record<string, string> = {
    "3+2": "3+2",
    "1s+0": "1s+0",
    "0.5+1": "30s+1",
    "2d": "2d per move",
    "90m": "90m per move",
    untimed: "untimed",
  };
  for (const [text, display] of Object.entries(shown)) assert.equal(formatTimeControl(parseTimeControl(text)), display);
  assert.throws(() => parseTimeControl("three minutes"), /expected e.g. 3\+2/);
});

test("a bad time control is refused naming the field", async () => {
  await assert.rejects(createGame(api, "alice", parseTimeControl("0s+0")), (error) => {
    const e = ConnectError.from(error);
    return e.code === Code.InvalidArgument && e.rawMessage.includes("time_control.real_time.initial");
  });
});

test("a timed game between two clients, with the server's clocks", async () => {
  const increment = 2_000;
  const { played, watcher, players } = await startTimedGame("3+2");

  // The time control comes back as asked, and a clock reading with both players' full time,
  // none running while the game waits.
  assert.equal(formatTimeControl(played.game.timeControl), "3+2");
  const waiting = watcher.snapshots[0]!.kind.case === "snapshot" ? watcher.snapshots[0]!.kind.value.game! : undefined;
  assert.equal(waiting?.status, GameStatus.WAITING_FOR_PLAYERS);
  assert.ok(waiting?.clocks);
  assert.deepEqual([left(waiting.clocks, Player.FIRST), left(waiting.clocks, Player.SECOND)], [180_000, 180_000]);
  assert.equal(waiting.clocks.running, Player.UNSPECIFIED);
  assert.equal(played.game.status, GameStatus.ACTIVE);
  assert.ok(played.game.clocks);

  const final = await playOnline(players, played.game, seededRandom(11));
  await watcher.done;
  assert.equal(final.status, GameStatus.FINISHED);
  assert.notEqual(final.result?.endReason, EndReason.TIMEOUT, "nobody should flag in a 3+2 played in ms");
  assert.ok(final.moveCount > 4, "game too short to check the clocks");

  // Every turn, move and the end carry clocks.
  for (const event of watcher.events) {
    const kind = event.kind.case;
    if (kind === "turnStarted" || kind === "movePlayed" || kind === "gameOver") {
      assert.ok(clocksOf(event), `event #${event.sequence} has no clocks`);
    }
  }
  const turns: GameEvent_TurnStarted[] = [];
  const moves: GameEvent_MovePlayed[] = [];
  for (const { kind } of watcher.events) {
    if (kind.case === "turnStarted") turns.push(kind.value);
    if (kind.case === "movePlayed") moves.push(kind.value);
  }
  assert.equal(moves.length, final.moveCount);
  assert.equal(turns.length, moves.length); // a turn before every move; none after the last

  // Each player's first move has its own limit and no clock runs: no running clock but a deadline.
  for (const turn of turns.slice(0, 2)) {
    assert.equal(turn.clocks!.running, Player.UNSPECIFIED);
    assert.ok(turn.clocks!.deadline);
  }
  // From then on the mover's clock runs, and only theirs.
  moves.forEach((move, i) => {
    const number = i + 1;
    const turn = turns[i]!;
    const mover = move.record!.player;
    assert.equal(turn.player, mover);
    if (number <= 2) return;
    assert.equal(turn.clocks!.running, mover, `move ${number}`);
    // The mover was charged the time from the turn's start to the move's acceptance, then got
    // the increment: charged >= 0, and at most the time between the two readings (plus a
    // little for when the turn's reading was made).
    const charged = left(turn.clocks!, mover) + increment - left(move.clocks!, mover);
    const between = timestampMs(move.clocks!.measuredAt!) - timestampMs(turn.clocks!.measuredAt!);
    assert.ok(charged >= 0 && charged <= between + 50, `move ${number}: charged ${charged} ms, ${between} ms between`);
    // The opponent's time does not move during the mover's turn.
    assert.equal(left(move.clocks!, other(mover)), left(turn.clocks!, other(mover)), `move ${number}`);
  });

  // The end: clocks still there, none running.
  const over = watcher.gameOver!;
  assert.ok(over.clocks);
  assert.equal(over.clocks.running, Player.UNSPECIFIED);
  assert.equal(over.result?.endReason, final.result?.endReason);
  const { game } = await api.games.getGame({ gameId: final.id });
  assert.ok(game?.clocks);
  assert.equal(game.clocks.deadline, undefined);
});

test("the flag falls on the server without anyone calling", async () => {
  // 1 second each, no increment: after both first moves (which have their own limit) FIRST's
  // clock runs, nobody moves, and the server ends the game on time by itself.
  const { played, watcher, players } = await startTimedGame("1s+0");
  const game = await playOnline(players, played.game, seededRandom(3), 2);
  assert.equal(game.status, GameStatus.ACTIVE);
  assert.equal(game.position?.toMove, Player.FIRST);
  assert.equal(game.clocks?.running, Player.FIRST);

  await watcher.waitUntil((w) => w.gameOver !== undefined, 5_000);
  await watcher.done;
  const over = watcher.gameOver!;
  assert.equal(over.result?.endReason, EndReason.TIMEOUT);
  assert.equal(over.result?.winner, Player.SECOND);
  assert.deepEqual([left(over.clocks!, Player.FIRST), left(over.clocks!, Player.SECOND)], [0, 1_000]);
  // It fell on time: a second after FIRST's turn started, not much later.
  const turn = [...watcher.events].reverse().find((e) => e.kind.case === "turnStarted");
  assert.ok(turn?.kind.case === "turnStarted" && turn.kind.value.clocks?.running === Player.FIRST);
  const late = timestampMs(watcher.events.at(-1)!.time!) - timestampMs(turn.kind.value.clocks.deadline!);
  assert.ok(late >= 0 && late < 500, `the flag fell ${late} ms after the deadline`);

  // A move now is refused: the game is over.
  await assert.rejects(playOnline(players, game, seededRandom(3), 1), (error) =>
    ["ERROR_REASON_GAME_OVER", "ERROR_REASON_TIME_UP"].includes(errorReason(error) ?? ""),
  );
});

test("two seekers are paired in one game", async () => {
  const control = parseTimeControl(SEEK_CONTROL);
  const alice = seek(api, "alice", control);
  let bob;
  let alicePaired, bobPaired, waiting;
  try {
    waiting = await alice.waitWaiting();
    assert.ok(waiting.id);
    assert.equal(waiting.displayName, "alice");
    assert.equal(waiting.preset, "standard");
    assert.ok(waiting.timeControl && equals(TimeControlSchema, waiting.timeControl, control));
    assert.ok((await second.games.listSeeks({})).seeks.some((s) => s.id === waiting!.id));

    // bob's seek, while alice's stream is open, pairs at once: his first message is `paired`.
    bob = seek(second, "bob", control);
    bobPaired = await bob.waitPaired();
    alicePaired = await alice.waitPaired();
    await Promise.all([alice.ended, bob.ended]); // both streams end with OK after `paired`
  } finally {
    await alice.cancel();
  }
  assert.deepEqual(
    bob!.messages.map((m) => m.kind.case),
    ["paired"],
  );
  assert.deepEqual(
    alice.messages.map((m) => m.kind.case).filter((k) => k !== "heartbeat"),
    ["waiting", "paired"],
  );

  // One game, two seats, two tokens.
  assert.equal(alicePaired.game?.id, bobPaired.game?.id);
  assert.deepEqual(new Set([alicePaired.seat, bobPaired.seat]), new Set([Player.FIRST, Player.SECOND]));
  assert.ok(alicePaired.playerToken && bobPaired.playerToken);
  assert.notEqual(alicePaired.playerToken, bobPaired.playerToken);
  let game = bobPaired.game!;
  assert.equal(game.status, GameStatus.ACTIVE);
  assert.ok(game.timeControl && equals(TimeControlSchema, game.timeControl, control));
  assert.ok(game.clocks);
  const seatName = (seat: Player) => (seat === Player.FIRST ? game.firstSeat : game.secondSeat)?.displayName;
  assert.equal(seatName(alicePaired.seat), "alice");
  assert.equal(seatName(bobPaired.seat), "bob");
  // The seek is gone.
  assert.ok(!(await api.games.listSeeks({})).seeks.some((s) => s.id === waiting.id));

  // Each plays with the token their own stream gave them.
  const players: SeatPlayer[] = [
    { api, seat: alicePaired.seat, token: alicePaired.playerToken, name: "alice" },
    { api: second, seat: bobPaired.seat, token: bobPaired.playerToken, name: "bob" },
  ];
  game = await playOnline(players, game, seededRandom(5), 4);
  assert.equal(game.moveCount, 4);
  const mover = players.find((p) => p.seat === game.position!.toMove)!;
  const resigned = (await api.games.resign({ gameId: game.id }, bearer(mover.token))).game!;
  assert.equal(resigned.status, GameStatus.FINISHED);
  assert.equal(resigned.result?.winner, other(mover.seat));
});

test("a seek is accepted by id, and withdrawn by cancelling", async () => {
  const control = parseTimeControl(ACCEPT_CONTROL);
  const alice = seek(api, "alice", control);
  let accepted, alicePaired, seekId: string;
  try {
    const waiting = await alice.waitWaiting();
    // bob picks alice's seek from the list and accepts it.
    const { seeks } = await second.games.listSeeks({});
    seekId = seeks.find((s) => s.id === waiting.id)!.id;
    accepted = await second.games.acceptSeek({ seekId, displayName: "bob" });
    alicePaired = await alice.waitPaired();
  } finally {
    await alice.cancel();
  }
  assert.equal(accepted.game?.id, alicePaired.game?.id);
  assert.deepEqual(new Set([accepted.seat, alicePaired.seat]), new Set([Player.FIRST, Player.SECOND]));

  // A taken seek is gone: accepting it again is NOT_FOUND.
  await assert.rejects(second.games.acceptSeek({ seekId, displayName: "carl" }), (error) => {
    return ConnectError.from(error).code === Code.NotFound && errorReason(error) === "ERROR_REASON_SEEK_NOT_FOUND";
  });

  // Cancelling a waiting seek's stream withdraws it.
  const again = seek(api, "alice", control);
  const withdrawn = (await again.waitWaiting()).id;
  await again.cancel();
  const deadline = performance.now() + 2_000;
  while ((await api.games.listSeeks({})).seeks.some((s) => s.id === withdrawn)) {
    assert.ok(performance.now() < deadline, "a cancelled seek is still listed after 2 s");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }

  // Leave nothing running: the game ends.
  await second.games.abortGame({ gameId: accepted.game!.id }, bearer(accepted.playerToken));
});

for (const scenario of ["timed", "seek"]) {
  test(`the online example plays the ${scenario} scenario`, async () => {
    const code = await onlineMain([scenario, "--server", server.address, "--time", "6+3", "--quiet"]);
    assert.equal(code, 0);
  });
}
