"""Online play against the real server: a timed game between two clients with the server's
clocks, a flag falling on the server, and seek pairings."""

from __future__ import annotations

import os
import pathlib
import random
import subprocess
import sys
import time

import grpc
import pytest

import oanquan_client as oq
from oanquan_client import game_pb2, rules_pb2

HERE = pathlib.Path(__file__).resolve().parent
FIRST, SECOND = rules_pb2.PLAYER_FIRST, rules_pb2.PLAYER_SECOND
OTHER = {FIRST: SECOND, SECOND: FIRST}

# Seeks pair only with identical time controls: time controls used by no other test here (nor
# by the TypeScript suite, which may run against the same server) keep a stray seek from
# pairing with these.
SEEK_CONTROL = "7+3"
ACCEPT_CONTROL = "7+4"


def ms(duration) -> int:
    return duration.ToMilliseconds()


def left(clocks: game_pb2.Clocks, player: int) -> int:
    """`player`'s remaining time in ms."""
    return ms(clocks.first_remaining if player == FIRST else clocks.second_remaining)


@pytest.fixture()
def second_client(server_addr):
    """Another player's client: its own channel."""
    with oq.Client(server_addr) as c:
        yield c


def start_timed_game(client, second_client, control: str):
    """alice creates a timed game, a watcher follows it, bob joins from the second client."""
    played = oq.create_game(client, "alice", oq.parse_time_control(control))
    watcher = oq.EventFollower(client, played.game.id).start()
    watcher.wait_until(lambda w: len(w.snapshots) == 1)
    oq.join_game(second_client, played, "bob")
    players = [
        oq.SeatPlayer(client, FIRST, played.tokens[FIRST], "alice"),
        oq.SeatPlayer(second_client, SECOND, played.tokens[SECOND], "bob"),
    ]
    return played, watcher, players


def test_parse_time_control():
    control = oq.parse_time_control("3+2")
    assert (ms(control.real_time.initial), ms(control.real_time.increment)) == (180_000, 2_000)
    control = oq.parse_time_control("1s+0")
    assert control.WhichOneof("kind") == "real_time"
    assert (ms(control.real_time.initial), ms(control.real_time.increment)) == (1_000, 0)
    assert oq.parse_time_control("2d").correspondence.per_move.ToSeconds() == 2 * 86_400
    assert oq.parse_time_control("untimed").WhichOneof("kind") is None
    shown = {"3+2": "3+2", "1s+0": "1s+0", "0.5+1": "30s+1", "2d": "2d per move", "90m": "90m per move"}
    for text, display in shown.items():
        assert oq.format_time_control(oq.parse_time_control(text)) == display
    assert oq.format_time_control(game_pb2.TimeControl()) == "untimed"
    with pytest.raises(ValueError):
        oq.parse_time_control("three minutes")


def test_bad_time_control_is_refused_naming_the_field(client):
    with pytest.raises(grpc.RpcError) as error:
        oq.create_game(client, "alice", oq.parse_time_control("0s+0"))
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "time_control.real_time.initial" in error.value.details()


def test_timed_game_between_two_clients_with_the_servers_clocks(client, second_client):
    increment = 2_000
    played, watcher, players = start_timed_game(client, second_client, "3+2")

    # The time control comes back as asked, and a clock reading with both players' full time,
    # none running while the game waits.
    created = played.game  # after JoinGame; CreateGame's game is checked through the snapshot
    assert oq.format_time_control(created.time_control) == "3+2"
    snapshot_game = watcher.snapshots[0].snapshot.game
    assert snapshot_game.status == game_pb2.GAME_STATUS_WAITING_FOR_PLAYERS
    assert snapshot_game.HasField("clocks")
    assert (left(snapshot_game.clocks, FIRST), left(snapshot_game.clocks, SECOND)) == (180_000, 180_000)
    assert snapshot_game.clocks.running == rules_pb2.PLAYER_UNSPECIFIED
    assert created.status == game_pb2.GAME_STATUS_ACTIVE and created.HasField("clocks")

    final = oq.play_online(players, played.game, random.Random(11))
    watcher.join(timeout=60)
    assert final.status == game_pb2.GAME_STATUS_FINISHED
    assert final.result.end_reason != rules_pb2.END_REASON_TIMEOUT, "nobody should flag in a 3+2 played in ms"
    assert final.move_count > 4, "game too short to check the clocks"

    # Every turn, move and the end carry clocks.
    events = watcher.events
    for event in events:
        if event.WhichOneof("kind") in ("turn_started", "move_played", "game_over"):
            assert oq.clocks_of(event) is not None, f"event #{event.sequence} has no clocks"

    turns = [e.turn_started for e in events if e.HasField("turn_started")]
    moves = [e.move_played for e in events if e.HasField("move_played")]
    assert len(moves) == final.move_count
    assert len(turns) == len(moves)  # a turn before every move; none after the last

    # Each player's first move has its own limit and no clock runs: both turns show no running
    # clock but a deadline.
    for turn in turns[:2]:
        assert turn.clocks.running == rules_pb2.PLAYER_UNSPECIFIED
        assert turn.clocks.HasField("deadline")
    # From then on the mover's clock runs, and only theirs.
    for number, (turn, move) in enumerate(zip(turns, moves), start=1):
        mover = move.record.player
        assert turn.player == mover
        if number <= 2:
            continue
        assert turn.clocks.running == mover, f"move {number}"
        before, after = left(turn.clocks, mover), left(move.clocks, mover)
        # The mover was charged the time from the turn's start to the move's acceptance, then
        # got the increment: charged >= 0, and at most the time between the two readings
        # (plus a little for when the turn's reading was made).
        charged = before + increment - after
        between = ms(move.clocks.measured_at) - ms(turn.clocks.measured_at)
        assert 0 <= charged <= between + 50, f"move {number}: charged {charged} ms, {between} ms between readings"
        # The opponent's time does not move during the mover's turn.
        assert left(move.clocks, OTHER[mover]) == left(turn.clocks, OTHER[mover]), f"move {number}"

    # The end: clocks still there, none running.
    over = watcher.game_over
    assert over.HasField("clocks") and over.clocks.running == rules_pb2.PLAYER_UNSPECIFIED
    assert over.result == final.result
    got = client.games.GetGame(game_pb2.GetGameRequest(game_id=final.id), timeout=oq.CALL_TIMEOUT).game
    assert got.HasField("clocks") and not got.clocks.HasField("deadline")


def test_the_flag_falls_on_the_server_without_anyone_calling(client, second_client):
    # 1 second each, no increment: after both first moves (which have their own limit) FIRST's
    # clock runs, nobody moves, and the server ends the game on time by itself.
    played, watcher, players = start_timed_game(client, second_client, "1s+0")
    game = oq.play_online(players, played.game, random.Random(3), max_moves=2)
    assert game.status == game_pb2.GAME_STATUS_ACTIVE and game.position.to_move == FIRST
    assert game.clocks.running == FIRST

    watcher.wait_until(lambda w: w.game_over is not None, timeout=5)
    watcher.join(timeout=5)
    over = watcher.game_over
    assert over.result.end_reason == rules_pb2.END_REASON_TIMEOUT
    assert over.result.winner == SECOND
    assert left(over.clocks, FIRST) == 0 and left(over.clocks, SECOND) == 1_000
    # It fell on time: a second after FIRST's turn started, not much later.
    turn = next(e for e in reversed(watcher.events) if e.HasField("turn_started"))
    assert turn.turn_started.clocks.running == FIRST
    late = ms(watcher.events[-1].time) - ms(turn.turn_started.clocks.deadline)
    assert 0 <= late < 500, f"the flag fell {late} ms after the deadline"

    # A move now is refused: the game is over.
    with pytest.raises(grpc.RpcError) as error:
        oq.play_online(players, game, random.Random(3), max_moves=1)
    assert oq.error_reason(error.value) in ("ERROR_REASON_GAME_OVER", "ERROR_REASON_TIME_UP")


def test_two_seekers_are_paired_in_one_game(client, second_client):
    control = oq.parse_time_control(SEEK_CONTROL)
    alice = oq.seek(client, "alice", control)
    try:
        waiting = alice.wait_waiting()
        assert waiting.id and waiting.display_name == "alice"
        assert waiting.time_control == control and waiting.preset == "standard"
        listed = second_client.games.ListSeeks(game_pb2.ListSeeksRequest(), timeout=oq.CALL_TIMEOUT).seeks
        assert waiting.id in [s.id for s in listed]

        # bob's seek, while alice's stream is open, pairs at once: his first message is `paired`.
        bob = oq.seek(second_client, "bob", control)
        bob_paired = bob.wait_paired()
        alice_paired = alice.wait_paired()
        bob.wait_ended()
        alice.wait_ended()  # both streams end with OK after `paired`
    finally:
        alice.cancel()
    assert [m.WhichOneof("kind") for m in bob.messages] == ["paired"]
    assert [m.WhichOneof("kind") for m in alice.messages if not m.HasField("heartbeat")] == ["waiting", "paired"]

    # One game, two seats, two tokens.
    assert alice_paired.game.id == bob_paired.game.id
    assert {alice_paired.seat, bob_paired.seat} == {FIRST, SECOND}
    assert alice_paired.player_token and bob_paired.player_token
    assert alice_paired.player_token != bob_paired.player_token
    game = bob_paired.game
    assert game.status == game_pb2.GAME_STATUS_ACTIVE
    assert game.time_control == control and game.HasField("clocks")
    seats = {FIRST: game.first_seat, SECOND: game.second_seat}
    assert seats[alice_paired.seat].display_name == "alice" and seats[bob_paired.seat].display_name == "bob"
    # The seek is gone.
    listed = client.games.ListSeeks(game_pb2.ListSeeksRequest(), timeout=oq.CALL_TIMEOUT).seeks
    assert waiting.id not in [s.id for s in listed]

    # Each plays with the token their own stream gave them.
    players = [
        oq.SeatPlayer(client, alice_paired.seat, alice_paired.player_token, "alice"),
        oq.SeatPlayer(second_client, bob_paired.seat, bob_paired.player_token, "bob"),
    ]
    game = oq.play_online(players, game, random.Random(5), max_moves=4)
    assert game.move_count == 4
    mover = next(p for p in players if p.seat == game.position.to_move)
    resigned = client.games.Resign(
        game_pb2.ResignRequest(game_id=game.id), metadata=oq.bearer(mover.token), timeout=oq.CALL_TIMEOUT
    ).game
    assert resigned.status == game_pb2.GAME_STATUS_FINISHED and resigned.result.winner == OTHER[mover.seat]


def test_a_seek_is_accepted_by_id_and_withdrawn_by_cancelling(client, second_client):
    control = oq.parse_time_control(ACCEPT_CONTROL)
    alice = oq.seek(client, "alice", control)
    try:
        waiting = alice.wait_waiting()
        # bob picks alice's seek from the list and accepts it.
        listed = second_client.games.ListSeeks(game_pb2.ListSeeksRequest(), timeout=oq.CALL_TIMEOUT).seeks
        seek_id = next(s.id for s in listed if s.id == waiting.id)
        accepted = second_client.games.AcceptSeek(
            game_pb2.AcceptSeekRequest(seek_id=seek_id, display_name="bob"), timeout=oq.CALL_TIMEOUT
        )
        alice_paired = alice.wait_paired()
    finally:
        alice.cancel()
    assert accepted.game.id == alice_paired.game.id
    assert {accepted.seat, alice_paired.seat} == {FIRST, SECOND}

    # Taken seeks are gone: accepting again is NOT_FOUND.
    with pytest.raises(grpc.RpcError) as error:
        second_client.games.AcceptSeek(
            game_pb2.AcceptSeekRequest(seek_id=seek_id, display_name="carl"), timeout=oq.CALL_TIMEOUT
        )
    assert error.value.code() == grpc.StatusCode.NOT_FOUND
    assert oq.error_reason(error.value) == "ERROR_REASON_SEEK_NOT_FOUND"

    # Cancelling a waiting seek's stream withdraws it.
    again = oq.seek(client, "alice", control)
    withdrawn = again.wait_waiting().id
    again.cancel()
    deadline = time.monotonic() + 2
    while withdrawn in [s.id for s in client.games.ListSeeks(game_pb2.ListSeeksRequest(), timeout=oq.CALL_TIMEOUT).seeks]:
        assert time.monotonic() < deadline, "a cancelled seek is still listed after 2 s"
        time.sleep(0.02)

    # Leave nothing running: the game ends.
    client.games.AbortGame(
        game_pb2.AbortGameRequest(game_id=accepted.game.id),
        metadata=oq.bearer(accepted.player_token),
        timeout=oq.CALL_TIMEOUT,
    )


@pytest.mark.parametrize("scenario", ["timed", "seek"])
def test_online_script(server_addr, scenario):
    """online.py as an integrator would run it."""
    result = subprocess.run(
        [sys.executable, str(HERE / "online.py"), scenario, "--server", server_addr, "--time", "5+3", "--quiet"],
        capture_output=True,
        text=True,
        timeout=90,
        env=dict(os.environ),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "result" in result.stdout
