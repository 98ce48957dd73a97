// Accounts and a rated game on a running server.
//
//   npm run generate                                                 # once, and after proto/ changes
//   npm run accounts -- --server 127.0.0.1:50051 --time 10+5 --moves 6
//
// Registers two accounts (fresh random names, `ex_…`, since a name is taken for good), each
// getting its API key. Both seek a rated game with the time control, each from its own client
// with `authorization: Bearer <api key>`; the seeks pair. They play --moves moves with their
// API keys standing in for the seat tokens, then the player to move resigns. The watcher's
// GameOver carries each side's rating before and after; GetPlayer shows the new (provisional)
// ratings and the win and the loss, and ListPlayerGames lists the game.
//
// Exits non-zero if anything the server sends breaks the contract checked here.

import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

import { Speed } from "./gen/oanquan/v1/account_pb.js";
import { GameStatus } from "./gen/oanquan/v1/game_pb.js";
import { EndReason, Outcome, Player } from "./gen/oanquan/v1/rules_pb.js";
import {
  EventFollower,
  bearer,
  connect,
  formatChange,
  formatRating,
  formatTimeControl,
  parseTimeControl,
  playOnline,
  randomUsername,
  ratedSeek,
  ratingChanges,
  register,
  seededRandom,
  type SeatPlayer,
} from "./client.js";

/** Registers two accounts and plays one rated game between them; returns the problems found. */
export async function ratedGame(
  server: string,
  timeControl: string,
  moves: number,
  seed: number,
  quiet: boolean,
): Promise<string[]> {
  const problems: string[] = [];
  const control = parseTimeControl(timeControl);
  const clients = [connect(server), connect(server)]; // each player's own connection
  const accounts = [await register(clients[0]!, randomUsername()), await register(clients[1]!, randomUsername())];
  for (const account of accounts) {
    // Never print the secret: the key id is what ListApiKeys and RevokeApiKey use.
    console.log(`registered ${account.username} (API key ${account.keyId}, secret shown once)`);
  }

  // Both seek a rated game as their account; the second seek pairs with the first.
  const firstSeek = ratedSeek(clients[0]!, accounts[0]!, control);
  let paired;
  try {
    await firstSeek.waitWaiting();
    const secondSeek = ratedSeek(clients[1]!, accounts[1]!, control);
    paired = [await firstSeek.waitPaired(), await secondSeek.waitPaired()];
  } finally {
    await firstSeek.cancel(); // a no-op once paired; withdraws the seek if something failed
  }
  let game = paired[1]!.game!;
  if (paired[0]!.game!.id !== game.id) return [`paired in different games: ${paired[0]!.game!.id} and ${game.id}`];
  if (!game.rated) problems.push(`the game of two rated seeks, ${game.id}, is not rated`);
  const seatOf = (seat: Player) => (seat === Player.FIRST ? game.firstSeat : game.secondSeat);
  const nameOf = new Map(paired.map((p, i) => [p.seat, accounts[i]!.username]));
  const ratingBefore = new Map<Player, number>();
  for (const [seat, username] of nameOf) {
    const shown = seatOf(seat)?.account;
    if (shown?.username !== username) {
      problems.push(`seat ${Player[seat]} shows account ${shown?.username}, not ${username}`);
    }
    const rating = shown?.rating ?? 0;
    ratingBefore.set(seat, rating);
    console.log(`${username} plays ${Player[seat]}, rated ${formatRating(rating, shown?.provisional ?? false)}`);
  }
  console.log(`rated game ${game.id} (${formatTimeControl(game.timeControl)}) started`);
  if (problems.length > 0) return problems;

  const watcher = new EventFollower(clients[0]!, game.id).start();
  await watcher.waitUntil((w) => w.lastSequence >= 1n); // the Snapshot arrived
  // The API key works on the account's own seats in place of the seat token.
  const players: SeatPlayer[] = paired.map((p, i) => ({
    api: clients[i]!,
    seat: p.seat,
    token: accounts[i]!.apiKey,
    name: accounts[i]!.username,
  }));
  game = await playOnline(players, game, seededRandom(seed), moves);
  if (game.status === GameStatus.ACTIVE) {
    const mover = players.find((p) => p.seat === game.position!.toMove)!;
    await mover.api.games.resign({ gameId: game.id }, bearer(mover.token));
    console.log(`${mover.name} resigns after ${game.moveCount} moves`);
  }
  await watcher.done;

  const result = watcher.gameOver!.result!;
  const changes = ratingChanges(result);
  console.log(`game over: ${Outcome[result.outcome]} by ${EndReason[result.endReason]}`);
  if (changes.size !== 2) return [...problems, "GameOver of a rated game does not carry both rating changes"];
  for (const [seat, change] of changes) {
    const side = seat === result.winner ? "won" : changes.has(result.winner) ? "lost" : "drew";
    console.log(`  ${nameOf.get(seat)} (${Player[seat]}, ${side}): ${formatChange(change)}`);
    if (change.before !== ratingBefore.get(seat)) {
      problems.push(`${nameOf.get(seat)}: rating before ${change.before}, the seat showed ${ratingBefore.get(seat)}`);
    }
  }
  if (changes.has(result.winner)) {
    const winner = changes.get(result.winner)!;
    const loser = [...changes].find(([seat]) => seat !== result.winner)![1];
    if (!(winner.after > winner.before && loser.after < loser.before)) {
      const both = `${formatChange(winner)} / ${formatChange(loser)}`;
      problems.push(`the winner's rating did not go up or the loser's down: ${both}`);
    }
  }

  for (const [seat, username] of nameOf) {
    const profile = (await clients[0]!.accounts.getPlayer({ username })).player!;
    const shown = profile.ratings
      .map((r) => {
        const speed = Speed[r.speed].toLowerCase();
        return `${speed} ${formatRating(r.rating, r.provisional)} (RD ${r.deviation}, rated games: ${r.games})`;
      })
      .join(", ");
    console.log(`${username}: ${shown}; ${profile.wins} won, ${profile.draws} drawn, ${profile.losses} lost`);
    const rating = profile.ratings[0];
    if (profile.ratings.length !== 1) {
      problems.push(`${username} has ${profile.ratings.length} ratings after one rated game`);
    } else if (rating!.rating !== changes.get(seat)!.after || rating!.games !== 1 || !rating!.provisional) {
      const announced = formatChange(changes.get(seat)!);
      problems.push(`${username}'s profile rating ${rating!.rating} is not GameOver's ${announced}`);
    }
    const { games } = await clients[0]!.accounts.listPlayerGames({ username });
    if (games.length !== 1 || games[0]!.id !== game.id) {
      problems.push(`${username}'s games are [${games.map((g) => g.id).join(", ")}], not [${game.id}]`);
    } else if (!quiet) {
      console.log(`  games of ${username}: ${games[0]!.id} (${games[0]!.rated ? "rated" : "casual"})`);
    }
  }
  return problems;
}

export async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      server: { type: "string", default: "127.0.0.1:50051" },
      time: { type: "string", default: "10+5" },
      moves: { type: "string", default: "6" },
      seed: { type: "string", default: "7" },
      quiet: { type: "boolean", default: false },
    },
  });
  const usage = "usage: accounts.ts [--server host:port] [--time 10+5] [--moves N] [--seed N] [--quiet]";
  if (positionals.length !== 0) {
    console.error(usage);
    return 2;
  }
  try {
    if (parseTimeControl(values.time!).kind.case === undefined) {
      console.error("rated games need a time control");
      return 2;
    }
  } catch (error) {
    console.error((error as Error).message);
    return 2;
  }
  const { server, time, moves, seed, quiet } = values;
  const problems = await ratedGame(server!, time!, Number(moves), Number(seed), quiet!);
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
