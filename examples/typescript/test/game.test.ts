// The TypeScript example against the real server: plays full games and follows their events.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { equals, toJsonString } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";

import {
  EventFollower,
  bearer,
  connect,
  createGame,
  errorReason,
  joinGame,
  playMove,
  playSelfGame,
  seededRandom,
  type OanQuan,
} from "../src/client.js";
import { main as playMain } from "../src/play.js";
import { GameStatus, type GameEvent, type LobbyEvent } from "../src/gen/oanquan/v1/game_pb.js";
import {
  Direction,
  EndReason,
  Player,
  PositionSchema,
  StepSchema,
  type Position,
} from "../src/gen/oanquan/v1/rules_pb.js";
import { startServer, type RunningServer } from "./server.js";

let server: RunningServer;
let api: OanQuan;

before(async () => {
  server = await startServer();
  api = connect(server.address);
});

after(async () => {
  await server?.stop();
});

const moveNumbers = (events: GameEvent[]) =>
  events.flatMap((e) => (e.kind.case === "movePlayed" ? [e.kind.value.record!.number] : []));

test("RulesService lists presets and legal moves", async () => {
  const { presets } = await api.rules.listPresets({});
  assert.equal(presets[0]?.name, "standard");
  const { moves, over } = await api.rules.legalMoves({});
  assert.equal(over, false);
  // From the start position FIRST may sow any of squares 1..5 either way.
  assert.equal(moves.length, 10);
  assert.deepEqual(new Set(moves.map((m) => m.square)), new Set([1, 2, 3, 4, 5]));
});

test("a full game, watched with a dropped and resumed stream", async () => {
  const played = await createGame(api, "alice");
  assert.equal(played.game.status, GameStatus.WAITING_FOR_PLAYERS);

  const watcher = new EventFollower(api, played.game.id).start();
  await watcher.waitUntil((w) => w.snapshots.length === 1);
  await joinGame(api, played, "bob");
  assert.equal(played.game.status, GameStatus.ACTIVE);

  const dropAfter = 4;
  const offlineMoves = 3;
  const final = await playSelfGame(api, played, 11, async (record) => {
    if (record.number === dropAfter) {
      await watcher.waitUntil((w) => moveNumbers(w.events).includes(dropAfter));
      watcher.drop();
    } else if (record.number === dropAfter + offlineMoves) {
      watcher.resume();
    }
  });
  watcher.resume();
  await watcher.done;

  assert.equal(final.status, GameStatus.FINISHED);
  assert.ok(final.moveCount > dropAfter + offlineMoves, "game too short to test the resume");

  // One snapshot (first connection), then real events numbered without gaps or repeats
  // (EventFollower throws GapError otherwise; check again here).
  assert.equal(watcher.snapshots.length, 1);
  const snapshot = watcher.snapshots[0]!;
  assert.equal(snapshot.kind.case === "snapshot" && snapshot.kind.value.game?.status, GameStatus.WAITING_FOR_PLAYERS);
  watcher.events.forEach((e, i) => assert.equal(e.sequence, snapshot.sequence + 1n + BigInt(i)));

  // The second connection resumed right after the last event seen, and replayed the moves
  // played while it was away.
  assert.equal(watcher.disconnectedAt.length, 1);
  const droppedAt = watcher.disconnectedAt[0]!;
  assert.deepEqual(watcher.connections, [0n, droppedAt]);
  assert.equal(watcher.firstSequencePerConnection[1], droppedAt + 1n);
  const missed = watcher.events.filter((e) => e.sequence > droppedAt);
  assert.deepEqual(moveNumbers(missed).slice(0, offlineMoves), [5, 6, 7]);

  // The event sequence follows the contract: joins, start, turn/move pairs, GameOver last.
  const kinds = watcher.events.map((e) => e.kind.case);
  assert.deepEqual(kinds.slice(0, 3), ["playerJoined", "gameStarted", "turnStarted"]);
  assert.equal(kinds.at(-1), "gameOver");
  assert.equal(kinds.filter((k) => k === "movePlayed").length, final.moveCount);
  assert.equal(watcher.gameOver?.result?.outcome, final.result?.outcome);
  assert.deepEqual(watcher.gameOver?.result?.scores, final.result?.scores);

  // The streamed moves are exactly the game's moves.
  const listed = await api.games.listMoves({ gameId: final.id });
  const key = (r: { number: number; move?: { square?: number; direction: Direction } }) =>
    `${r.number}:${r.move?.square}:${r.move?.direction}`;
  const streamed = watcher.events.flatMap((e) => (e.kind.case === "movePlayed" ? [e.kind.value.record!] : []));
  assert.deepEqual(streamed.map(key), listed.moves.map(key));
  assert.deepEqual(played.moves.map(key), listed.moves.map(key));
});

test("watching a finished game replays and closes", async () => {
  const played = await createGame(api, "carol");
  await joinGame(api, played, "dave");
  const final = await playSelfGame(api, played, 3);

  // From scratch: a Snapshot of the finished game, then the stream ends with OK.
  const fresh = new EventFollower(api, final.id).start();
  await fresh.done;
  assert.equal(fresh.snapshots.length, 1);
  assert.equal(fresh.events.length, 0);
  assert.equal(fresh.gameOver?.result?.outcome, final.result?.outcome);

  // Resuming from the middle replays exactly the rest, ending with GameOver.
  const middle = fresh.lastSequence / 2n;
  const resumed = new EventFollower(api, final.id);
  resumed.lastSequence = middle;
  await resumed.start().done;
  assert.equal(resumed.snapshots.length, 0);
  resumed.events.forEach((e, i) => assert.equal(e.sequence, middle + 1n + BigInt(i)));
  assert.equal(resumed.lastSequence, fresh.lastSequence);
  assert.equal(resumed.events.at(-1)?.kind.case, "gameOver");

  // Nothing exists beyond the last event.
  await assert.rejects(
    async () => {
      for await (const _ of api.games.watchGame({ gameId: final.id, afterSequence: fresh.lastSequence + 1n })) {
        // unreachable
      }
    },
    (error) => ConnectError.from(error).code === Code.OutOfRange,
  );
});

test("errors carry machine-readable reasons", async () => {
  const played = await createGame(api, "erin");
  const gameId = played.game.id;
  const firstToken = played.tokens.get(Player.FIRST)!;
  const move = { square: 1, direction: Direction.RIGHT };

  const failure = async (token: string | undefined, overrides: { gameId?: string; expectedPly?: number } = {}) => {
    try {
      await api.games.playMove({ gameId, move, ...overrides }, token ? bearer(token) : {});
    } catch (error) {
      return [ConnectError.from(error).code, errorReason(error)];
    }
    assert.fail("PlayMove should have failed");
  };

  assert.deepEqual(await failure(firstToken), [Code.FailedPrecondition, "ERROR_REASON_GAME_NOT_STARTED"]);
  await joinGame(api, played, "frank");
  const secondToken = played.tokens.get(Player.SECOND)!;
  assert.deepEqual(await failure(secondToken), [Code.FailedPrecondition, "ERROR_REASON_NOT_YOUR_TURN"]);
  assert.deepEqual(await failure(undefined), [Code.Unauthenticated, "ERROR_REASON_MISSING_TOKEN"]);
  assert.deepEqual(await failure("not-a-token"), [Code.PermissionDenied, "ERROR_REASON_WRONG_TOKEN"]);
  assert.deepEqual(await failure(firstToken, { gameId: "no-such-game" }), [
    Code.NotFound,
    "ERROR_REASON_GAME_NOT_FOUND",
  ]);
  assert.deepEqual(await failure(firstToken, { expectedPly: 5 }), [
    Code.FailedPrecondition,
    "ERROR_REASON_STALE_PLY",
  ]);

  // Resigning ends the game for everyone.
  await playMove(api, played, seededRandom(1));
  const { game } = await api.games.resign({ gameId }, bearer(secondToken));
  assert.equal(game?.status, GameStatus.FINISHED);
  assert.equal(game?.result?.endReason, EndReason.RESIGNATION);
  assert.equal(game?.result?.winner, Player.FIRST);
});

test("ApplyMove replays a served game", async () => {
  // RulesService.ApplyMove, fed the game's own moves, reproduces every recorded position and
  // trace: a bot can simulate with the server's rules instead of its own.
  const played = await createGame(api, "gina");
  await joinGame(api, played, "hal");
  const final = await playSelfGame(api, played, 5);
  const listed = await api.games.listMoves({ gameId: final.id });
  const rules = { kind: { case: "ruleSet" as const, value: final.ruleSet! } };
  assert.ok(final.moveCount > 0);
  assert.equal(listed.moves.length, final.moveCount);
  let position: Position = listed.startPosition!;
  for (const record of listed.moves) {
    const applied = await api.rules.applyMove({ rules, position, move: record.move });
    const json = (p?: Position) => (p ? toJsonString(PositionSchema, p) : "none");
    assert.ok(
      equals(PositionSchema, applied.position!, record.position!),
      `move ${record.number}: ApplyMove gave ${json(applied.position)}, the game recorded ${json(record.position)}`,
    );
    assert.equal(applied.steps.length, record.steps.length, `move ${record.number}: trace length`);
    applied.steps.forEach((step, i) =>
      assert.ok(equals(StepSchema, step, record.steps[i]!), `move ${record.number}: step ${i} differs`),
    );
    position = applied.position!;
  }
  // After the last move the game is over: no legal moves remain.
  const { moves } = await api.rules.legalMoves({ rules, position });
  assert.deepEqual(moves, []);
});

/**
 * Call options for a stream the caller leaves early, and the hang-up. Leaving a `for await`
 * loop does not end a Connect stream: it stays open, and a `timeoutMs` timer keeps the process
 * alive, until its deadline. Abort it instead; the unref'd AbortSignal.timeout bounds it.
 */
function leavable(ms: number) {
  const abort = new AbortController();
  return {
    options: { signal: AbortSignal.any([abort.signal, AbortSignal.timeout(ms)]), timeoutMs: 0 },
    hangUp: () => abort.abort(),
  };
}

test("WatchLobby resumes after its last sequence", async () => {
  // The first message of a fresh lobby watch is a Snapshot; then hang up.
  let first: LobbyEvent | undefined;
  const fresh = leavable(30_000);
  for await (const { event } of api.games.watchLobby({}, fresh.options)) {
    first = event;
    break;
  }
  fresh.hangUp();
  assert.equal(first?.kind.case, "snapshot");

  const played = await createGame(api, "ivy");
  await joinGame(api, played, "jon");

  // Resuming right after the snapshot's sequence: every later lobby event, numbered without a
  // gap, and among them this game's creation, seat and start, in that order.
  let last = first!.sequence;
  const ours: string[] = [];
  const resumed = leavable(30_000);
  for await (const { event } of api.games.watchLobby({ afterSequence: last }, resumed.options)) {
    const kind = event!.kind;
    // Heartbeats and seek updates (seeks are presence, not history) repeat the last real
    // sequence: not counted. A resumed stream starts with a seekList.
    switch (kind.case) {
      case "heartbeat":
      case "seekAdded":
      case "seekRemoved":
      case "seekList":
        continue;
    }
    // A Snapshot here would mean the server no longer had the events after `last`.
    assert.ok(kind.case !== undefined && kind.case !== "snapshot", `resume gave ${kind.case}, not events`);
    assert.equal(event!.sequence, last + 1n, `a gap or a repeat in the lobby stream after ${last}`);
    last = event!.sequence;
    const gameId = kind.case === "gameCreated" ? kind.value.game?.id : kind.value.gameId;
    if (gameId === played.game.id) ours.push(kind.case);
    if (kind.case === "gameStarted" && gameId === played.game.id) break;
  }
  resumed.hangUp();
  assert.deepEqual(ours, ["gameCreated", "seatTaken", "gameStarted"]);
});

test("the play example runs to the end", async () => {
  const code = await playMain(["--server", server.address, "--quiet"]);
  assert.equal(code, 0);
});
