#!/usr/bin/env python3
"""Online play on a running server: a timed game between two clients, and a seek pairing.

    python generate.py                                       # once, and after proto/ changes
    python online.py timed --server 127.0.0.1:50051 --time 3+2
    python online.py seek  --server 127.0.0.1:50051 --time 3+2 --moves 6

`timed`: alice creates a game with the time control and watches it; bob joins from a second
client (his own channel and token). They play random legal moves to the end, each through
their own client, and the watcher prints the server's clocks from every TurnStarted,
MovePlayed and GameOver event.

`seek`: alice and bob each ask for an opponent with the same time control (GameService.Seek)
from their own clients, at the same time. alice's seek waits (it shows in ListSeeks); bob's
pairs with it at once; both streams end with `paired` naming the same game, in different
seats, each with its own token. They play --moves moves, then the player to move resigns.

Exits non-zero if anything the server sends breaks the contract checked here.
"""

from __future__ import annotations

import argparse
import random
import sys

import oanquan_client as oq
from oanquan_client import game_pb2, rules_pb2
from play import PLAYER, describe


def timed_game(server: str, time_control: str, seed: int, quiet: bool) -> list[str]:
    """Plays one timed game between two clients; returns the problems found."""
    control = oq.parse_time_control(time_control)
    problems: list[str] = []

    def on_event(event: game_pb2.GameEvent) -> None:
        kind = event.WhichOneof("kind")
        clocks = oq.clocks_of(event)
        if kind in ("turn_started", "move_played", "game_over") and clocks is None:
            problems.append(f"event #{event.sequence} ({kind}) of a timed game has no clocks")
        if not quiet and kind != "heartbeat":
            line = f"  [watch #{event.sequence}] {describe(event)}"
            print(line + (f"   [{oq.format_clocks(clocks)}]" if clocks is not None else ""), flush=True)

    with oq.Client(server) as alice, oq.Client(server) as bob:
        played = oq.create_game(alice, "alice", control)
        game = played.game
        print(f"created game {game.id} ({oq.format_time_control(game.time_control)})", flush=True)
        if not game.HasField("clocks"):
            problems.append("CreateGame's game of a timed game has no clocks")
        else:
            print(f"  clocks: {oq.format_clocks(game.clocks)}", flush=True)
        watcher = oq.EventFollower(alice, game.id, on_event=on_event).start()
        watcher.wait_until(lambda w: w.last_sequence >= 1)  # the Snapshot arrived
        oq.join_game(bob, played, "bob")  # bob's own channel: he is the second client
        players = [
            oq.SeatPlayer(alice, rules_pb2.PLAYER_FIRST, played.tokens[rules_pb2.PLAYER_FIRST], "alice"),
            oq.SeatPlayer(bob, rules_pb2.PLAYER_SECOND, played.tokens[rules_pb2.PLAYER_SECOND], "bob"),
        ]
        final = oq.play_online(players, played.game, random.Random(seed))
        watcher.join(timeout=30)

        over = watcher.game_over
        if over is None or not over.HasField("clocks"):
            problems.append("GameOver without clocks")
        result = final.result
        print(
            f"{final.move_count} moves, result {rules_pb2.Outcome.Name(result.outcome)} by "
            f"{rules_pb2.EndReason.Name(result.end_reason)} {result.scores.first}:{result.scores.second}"
            + (f", final clocks {oq.format_clocks(over.clocks)}" if over is not None and over.HasField("clocks") else "")
        )
    return problems


def seek_pairing(server: str, time_control: str, moves: int, seed: int, quiet: bool) -> list[str]:
    """Pairs two seekers and plays a few moves; returns the problems found."""
    control = oq.parse_time_control(time_control)
    problems: list[str] = []
    with oq.Client(server) as alice, oq.Client(server) as bob:
        alice_seek = oq.seek(alice, "alice", control)
        try:
            waiting = alice_seek.wait_waiting()
            print(f"alice seeks {oq.format_time_control(waiting.time_control)}: seek {waiting.id} waiting", flush=True)
            listed = bob.games.ListSeeks(game_pb2.ListSeeksRequest(), timeout=oq.CALL_TIMEOUT).seeks
            if waiting.id not in [s.id for s in listed]:
                problems.append(f"ListSeeks does not show the waiting seek {waiting.id}")
            bob_seek = oq.seek(bob, "bob", control)
            bob_paired = bob_seek.wait_paired()
            alice_paired = alice_seek.wait_paired()
            alice_seek.wait_ended()
            bob_seek.wait_ended()
        finally:
            alice_seek.cancel()  # a no-op once paired; withdraws the seek if something failed
        game = bob_paired.game
        for name, paired in (("alice", alice_paired), ("bob", bob_paired)):
            print(f"{name}: paired in game {paired.game.id} as {PLAYER.get(paired.seat, '?')}", flush=True)
        if alice_paired.game.id != bob_paired.game.id:
            problems.append(f"paired in different games: {alice_paired.game.id} and {bob_paired.game.id}")
        if {alice_paired.seat, bob_paired.seat} != {rules_pb2.PLAYER_FIRST, rules_pb2.PLAYER_SECOND}:
            problems.append(f"seats {alice_paired.seat} and {bob_paired.seat} are not FIRST and SECOND")
        if game.status != game_pb2.GAME_STATUS_ACTIVE:
            problems.append(f"the paired game is {game_pb2.GameStatus.Name(game.status)}, not active")
        if problems:
            return problems

        players = [
            oq.SeatPlayer(alice, alice_paired.seat, alice_paired.player_token, "alice"),
            oq.SeatPlayer(bob, bob_paired.seat, bob_paired.player_token, "bob"),
        ]
        names = {p.seat: p.name for p in players}

        def on_move(record: game_pb2.MoveRecord, game: game_pb2.Game) -> None:
            if not quiet:
                clocks = f"   [{oq.format_clocks(game.clocks)}]" if game.HasField("clocks") else ""
                print(f"  move {record.number}: {names[record.player]} square {record.move.square}{clocks}", flush=True)

        game = oq.play_online(players, game, random.Random(seed), max_moves=moves, on_move=on_move)
        if game.status == game_pb2.GAME_STATUS_ACTIVE:
            # Leave nothing running on the server: the player to move resigns.
            mover = next(p for p in players if p.seat == game.position.to_move)
            game = mover.client.games.Resign(
                game_pb2.ResignRequest(game_id=game.id), metadata=oq.bearer(mover.token), timeout=oq.CALL_TIMEOUT
            ).game
            print(f"{mover.name} resigns after {game.move_count} moves", flush=True)
        print(
            f"game {game.id}: {game_pb2.GameStatus.Name(game.status)}, "
            f"result {rules_pb2.Outcome.Name(game.result.outcome)} by {rules_pb2.EndReason.Name(game.result.end_reason)}"
        )
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenario", choices=["timed", "seek"], help="which scenario to play")
    parser.add_argument("--server", default="127.0.0.1:50051", help="host:port of oanquan-server")
    parser.add_argument("--time", default="3+2", help="time control: 3+2, 30s+0, 2d or untimed (default 3+2)")
    parser.add_argument("--moves", type=int, default=6, help="seek: moves to play before resigning")
    parser.add_argument("--seed", type=int, default=7, help="seed of the random move choice")
    parser.add_argument("--quiet", action="store_true", help="print only the summary lines")
    args = parser.parse_args(argv)
    try:
        oq.parse_time_control(args.time)
    except ValueError as error:
        parser.error(str(error))
    if args.scenario == "timed":
        problems = timed_game(args.server, args.time, args.seed, args.quiet)
    else:
        problems = seek_pairing(args.server, args.time, args.moves, args.seed, args.quiet)
    for problem in problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
