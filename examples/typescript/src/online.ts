// Online play on a running server: a timed game between two clients, and a seek pairing.
//
//   npm run generate                                              # once, and after proto/ changes
//   npm run online -- timed --server 127.0.0.1:50051 --time 3+2
//   npm run online -- seek --server 127.0.0.1:50051 --time 3+2 --moves 6
//
// `timed`: alice creates a game with the time control and watches it; bob joins from a second
// client (his own connection and token). They play random legal moves to the end, each
// through their own client, and the watcher prints the server's clocks from every
// TurnStarted, MovePlayed and GameOver event.
//
// `seek`: alice and bob each ask for an opponent with the same time control
// (GameService.Seek) from their own clients, at the same time. alice's seek waits (it shows
// in ListSeeks); bob's pairs with it at once; both streams end with `paired` naming the same
// game, in different seats, each with its own token. They play --moves moves, then the
// player to move resigns.
//
// Exits non-zero if anything the server sends breaks the contract checked here.

import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

import { GameStatus, type GameEvent } from "./gen/oanquan/v1/game_pb.js";
import { EndReason, Outcome, Player } from "./gen/oanquan/v1/rules_pb.js";
import {
  EventFollower,
  bearer,
  clocksOf,
  connect,
  createGame,
  formatClocks,
  formatTimeControl,
  joinGame,
  parseTimeControl,
  playOnline,
  seek,
  seededRandom,
  type SeatPlayer,
} from "./client.js";
import { describe } from "./play.js";

/** Plays one timed game between two clients; returns the problems found. */
export async function timedGame(server: string, timeControl: string, seed: number, quiet: boolean): Promise<string[]> {
  const problems: string[] = [];
  const alice = connect(server);
  const bob = connect(server); // a second client: its own HTTP/2 connection

  const played = await createGame(alice, "alice", parseTimeControl(timeControl));
  const game = played.game;
  console.log(`created game ${game.id} (${formatTimeControl(game.timeControl)})`);
  if (game.clocks === undefined) problems.push("CreateGame's game of a timed game has no clocks");
  else console.log(`  clocks: ${formatClocks(game.clocks)}`);

  const watcher = new EventFollower(alice, game.id, (event: GameEvent) => {
    const clocks = clocksOf(event);
    const kind = event.kind.case;
    if ((kind === "turnStarted" || kind === "movePlayed" || kind === "gameOver") && clocks === undefined) {
      problems.push(`event #${event.sequence} (${kind}) of a timed game has no clocks`);
    }
    if (!quiet && kind !== "heartbeat") {
      console.log(`  [watch #${event.sequence}] ${describe(event)}${clocks ? `   [${formatClocks(clocks)}]` : ""}`);
    }
  }).start();
  await watcher.waitUntil((w) => w.lastSequence >= 1n); // the Snapshot arrived
  await joinGame(bob, played, "bob");
  const players: SeatPlayer[] = [
    { api: alice, seat: Player.FIRST, token: played.tokens.get(Player.FIRST)!, name: "alice" },
    { api: bob, seat: Player.SECOND, token: played.tokens.get(Player.SECOND)!, name: "bob" },
  ];
  const final = await playOnline(players, played.game, seededRandom(seed));
  await watcher.done;

  const over = watcher.gameOver;
  if (over?.clocks === undefined) problems.push("GameOver without clocks");
  const result = final.result!;
  console.log(
    `${final.moveCount} moves, result ${Outcome[result.outcome]} by ${EndReason[result.endReason]} ` +
      `${result.scores!.first}:${result.scores!.second}` +
      (over?.clocks ? `, final clocks ${formatClocks(over.clocks)}` : ""),
  );
  return problems;
}

/** Pairs two seekers and plays a few moves; returns the problems found. */
export async function seekPairing(
  server: string,
  timeControl: string,
  moves: number,
  seed: number,
  quiet: boolean,
): Promise<string[]> {
  const problems: string[] = [];
  const control = parseTimeControl(timeControl);
  const alice = connect(server);
  const bob = connect(server);

  const aliceSeek = seek(alice, "alice", control);
  let alicePaired, bobPaired;
  try {
    const waiting = await aliceSeek.waitWaiting();
    console.log(`alice seeks ${formatTimeControl(waiting.timeControl)}: seek ${waiting.id} waiting`);
    const { seeks } = await bob.games.listSeeks({});
    if (!seeks.some((s) => s.id === waiting.id)) problems.push(`ListSeeks does not show the waiting seek ${waiting.id}`);
    const bobSeek = seek(bob, "bob", control);
    bobPaired = await bobSeek.waitPaired();
    alicePaired = await aliceSeek.waitPaired();
    await Promise.all([aliceSeek.ended, bobSeek.ended]);
  } finally {
    await aliceSeek.cancel(); // a no-op once paired; withdraws the seek if something failed
  }
  for (const [name, paired] of [["alice", alicePaired], ["bob", bobPaired]] as const) {
    console.log(`${name}: paired in game ${paired.game!.id} as ${Player[paired.seat]}`);
  }
  if (alicePaired.game!.id !== bobPaired.game!.id) {
    problems.push(`paired in different games: ${alicePaired.game!.id} and ${bobPaired.game!.id}`);
  }
  const seats = [alicePaired.seat, bobPaired.seat];
  if (!(seats.includes(Player.FIRST) && seats.includes(Player.SECOND))) {
    problems.push(`seats ${Player[alicePaired.seat]} and ${Player[bobPaired.seat]} are not FIRST and SECOND`);
  }
  let game = bobPaired.game!;
  if (game.status !== GameStatus.ACTIVE) problems.push(`the paired game is ${GameStatus[game.status]}, not active`);
  if (problems.length > 0) return problems;

  const players: SeatPlayer[] = [
    { api: alice, seat: alicePaired.seat, token: alicePaired.playerToken, name: "alice" },
    { api: bob, seat: bobPaired.seat, token: bobPaired.playerToken, name: "bob" },
  ];
  const names = new Map(players.map((p) => [p.seat, p.name]));
  game = await playOnline(players, game, seededRandom(seed), moves, (record, after) => {
    if (!quiet) {
      const clocks = after.clocks ? `   [${formatClocks(after.clocks)}]` : "";
      console.log(`  move ${record.number}: ${names.get(record.player)} square ${record.move!.square}${clocks}`);
    }
  });
  if (game.status === GameStatus.ACTIVE) {
    // Leave nothing running on the server: the player to move resigns.
    const mover = players.find((p) => p.seat === game.position!.toMove)!;
    game = (await mover.api.games.resign({ gameId: game.id }, bearer(mover.token))).game!;
    console.log(`${mover.name} resigns after ${game.moveCount} moves`);
  }
  console.log(
    `game ${game.id}: ${GameStatus[game.status]}, result ${Outcome[game.result!.outcome]} by ` +
      `${EndReason[game.result!.endReason]}`,
  );
  return problems;
}

export async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      server: { type: "string", default: "127.0.0.1:50051" },
      time: { type: "string", default: "3+2" },
      moves: { type: "string", default: "6" },
      seed: { type: "string", default: "7" },
      quiet: { type: "boolean", default: false },
    },
  });
  const scenario = positionals[0];
  if (positionals.length !== 1 || (scenario !== "timed" && scenario !== "seek")) {
    console.error("usage: online.ts timed|seek [--server host:port] [--time 3+2] [--moves N] [--seed N] [--quiet]");
    return 2;
  }
  try {
    parseTimeControl(values.time!);
  } catch (error) {
    console.error((error as Error).message);
    return 2;
  }
  const seed = Number(values.seed);
  const problems =
    scenario === "timed"
      ? await timedGame(values.server!, values.time!, seed, values.quiet!)
      : await seekPairing(values.server!, values.time!, Number(values.moves), seed, values.quiet!);
  for (const problem of problems) console.error(`FAIL: ${problem}`);
  return problems.length === 0 ? 0 : 1;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (error) => {
      console.error(error);
      process.exit(1);
    },
  );
}
