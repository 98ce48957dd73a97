#!/usr/bin/env python3
"""Plays one Ô Ăn Quan game against itself on a running server while watching its events.

    python generate.py                          # once, and after every change to proto/
    python play.py --server 127.0.0.1:50051

It creates a game (seat FIRST), starts watching it, joins it (seat SECOND), then plays
random legal moves for both seats (asking RulesService.LegalMoves each turn). After
--drop-after moves it drops the event stream, plays on while disconnected, and resumes the
stream with `after_sequence` = the last sequence seen; the watcher checks that no event is
missing or repeated and that GameOver arrives. Exits non-zero on any failure.
"""

from __future__ import annotations

import argparse
import sys

import oanquan_client as oq
from oanquan_client import game_pb2, rules_pb2

PLAYER = {rules_pb2.PLAYER_FIRST: "FIRST", rules_pb2.PLAYER_SECOND: "SECOND"}


def describe(event: game_pb2.GameEvent) -> str:
    kind = event.WhichOneof("kind")
    if kind == "snapshot":
        game = event.snapshot.game
        return f"snapshot: {game_pb2.GameStatus.Name(game.status)}, {event.snapshot.move_count} moves"
    if kind == "player_joined":
        return f"{event.player_joined.display_name} sits as {PLAYER[event.player_joined.seat]}"
    if kind == "game_started":
        return "game started"
    if kind == "turn_started":
        return f"{PLAYER[event.turn_started.player]} to move (ply {event.turn_started.ply})"
    if kind == "move_played":
        record = event.move_played.record
        direction = rules_pb2.Direction.Name(record.move.direction).removeprefix("DIRECTION_")
        scores = record.position.scores
        return (
            f"move {record.number}: {PLAYER[record.player]} square {record.move.square} {direction}"
            f" -> scores {scores.first}:{scores.second}"
        )
    if kind == "game_over":
        result = event.game_over.result
        return (
            f"game over: {rules_pb2.Outcome.Name(result.outcome)} by {rules_pb2.EndReason.Name(result.end_reason)},"
            f" {result.scores.first}:{result.scores.second}"
        )
    if kind == "draw":
        action = game_pb2.GameEvent.DrawAction.Name(event.draw.action).removeprefix("DRAW_ACTION_").lower()
        return f"draw {action} by {PLAYER.get(event.draw.by, '?')}"
    if kind == "rematch":
        action = game_pb2.GameEvent.RematchAction.Name(event.rematch.action).removeprefix("REMATCH_ACTION_").lower()
        return f"rematch {action}" + (f": game {event.rematch.game_id}" if event.rematch.game_id else "")
    return kind or "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", default="127.0.0.1:50051", help="host:port of oanquan-server")
    parser.add_argument("--seed", type=int, default=7, help="seed of the random move choice")
    parser.add_argument("--drop-after", type=int, default=4, help="drop the watch after this many moves")
    parser.add_argument("--offline-moves", type=int, default=3, help="moves played while disconnected")
    parser.add_argument("--quiet", action="store_true", help="print only the summary")
    args = parser.parse_args()

    def on_event(event: game_pb2.GameEvent) -> None:
        if not args.quiet and event.WhichOneof("kind") != "heartbeat":
            print(f"  [watch #{event.sequence}] {describe(event)}", flush=True)

    with oq.Client(args.server) as client:
        played = oq.create_game(client, "alice")
        print(f"created game {played.game.id}", flush=True)
        watcher = oq.EventFollower(client, played.game.id, on_event=on_event).start()
        watcher.wait_until(lambda w: w.last_sequence >= 1)  # the Snapshot arrived
        oq.join_game(client, played, "bob")

        def on_move(record: game_pb2.MoveRecord) -> None:
            if record.number == args.drop_after:
                # Wait until the watcher saw this move, then cut the stream.
                watcher.wait_until(lambda w: any(e.HasField("move_played") and
                                                 e.move_played.record.number == record.number for e in w.events))
                print("-- dropping the watch stream (as a network failure would)", flush=True)
                watcher.drop()
            elif record.number == args.drop_after + args.offline_moves:
                print(f"-- resuming watch with after_sequence={watcher.last_sequence}", flush=True)
                watcher.resume()

        final = oq.play_self_game(client, played, seed=args.seed, on_move=on_move)
        watcher.resume()  # in case the game ended while dropped
        watcher.join(timeout=30)

        # ListMoves answers in pages when a history is larger than one response (`more`).
        moves = []
        while True:
            page = client.games.ListMoves(
                game_pb2.ListMovesRequest(game_id=final.id, after_move=moves[-1].number if moves else 0),
                timeout=oq.CALL_TIMEOUT,
            )
            moves.extend(page.moves)
            if not page.more or not page.moves:
                break
        streamed = [e.move_played.record for e in watcher.events if e.HasField("move_played")]
        problems = []
        if watcher.game_over is None:
            problems.append("no GameOver received")
        elif watcher.game_over.result != final.result:
            problems.append("GameOver result differs from GetGame's")
        if [m.number for m in streamed] != [m.number for m in moves]:
            problems.append(f"streamed moves {len(streamed)} != ListMoves {len(moves)}")
        if len(watcher.connections) < 2:
            problems.append("the watch was never resumed")
        print(
            f"{final.move_count} moves, {len(watcher.events)} events over {len(watcher.connections)} connections"
            f" (resumed with after_sequence {watcher.connections[1:]}), "
            f"result {rules_pb2.Outcome.Name(final.result.outcome)} "
            f"{final.result.scores.first}:{final.result.scores.second}"
        )
        for problem in problems:
            print(f"FAIL: {problem}", file=sys.stderr)
        return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
