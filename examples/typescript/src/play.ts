// Plays one Ô Ăn Quan game against itself on a running server while watching its events.
//
//   npm run generate                          # once, and after every change to proto/
//   npm run play -- --server 127.0.0.1:50051
//
// It creates a game (seat FIRST), starts watching it, joins it (seat SECOND), then plays
// random legal moves for both seats (asking RulesService.LegalMoves each turn). After
// --drop-after moves it drops the event stream, plays on while disconnected, and resumes
// the stream with afterSequence = the last sequence seen; the watcher checks that no event
// is missing or repeated and that GameOver arrives. Exits non-zero on any failure.

import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

import { GameEvent_DrawAction, GameEvent_RematchAction, type GameEvent, type MoveRecord } from "./gen/oanquan/v1/game_pb.js";
import { Direction, EndReason, Outcome, Player } from "./gen/oanquan/v1/rules_pb.js";
import { EventFollower, connect, createGame, joinGame, playSelfGame } from "./client.js";

export function describe(event: GameEvent): string {
  const kind = event.kind;
  switch (kind.case) {
    case "snapshot":
      return `snapshot: ${kind.value.moveCount} moves`;
    case "playerJoined":
      return `${kind.value.displayName} sits as ${Player[kind.value.seat]}`;
    case "gameStarted":
      return "game started";
    case "turnStarted":
      return `${Player[kind.value.player]} to move (ply ${kind.value.ply})`;
    case "movePlayed": {
      const r = kind.value.record!;
      const scores = r.position!.scores!;
      return `move ${r.number}: ${Player[r.player]} square ${r.move!.square} ${Direction[r.move!.direction]} -> scores ${scores.first}:${scores.second}`;
    }
    case "gameOver": {
      const r = kind.value.result!;
      return `game over: ${Outcome[r.outcome]} by ${EndReason[r.endReason]}, ${r.scores!.first}:${r.scores!.second}`;
    }
    case "draw":
      return `draw ${GameEvent_DrawAction[kind.value.action].toLowerCase()} by ${Player[kind.value.by]}`;
    case "rematch":
      return (
        `rematch ${GameEvent_RematchAction[kind.value.action].toLowerCase()}` +
        (kind.value.gameId ? `: game ${kind.value.gameId}` : "")
      );
    default:
      return kind.case ?? "?";
  }
}

export async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      server: { type: "string", default: "127.0.0.1:50051" },
      seed: { type: "string", default: "7" },
      "drop-after": { type: "string", default: "4" },
      "offline-moves": { type: "string", default: "3" },
      quiet: { type: "boolean", default: false },
    },
  });
  const dropAfter = Number(values["drop-after"]);
  const resumeAt = dropAfter + Number(values["offline-moves"]);
  const api = connect(values.server!);

  const played = await createGame(api, "alice");
  console.log(`created game ${played.game.id}`);
  const watcher = new EventFollower(api, played.game.id, (event) => {
    if (!values.quiet && event.kind.case !== "heartbeat") {
      console.log(`  [watch #${event.sequence}] ${describe(event)}`);
    }
  }).start();
  await watcher.waitUntil((w) => w.lastSequence >= 1n); // the Snapshot arrived
  await joinGame(api, played, "bob");

  const final = await playSelfGame(api, played, Number(values.seed), async (record) => {
    if (record.number === dropAfter) {
      // Wait until the watcher saw this move, then cut the stream.
      await watcher.waitUntil((w) =>
        w.events.some((e) => e.kind.case === "movePlayed" && e.kind.value.record?.number === record.number),
      );
      console.log("-- dropping the watch stream (as a network failure would)");
      watcher.drop();
    } else if (record.number === resumeAt) {
      console.log(`-- resuming watch with afterSequence=${watcher.lastSequence}`);
      watcher.resume();
    }
  });
  watcher.resume(); // in case the game ended while dropped
  await watcher.done;

  // ListMoves answers in pages when a history is larger than one response (`more`).
  const moves: MoveRecord[] = [];
  for (;;) {
    const page = await api.games.listMoves({ gameId: final.id, afterMove: moves.at(-1)?.number ?? 0 });
    moves.push(...page.moves);
    if (!page.more || page.moves.length === 0) break;
  }
  const streamed = watcher.events.filter((e) => e.kind.case === "movePlayed");
  const problems: string[] = [];
  if (!watcher.gameOver) problems.push("no GameOver received");
  else if (watcher.gameOver.result?.outcome !== final.result?.outcome) problems.push("GameOver differs from the game");
  if (streamed.length !== moves.length) {
    problems.push(`streamed ${streamed.length} moves, ListMoves has ${moves.length}`);
  }
  if (watcher.connections.length < 2) problems.push("the watch was never resumed");
  const result = final.result!;
  console.log(
    `${final.moveCount} moves, ${watcher.events.length} events over ${watcher.connections.length} connections ` +
      `(resumed with afterSequence ${watcher.connections.slice(1).join(", ")}), ` +
      `result ${Outcome[result.outcome]} ${result.scores!.first}:${result.scores!.second}`,
  );
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
