#!/usr/bin/env python3
"""Accounts and a rated game on a running server.

    python generate.py                                       # once, and after proto/ changes
    python accounts.py --server 127.0.0.1:50051 --time 10+5 --moves 6

Registers two accounts (fresh random names, `ex_…`, since a name is taken for good), each
getting its API key. Both seek a rated game with the time control, each from its own client
with `authorization: Bearer <api key>`; the seeks pair. They play --moves moves with their API
keys standing in for the seat tokens, then the player to move resigns. The watcher's GameOver
carries each side's rating before and after; GetPlayer shows the new (provisional) ratings and
the win and the loss, and ListPlayerGames lists the game.

Exits non-zero if anything the server sends breaks the contract checked here.
"""

from __future__ import annotations

import argparse
import random
import sys

import oanquan_client as oq
from oanquan_client import account_pb2, game_pb2, rules_pb2
from play import PLAYER


def rated_game(server: str, time_control: str, moves: int, seed: int, quiet: bool) -> list[str]:
    """Registers two accounts and plays one rated game between them; returns the problems found."""
    control = oq.parse_time_control(time_control)
    problems: list[str] = []
    with oq.Client(server) as one, oq.Client(server) as two:
        accounts = [oq.register(one, oq.random_username()), oq.register(two, oq.random_username())]
        for account in accounts:
            # Never print the secret: the key id is what ListApiKeys and RevokeApiKey use.
            print(f"registered {account.username} (API key {account.key_id}, secret shown once)", flush=True)

        # Both seek a rated game as their account; the second seek pairs with the first.
        first_seek = oq.rated_seek(one, accounts[0], control)
        try:
            first_seek.wait_waiting()
            second_seek = oq.rated_seek(two, accounts[1], control)
            paired = [first_seek.wait_paired(), second_seek.wait_paired()]
        finally:
            first_seek.cancel()  # a no-op once paired; withdraws the seek if something failed
        game = paired[1].game
        if paired[0].game.id != game.id:
            return [f"paired in different games: {paired[0].game.id} and {game.id}"]
        if not game.rated:
            problems.append(f"the game of two rated seeks, {game.id}, is not rated")
        seats = {rules_pb2.PLAYER_FIRST: game.first_seat, rules_pb2.PLAYER_SECOND: game.second_seat}
        name_of = {p.seat: a.username for p, a in zip(paired, accounts)}
        for seat, username in name_of.items():
            shown = seats[seat].account
            if shown.username != username:
                problems.append(f"seat {PLAYER[seat]} shows account {shown.username!r}, not {username!r}")
            print(
                f"{username} plays {PLAYER[seat]}, rated {oq.format_rating(shown.rating, shown.provisional)}",
                flush=True,
            )
        print(f"rated game {game.id} ({oq.format_time_control(game.time_control)}) started", flush=True)
        if problems:
            return problems

        watcher = oq.EventFollower(one, game.id).start()
        watcher.wait_until(lambda w: w.last_sequence >= 1)  # the Snapshot arrived
        # The API key works on the account's own seats in place of the seat token.
        players = [
            oq.SeatPlayer(client, p.seat, account.api_key, account.username)
            for client, p, account in zip((one, two), paired, accounts)
        ]
        game = oq.play_online(players, game, random.Random(seed), max_moves=moves)
        if game.status == game_pb2.GAME_STATUS_ACTIVE:
            mover = next(p for p in players if p.seat == game.position.to_move)
            mover.client.games.Resign(
                game_pb2.ResignRequest(game_id=game.id), metadata=oq.bearer(mover.token), timeout=oq.CALL_TIMEOUT
            )
            print(f"{mover.name} resigns after {game.move_count} moves", flush=True)
        watcher.join(timeout=30)

        result = watcher.game_over.result
        changes = oq.rating_changes(result)
        print(
            f"game over: {rules_pb2.Outcome.Name(result.outcome)} by {rules_pb2.EndReason.Name(result.end_reason)}",
            flush=True,
        )
        if set(changes) != {rules_pb2.PLAYER_FIRST, rules_pb2.PLAYER_SECOND}:
            return problems + ["GameOver of a rated game does not carry both rating changes"]
        for seat, change in changes.items():
            side = "won" if seat == result.winner else "lost" if result.winner in changes else "drew"
            print(f"  {name_of[seat]} ({PLAYER[seat]}, {side}): {oq.format_change(change)}", flush=True)
            shown = seats[seat].account.rating
            if change.before != shown:
                problems.append(f"{name_of[seat]}: rating before {change.before}, the seat showed {shown}")
        if result.winner in changes:
            loser_seat = next(seat for seat in changes if seat != result.winner)
            winner, loser = changes[result.winner], changes[loser_seat]
            if not (winner.after > winner.before and loser.after < loser.before):
                problems.append(f"the winner's rating did not go up or the loser's down: {winner} / {loser}")

        for seat, username in name_of.items():
            profile = one.accounts.GetPlayer(
                account_pb2.GetPlayerRequest(username=username), timeout=oq.CALL_TIMEOUT
            ).player
            ratings = {account_pb2.Speed.Name(r.speed).removeprefix("SPEED_").lower(): r for r in profile.ratings}
            shown = ", ".join(
                f"{speed} {oq.format_rating(r.rating, r.provisional)} (RD {r.deviation}, rated games: {r.games})"
                for speed, r in ratings.items()
            )
            print(f"{username}: {shown}; {profile.wins} won, {profile.draws} drawn, {profile.losses} lost", flush=True)
            if len(profile.ratings) != 1:
                problems.append(f"{username} has {len(profile.ratings)} ratings after one rated game")
            else:
                rating = profile.ratings[0]
                if rating.rating != changes[seat].after or rating.games != 1 or not rating.provisional:
                    problems.append(f"{username}'s profile rating {rating} is not GameOver's {changes[seat]}")
            games = one.accounts.ListPlayerGames(
                account_pb2.ListPlayerGamesRequest(username=username), timeout=oq.CALL_TIMEOUT
            ).games
            if [g.id for g in games] != [game.id]:
                problems.append(f"{username}'s games are {[g.id for g in games]}, not [{game.id}]")
            elif not quiet:
                print(f"  games of {username}: {games[0].id} ({'rated' if games[0].rated else 'casual'})", flush=True)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", default="127.0.0.1:50051", help="host:port of oanquan-server")
    parser.add_argument("--time", default="10+5", help="time control of the rated game (default 10+5, rapid)")
    parser.add_argument("--moves", type=int, default=6, help="moves to play before the player to move resigns")
    parser.add_argument("--seed", type=int, default=7, help="seed of the random move choice")
    parser.add_argument("--quiet", action="store_true", help="print less")
    args = parser.parse_args(argv)
    try:
        control = oq.parse_time_control(args.time)
    except ValueError as error:
        parser.error(str(error))
    if control.WhichOneof("kind") is None:
        parser.error("rated games need a time control")
    problems = rated_game(args.server, args.time, args.moves, args.seed, args.quiet)
    for problem in problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
