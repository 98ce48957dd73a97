"""The Python example against the real server: plays full games and follows their events."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import pathlib

import grpc
import pytest

import oanquan_client as oq
from oanquan_client import game_pb2, rules_pb2

HERE = pathlib.Path(__file__).resolve().parent


def move_numbers(events):
    return [e.move_played.record.number for e in events if e.HasField("move_played")]


def test_rules_service_presets_and_legal_moves(client):
    presets = client.rules.ListPresets(rules_pb2.ListPresetsRequest(), timeout=oq.CALL_TIMEOUT).presets
    assert presets[0].name == "standard"
    legal = client.rules.LegalMoves(rules_pb2.LegalMovesRequest(), timeout=oq.CALL_TIMEOUT)
    assert not legal.over
    moves = legal.moves
    # Ring indices have presence (square 0 is a square, not "unset"): every move names its square.
    assert all(m.HasField("square") for m in moves)
    # From the start position FIRST may sow any of squares 1..5 either way.
    assert {(m.square, m.direction) for m in moves} == {
        (s, d) for s in range(1, 6) for d in (rules_pb2.DIRECTION_LEFT, rules_pb2.DIRECTION_RIGHT)
    }


def test_full_game_with_dropped_and_resumed_watch(client):
    played = oq.create_game(client, "alice")
    assert played.game.status == game_pb2.GAME_STATUS_WAITING_FOR_PLAYERS

    watcher = oq.EventFollower(client, played.game.id).start()
    watcher.wait_until(lambda w: len(w.snapshots) == 1)
    oq.join_game(client, played, "bob")
    assert played.game.status == game_pb2.GAME_STATUS_ACTIVE

    drop_after, offline_moves = 4, 3

    def on_move(record):
        if record.number == drop_after:
            watcher.wait_until(lambda w: drop_after in move_numbers(w.events))
            watcher.drop()
        elif record.number == drop_after + offline_moves:
            watcher.resume()

    final = oq.play_self_game(client, played, seed=11, on_move=on_move)
    watcher.resume()
    watcher.join(timeout=60)

    assert final.status == game_pb2.GAME_STATUS_FINISHED
    assert final.move_count > drop_after + offline_moves, "game too short to test the resume"

    # One snapshot (the first connection), then real events numbered without gaps or repeats
    # (EventFollower raises GapError otherwise; check again here).
    assert len(watcher.snapshots) == 1
    snapshot = watcher.snapshots[0]
    assert snapshot.snapshot.game.status == game_pb2.GAME_STATUS_WAITING_FOR_PLAYERS
    sequences = [e.sequence for e in watcher.events]
    assert sequences == list(range(snapshot.sequence + 1, snapshot.sequence + 1 + len(sequences)))

    # The second connection resumed right after the last event seen, and replayed the moves
    # played while it was away.
    assert len(watcher.disconnected_at) == 1
    dropped_at = watcher.disconnected_at[0]
    assert watcher.connections == [0, dropped_at]
    assert watcher.first_sequence_per_connection[1] == dropped_at + 1
    missed = [e for e in watcher.events if e.sequence > dropped_at]
    assert move_numbers(missed)[:offline_moves] == list(range(drop_after + 1, drop_after + 1 + offline_moves))

    # The event sequence follows the contract: joins, start, then turn/move pairs, GameOver last.
    kinds = [e.WhichOneof("kind") for e in watcher.events]
    assert kinds[:3] == ["player_joined", "game_started", "turn_started"]
    assert kinds[-1] == "game_over"
    assert kinds.count("move_played") == final.move_count
    assert watcher.game_over.result == final.result

    # The streamed moves are exactly the game's moves.
    listed = client.games.ListMoves(game_pb2.ListMovesRequest(game_id=final.id), timeout=oq.CALL_TIMEOUT).moves
    streamed = [e.move_played.record for e in watcher.events if e.HasField("move_played")]
    assert [(m.number, m.move) for m in streamed] == [(m.number, m.move) for m in listed]
    assert [(m.number, m.move) for m in listed] == [(m.number, m.move) for m in played.moves]


def test_watch_after_the_end_replays_and_closes(client):
    played = oq.create_game(client, "carol")
    oq.join_game(client, played, "dave")
    final = oq.play_self_game(client, played, seed=3)

    # From scratch: a Snapshot of the finished game, then the stream ends with OK.
    fresh = oq.EventFollower(client, final.id).start()
    fresh.join(timeout=30)
    assert len(fresh.snapshots) == 1 and fresh.events == []
    assert fresh.snapshots[0].snapshot.game.status == game_pb2.GAME_STATUS_FINISHED
    assert fresh.game_over.result == final.result

    # Resuming from the middle replays exactly the rest, ending with GameOver.
    middle = fresh.last_sequence // 2
    resumed = oq.EventFollower(client, final.id)
    resumed.last_sequence = middle
    resumed.start().join(timeout=30)
    assert resumed.snapshots == []
    assert [e.sequence for e in resumed.events] == list(range(middle + 1, fresh.last_sequence + 1))
    assert resumed.events[-1].HasField("game_over")

    # After the last event the server has nothing beyond it.
    with pytest.raises(grpc.RpcError) as error:
        list(client.games.WatchGame(
            game_pb2.WatchGameRequest(game_id=final.id, after_sequence=fresh.last_sequence + 1),
            timeout=oq.CALL_TIMEOUT,
        ))
    assert error.value.code() == grpc.StatusCode.OUT_OF_RANGE


def test_errors_carry_machine_readable_reasons(client):
    played = oq.create_game(client, "erin")
    game_id = played.game.id
    first_token = played.tokens[rules_pb2.PLAYER_FIRST]
    move = rules_pb2.Move(square=1, direction=rules_pb2.DIRECTION_RIGHT)

    def play(token=None, **kw):
        metadata = oq.bearer(token) if token else None
        with pytest.raises(grpc.RpcError) as error:
            client.games.PlayMove(
                game_pb2.PlayMoveRequest(game_id=kw.get("game_id", game_id), move=kw.get("move", move)),
                metadata=metadata,
                timeout=oq.CALL_TIMEOUT,
            )
        return error.value.code(), oq.error_reason(error.value)

    assert play(first_token) == (grpc.StatusCode.FAILED_PRECONDITION, "ERROR_REASON_GAME_NOT_STARTED")
    oq.join_game(client, played, "frank")
    second_token = played.tokens[rules_pb2.PLAYER_SECOND]
    assert play(second_token) == (grpc.StatusCode.FAILED_PRECONDITION, "ERROR_REASON_NOT_YOUR_TURN")
    assert play(None) == (grpc.StatusCode.UNAUTHENTICATED, "ERROR_REASON_MISSING_TOKEN")
    assert play("not-a-token") == (grpc.StatusCode.PERMISSION_DENIED, "ERROR_REASON_WRONG_TOKEN")
    assert play(first_token, game_id="no-such-game") == (grpc.StatusCode.NOT_FOUND, "ERROR_REASON_GAME_NOT_FOUND")
    code, _ = play(first_token, move=rules_pb2.Move(square=7, direction=rules_pb2.DIRECTION_RIGHT))
    assert code in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INVALID_ARGUMENT)

    # A stale expected_ply is refused, so a client never plays on a position it has not seen.
    with pytest.raises(grpc.RpcError) as error:
        client.games.PlayMove(
            game_pb2.PlayMoveRequest(game_id=game_id, move=move, expected_ply=5),
            metadata=oq.bearer(first_token),
            timeout=oq.CALL_TIMEOUT,
        )
    assert oq.error_reason(error.value) == "ERROR_REASON_STALE_PLY"

    # Resigning ends the game for everyone.
    oq.play_move(client, played, random.Random(1))
    resigned = client.games.Resign(
        game_pb2.ResignRequest(game_id=game_id), metadata=oq.bearer(second_token), timeout=oq.CALL_TIMEOUT
    ).game
    assert resigned.status == game_pb2.GAME_STATUS_FINISHED
    assert resigned.result.end_reason == rules_pb2.END_REASON_RESIGNATION
    assert resigned.result.winner == rules_pb2.PLAYER_FIRST


def test_apply_move_replays_a_served_game(client):
    """RulesService.ApplyMove, fed the game's own moves, reproduces every recorded position and
    trace: a bot can simulate with the server's rules instead of its own."""
    played = oq.create_game(client, "gina")
    oq.join_game(client, played, "hal")
    final = oq.play_self_game(client, played, seed=5)
    listed = client.games.ListMoves(game_pb2.ListMovesRequest(game_id=final.id), timeout=oq.CALL_TIMEOUT)
    rules = rules_pb2.RulesSpec(rule_set=final.rule_set)
    position = listed.start_position
    assert len(listed.moves) == final.move_count > 0
    for record in listed.moves:
        applied = client.rules.ApplyMove(
            rules_pb2.ApplyMoveRequest(rules=rules, position=position, move=record.move),
            timeout=oq.CALL_TIMEOUT,
        )
        assert applied.position == record.position, f"move {record.number}"
        assert list(applied.steps) == list(record.steps), f"move {record.number}"
        position = applied.position
    # After the last move the game is over: nobody is to move, no legal moves remain, and
    # LegalMoves says why.
    assert position.over and position.to_move == rules_pb2.PLAYER_UNSPECIFIED
    legal = client.rules.LegalMoves(
        rules_pb2.LegalMovesRequest(rules=rules, position=position), timeout=oq.CALL_TIMEOUT
    )
    assert list(legal.moves) == []
    assert legal.over and legal.end_reason == final.result.end_reason


def test_lobby_stream_resumes_after_its_last_sequence(client):
    stream = client.games.WatchLobby(game_pb2.WatchLobbyRequest(), timeout=30)
    first = next(stream).event
    assert first.HasField("snapshot")
    stream.cancel()

    played = oq.create_game(client, "ivy")
    oq.join_game(client, played, "jon")

    # Resuming right after the snapshot's sequence: every later lobby event, numbered without a
    # gap, and among them this game's creation, seat and start, in that order.
    last = first.sequence
    ours = []
    resumed = client.games.WatchLobby(game_pb2.WatchLobbyRequest(after_sequence=last), timeout=30)
    for response in resumed:
        event = response.event
        # Heartbeats and seek updates (seeks are presence, not history) repeat the last real
        # sequence: not counted. A resumed stream starts with a SeekList.
        if event.WhichOneof("kind") in ("heartbeat", "seek_added", "seek_removed", "seek_list"):
            continue
        assert event.sequence == last + 1, "a gap or a repeat in the lobby stream"
        last = event.sequence
        kind = event.WhichOneof("kind")
        game_id = event.game_created.game.id if kind == "game_created" else getattr(event, kind).game_id
        if game_id == played.game.id:
            ours.append(kind)
        if kind == "game_started" and game_id == played.game.id:
            break
    resumed.cancel()
    assert ours == ["game_created", "seat_taken", "game_started"]


def test_play_script(server_addr):
    """The CLI example, as an integrator would run it."""
    result = subprocess.run(
        [sys.executable, str(HERE / "play.py"), "--server", server_addr, "--quiet"],
        capture_output=True,
        text=True,
        timeout=90,
        env=dict(os.environ),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "connections" in result.stdout
