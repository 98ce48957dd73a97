// Accounts against the real server: registering, a rated game between two accounts changing
// both ratings once, rated games by invitation, and API keys that stop working when revoked.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { equals } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";

import {
  EventFollower,
  bearer,
  connect,
  errorReason,
  formatChange,
  parseTimeControl,
  playOnline,
  randomUsername,
  ratedSeek,
  ratingChanges,
  register,
  seededRandom,
  type OanQuan,
  type SeatPlayer,
} from "../src/client.js";
import { main as accountsMain } from "../src/accounts.js";
import { PlayerResult, Speed } from "../src/gen/oanquan/v1/account_pb.js";
import { GameStatus, RatingChangeSchema } from "../src/gen/oanquan/v1/game_pb.js";
import { EndReason, Player } from "../src/gen/oanquan/v1/rules_pb.js";
import { startServer, type RunningServer } from "./server.js";

// Rated seeks pair only with rated seeks of the same time control: one used by no other test
// (nor by the Python suite, which may run against the same server). 9+6 is rapid: an estimated
// 9 + 40 × 6 s = 13 minutes.
const RATED_CONTROL = "9+6";

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

const other = (player: Player) => (player === Player.FIRST ? Player.SECOND : Player.FIRST);

/** Asserts that `call` fails with `code` (and `reason`, when given). */
async function refused(call: Promise<unknown>, code: Code, reason?: string): Promise<ConnectError> {
  let failure: ConnectError | undefined;
  await assert.rejects(call, (error) => {
    failure = ConnectError.from(error);
    return true;
  });
  assert.equal(failure!.code, code, failure!.message);
  if (reason !== undefined) assert.equal(errorReason(failure), reason);
  return failure!;
}

async function playerGames(username: string, result = PlayerResult.UNSPECIFIED): Promise<string[]> {
  return (await api.accounts.listPlayerGames({ username, result })).games.map((g) => g.id);
}

test("random usernames are valid and fresh", () => {
  const names = new Set(Array.from({ length: 100 }, () => randomUsername()));
  assert.equal(names.size, 100);
  for (const name of names) assert.match(name, /^ex_[0-9a-f]{8}$/);
});

test("Register gives a key, and refuses a taken or bad name", async () => {
  const username = randomUsername();
  const account = await register(api, username);
  assert.equal(account.username, username);
  assert.ok(account.apiKey.startsWith(`oqk_${account.keyId}_`));
  const { player } = await api.accounts.getPlayer({ username: username.toUpperCase() }); // found by any case
  assert.equal(player?.username, username);
  assert.deepEqual(player?.ratings, []);
  assert.deepEqual([player?.wins, player?.draws, player?.losses], [0, 0, 0]);
  const me = await api.accounts.getMe({}, bearer(account.apiKey));
  assert.equal(me.player?.username, username);

  await refused(register(api, username.toUpperCase()), Code.AlreadyExists, "ERROR_REASON_USERNAME_TAKEN");
  const bad = await refused(register(api, "a b"), Code.InvalidArgument);
  assert.match(bad.rawMessage, /username/);
});

test("a rated game between two accounts changes both ratings", async () => {
  const [alice, bob] = [await register(api, randomUsername()), await register(second, randomUsername())];
  const control = parseTimeControl(RATED_CONTROL);

  // Two rated seeks, each with its account's key, pair into one rated game.
  const aliceSeek = ratedSeek(api, alice, control);
  let alicePaired, bobPaired;
  try {
    const waiting = await aliceSeek.waitWaiting();
    assert.ok(waiting.rated);
    assert.equal(waiting.account?.username, alice.username);
    bobPaired = await ratedSeek(second, bob, control).waitPaired();
    alicePaired = await aliceSeek.waitPaired();
  } finally {
    await aliceSeek.cancel();
  }
  let game = bobPaired.game!;
  assert.equal(alicePaired.game?.id, game.id);
  assert.ok(game.rated);
  assert.deepEqual(new Set([alicePaired.seat, bobPaired.seat]), new Set([Player.FIRST, Player.SECOND]));
  const nameOf = new Map([
    [alicePaired.seat, alice.username],
    [bobPaired.seat, bob.username],
  ]);
  for (const [seat, shown] of [
    [Player.FIRST, game.firstSeat?.account],
    [Player.SECOND, game.secondSeat?.account],
  ] as const) {
    assert.deepEqual([shown?.username, shown?.rating, shown?.provisional], [nameOf.get(seat), 1500, true]);
  }

  // They play with their API keys in place of the seat tokens; the player to move resigns.
  const watcher = new EventFollower(api, game.id).start();
  await watcher.waitUntil((w) => w.snapshots.length === 1);
  const players: SeatPlayer[] = [
    { api, seat: alicePaired.seat, token: alice.apiKey, name: alice.username },
    { api: second, seat: bobPaired.seat, token: bob.apiKey, name: bob.username },
  ];
  game = await playOnline(players, game, seededRandom(13), 4);
  assert.equal(game.moveCount, 4);
  assert.equal(game.status, GameStatus.ACTIVE);
  const loser = players.find((p) => p.seat === game.position!.toMove)!;
  await api.games.resign({ gameId: game.id }, bearer(loser.token));
  await watcher.done;

  // GameOver: both ratings before and after; the winner's went up, the loser's down.
  const result = watcher.gameOver!.result!;
  assert.equal(result.endReason, EndReason.RESIGNATION);
  assert.equal(result.winner, other(loser.seat));
  const changes = ratingChanges(result);
  assert.equal(changes.size, 2);
  const winner = changes.get(result.winner)!;
  const lost = changes.get(loser.seat)!;
  assert.deepEqual([winner.before, lost.before], [1500, 1500]);
  assert.ok(winner.after > winner.before, `winner: ${formatChange(winner)}`);
  assert.ok(lost.after < lost.before, `loser: ${formatChange(lost)}`);
  assert.ok(winner.provisional && lost.provisional);
  // GetGame's result is the same, computed once.
  const got = (await api.games.getGame({ gameId: game.id })).game!.result!;
  assert.ok(equals(RatingChangeSchema, got.firstRating!, result.firstRating!));
  assert.ok(equals(RatingChangeSchema, got.secondRating!, result.secondRating!));

  // The profiles show the ratings GameOver announced, at the game's speed, still provisional.
  for (const [seat, username] of nameOf) {
    const profile = (await second.accounts.getPlayer({ username })).player!;
    assert.equal(profile.ratings.length, 1);
    const rating = profile.ratings[0]!;
    assert.equal(rating.speed, Speed.RAPID);
    assert.equal(rating.rating, changes.get(seat)!.after);
    assert.deepEqual([rating.games, rating.provisional], [1, true]);
    const won: boolean = seat === result.winner;
    assert.deepEqual([profile.wins, profile.draws, profile.losses], won ? [1, 0, 0] : [0, 0, 1]);
    // The game is in the player's history, under the right result filter only.
    assert.deepEqual(await playerGames(username), [game.id]);
    const [mine, theirs]: PlayerResult[] = won
      ? [PlayerResult.WIN, PlayerResult.LOSS]
      : [PlayerResult.LOSS, PlayerResult.WIN];
    assert.deepEqual(await playerGames(username, mine), [game.id]);
    assert.deepEqual(await playerGames(username, theirs), []);
  }

  // Provisional ratings stay off the leaderboard.
  const { entries } = await api.accounts.leaderboard({ speed: Speed.RAPID, pageSize: 100 });
  const names = new Set(nameOf.values());
  assert.ok(!entries.some((e) => names.has(e.username)), "a provisional rating on the leaderboard");
});

test("a rated game by invitation needs two accounts", async () => {
  const [alice, bob, carl] = [
    await register(api, randomUsername()),
    await register(second, randomUsername()),
    await register(api, randomUsername()),
  ];
  const request = {
    rules: { kind: { case: "preset" as const, value: "standard" } },
    seat: Player.FIRST,
    timeControl: parseTimeControl("5+3"),
    rated: true,
  };

  // Without a key a rated game cannot be created.
  await refused(api.games.createGame(request), Code.FailedPrecondition, "ERROR_REASON_RATED_NEEDS_ACCOUNT");

  const created = await api.games.createGame(request, bearer(alice.apiKey));
  assert.ok(created.game?.rated);
  assert.equal(created.game?.firstSeat?.account?.username, alice.username);
  const gameId = created.game!.id;
  // Only an account may join it.
  await refused(
    second.games.joinGame({ gameId, displayName: "anon" }),
    Code.FailedPrecondition,
    "ERROR_REASON_RATED_NEEDS_ACCOUNT",
  );
  const joined = await second.games.joinGame({ gameId }, bearer(bob.apiKey));
  assert.equal(joined.game?.status, GameStatus.ACTIVE);
  assert.equal(joined.game?.secondSeat?.account?.username, bob.username);

  // A key of an account without a seat here is refused on the game's calls.
  await refused(
    api.games.abortGame({ gameId }, bearer(carl.apiKey)),
    Code.PermissionDenied,
    "ERROR_REASON_WRONG_TOKEN",
  );

  // bob aborts it with his seat token (it still works next to the key): no result, and no
  // rating changes.
  const aborted = await second.games.abortGame({ gameId }, bearer(joined.playerToken));
  assert.equal(aborted.game?.status, GameStatus.ABORTED);
  assert.equal(ratingChanges(aborted.game?.result).size, 0);
  for (const account of [alice, bob]) {
    assert.deepEqual((await api.accounts.getPlayer({ username: account.username })).player?.ratings, []);
  }
});

test("a revoked key is refused from the next call", async () => {
  const account = await register(api, randomUsername());
  const made = await api.accounts.createApiKey({}, bearer(account.apiKey));
  const spare = made.apiKey;
  assert.equal((await api.accounts.getMe({}, bearer(spare))).player?.username, account.username);

  await api.accounts.revokeApiKey({ keyId: made.key!.id }, bearer(account.apiKey));
  await refused(api.accounts.getMe({}, bearer(spare)), Code.Unauthenticated, "ERROR_REASON_BAD_API_KEY");
  // Nor can it play as the account.
  const rated = { seat: Player.FIRST, timeControl: parseTimeControl("5+3"), rated: true };
  await refused(api.games.createGame(rated, bearer(spare)), Code.Unauthenticated);

  // The other key still works, and lists both keys, the revoked one with its revocation time.
  const { keys } = await api.accounts.listApiKeys({}, bearer(account.apiKey));
  assert.deepEqual(
    keys.map((k) => [k.id, k.revokeTime !== undefined]),
    [
      [account.keyId, false],
      [made.key!.id, true],
    ],
  );
  // A made-up key is refused the same way.
  await refused(api.accounts.getMe({}, bearer("oqk_nope")), Code.Unauthenticated);
});

test("the accounts example plays a rated game", async () => {
  const code = await accountsMain(["--server", server.address, "--time", "9+8", "--quiet"]);
  assert.equal(code, 0);
});
