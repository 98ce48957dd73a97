"""A small Ô Ăn Quan client on top of the generated gRPC stubs.

It shows the things every integrator needs:

* calling GameService/RulesService with deadlines and the `authorization: Bearer <token>`
  metadata (`Client`, `bearer`),
* reading the machine-readable reason of a failed call (`error_reason`),
* following a game's event stream and resuming it after a disconnect without gaps or
  duplicates (`EventFollower`),
* playing on the clock: time controls (`parse_time_control`) and the server's clocks
  (`Clocks`, `format_clocks`), with each seat played through its own client (`SeatPlayer`),
* finding an opponent with a seek (`SeekCall`, `seek`),
* accounts and rated games: registering (`register`, `Account`), playing as the account with
  its API key (`rated_seek`, the key as bearer on the account's seats), and reading rating
  changes and profiles (`format_rating`, `format_change`, `rating_changes`).

Stubs come from `python generate.py` (into ./gen, or the directory in $OANQUAN_PY_GEN).
"""

from __future__ import annotations

import os
import pathlib
import random
import secrets
import sys
import threading
import time
from dataclasses import dataclass, field

_GEN = pathlib.Path(os.environ.get("OANQUAN_PY_GEN", pathlib.Path(__file__).resolve().parent / "gen"))
if not (_GEN / "oanquan" / "v1" / "game_pb2.py").exists():
    raise ImportError(f"no generated stubs in {_GEN}: run `python generate.py` first")
if str(_GEN) not in sys.path:
    sys.path.insert(0, str(_GEN))

import grpc  # noqa: E402
from google.rpc import error_details_pb2  # noqa: E402
from grpc_status import rpc_status  # noqa: E402

from oanquan.v1 import account_pb2, account_pb2_grpc, game_pb2, game_pb2_grpc, rules_pb2, rules_pb2_grpc  # noqa: E402

__all__ = [
    "Account",
    "Client",
    "EventFollower",
    "GapError",
    "PlayedGame",
    "SeatPlayer",
    "SeekCall",
    "account_pb2",
    "bearer",
    "clocks_of",
    "create_game",
    "error_reason",
    "format_change",
    "format_clocks",
    "format_rating",
    "format_time_control",
    "join_game",
    "parse_time_control",
    "play_move",
    "game_pb2",
    "play_online",
    "play_self_game",
    "random_username",
    "rated_seek",
    "rating_changes",
    "register",
    "remaining",
    "rules_pb2",
    "seek",
]

# Deadline for every unary call, in seconds. Always set one: a call without a deadline can
# hang forever on a dead connection.
CALL_TIMEOUT = 10.0


def bearer(token: str) -> list[tuple[str, str]]:
    """gRPC metadata for PlayMove, Resign and AbortGame (a seat token, or the API key of the
    account in the seat), and for calls made as an account (an API key)."""
    return [("authorization", f"Bearer {token}")]


def error_reason(error: grpc.RpcError) -> str | None:
    """The google.rpc.ErrorInfo reason of a failed call ("ERROR_REASON_NOT_YOUR_TURN", ...).

    Branch on this, not on the message. None when the status carries no ErrorInfo (e.g.
    INVALID_ARGUMENT carries a google.rpc.BadRequest instead).
    """
    status = rpc_status.from_call(error)
    if status is None:
        return None
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info.reason
    return None


class Client:
    """One channel to the server and the three service stubs."""

    def __init__(self, target: str):
        # The server speaks gRPC over cleartext HTTP/2. Proxies are disabled so that an
        # http_proxy variable in the environment cannot capture a localhost target.
        self.channel = grpc.insecure_channel(target, options=[("grpc.enable_http_proxy", 0)])
        grpc.channel_ready_future(self.channel).result(timeout=CALL_TIMEOUT)
        self.games = game_pb2_grpc.GameServiceStub(self.channel)
        self.rules = rules_pb2_grpc.RulesServiceStub(self.channel)
        self.accounts = account_pb2_grpc.AccountServiceStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class GapError(AssertionError):
    """The event stream skipped or repeated a sequence number (a server bug)."""


class EventFollower:
    """Follows GameService.WatchGame for one game, in a background thread.

    * The first connection has no `after_sequence`: the server starts with a Snapshot.
    * Every real event must have sequence = last + 1 (else GapError). Snapshot and
      Heartbeat carry the sequence of the last real event they reflect and are not counted;
      a Snapshot replaces whatever state we had.
    * After a disconnect we reconnect with `after_sequence = last sequence seen`, and the
      server sends exactly the missed events (or a fresh Snapshot if its log no longer has
      them).
    * The stream ends with status OK after GameOver.

    `drop()` cancels the current stream, as a network failure would, and holds off the
    reconnection until `resume()`, so a test can make sure events are missed meanwhile.
    """

    def __init__(self, client: Client, game_id: str, on_event=None):
        self._client = client
        self.game_id = game_id
        self._on_event = on_event
        self.last_sequence = 0
        self.events: list[game_pb2.GameEvent] = []  # real events, in order
        self.snapshots: list[game_pb2.GameEvent] = []
        self.connections: list[int] = []  # after_sequence used by each connection (0 = none)
        self.first_sequence_per_connection: list[int] = []
        self.disconnected_at: list[int] = []  # last sequence seen when each stream broke
        self.game_over: game_pb2.GameEvent.GameOver | None = None
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._call = None
        self._held = False
        self._resume = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"watch-{game_id}", daemon=True)

    # -- control, from any thread ---------------------------------------------------------

    def start(self) -> EventFollower:
        self._thread.start()
        return self

    def wait_until(self, predicate, timeout: float = CALL_TIMEOUT) -> None:
        """Blocks until predicate(self) holds (checked on every event); raises on timeout."""
        with self._changed:
            if not self._changed.wait_for(lambda: predicate(self) or self.error is not None, timeout):
                raise TimeoutError(f"watcher of {self.game_id}: condition not met within {timeout}s")
        if self.error is not None:
            raise self.error

    def drop(self) -> None:
        """Cancels the current stream and does not reconnect until resume()."""
        with self._lock:
            self._held = True
            self._resume.clear()
            call = self._call
        if call is not None:
            call.cancel()

    def resume(self) -> None:
        self._resume.set()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)
        if self._thread.is_alive():
            self.drop()
            raise TimeoutError(f"watcher of {self.game_id} still running after {timeout}s")
        if self.error is not None:
            raise self.error

    # -- the watching thread ----------------------------------------------------------------

    def _run(self) -> None:
        try:
            while self.game_over is None:
                if self._held:
                    if not self._resume.wait(timeout=60):
                        raise TimeoutError("held disconnected for more than 60s")
                    self._held = False
                self._stream_once()
        except BaseException as error:  # noqa: BLE001 - reported to the caller by join()
            with self._changed:
                self.error = error
                self._changed.notify_all()

    def _stream_once(self) -> None:
        request = game_pb2.WatchGameRequest(game_id=self.game_id)
        if self.last_sequence > 0:
            request.after_sequence = self.last_sequence
        # No deadline: a watch lasts as long as the game. Heartbeats (about every 15s) keep an
        # idle stream alive; a production client would also treat a long silence as a drop.
        call = self._client.games.WatchGame(request)
        with self._lock:
            if self._held:  # drop() raced with the connect
                call.cancel()
                return
            self._call = call
            self.connections.append(request.after_sequence)
        first = True
        try:
            for response in call:
                if first:
                    self.first_sequence_per_connection.append(response.event.sequence)
                    first = False
                self._accept(response.event)
        except grpc.RpcError as error:
            if error.code() == grpc.StatusCode.CANCELLED and self._held:
                self.disconnected_at.append(self.last_sequence)
                return  # our own drop(): reconnect after resume()
            if error.code() == grpc.StatusCode.UNAVAILABLE:
                self.disconnected_at.append(self.last_sequence)
                time.sleep(0.5)  # a real disconnect: resume from last_sequence shortly
                return
            raise
        except BaseException:
            call.cancel()  # e.g. GapError: stop the stream before reporting
            raise
        finally:
            with self._lock:
                self._call = None
        if self.game_over is None:
            raise GapError(f"stream ended (OK) at sequence {self.last_sequence} without GameOver")

    def _accept(self, event: game_pb2.GameEvent) -> None:
        kind = event.WhichOneof("kind")
        with self._changed:
            if kind == "heartbeat":
                pass
            elif kind == "snapshot":
                # Full state; the next real event is sequence + 1.
                self.snapshots.append(event)
                self.last_sequence = event.sequence
                if event.snapshot.game.status in (game_pb2.GAME_STATUS_FINISHED, game_pb2.GAME_STATUS_ABORTED):
                    self.game_over = game_pb2.GameEvent.GameOver(result=event.snapshot.game.result)
            else:
                if event.sequence != self.last_sequence + 1:
                    raise GapError(f"expected sequence {self.last_sequence + 1}, got {event.sequence} ({kind})")
                self.events.append(event)
                self.last_sequence = event.sequence
                if kind == "game_over":
                    self.game_over = event.game_over
            self._changed.notify_all()
        if self._on_event is not None:
            self._on_event(event)


@dataclass
class PlayedGame:
    game: game_pb2.Game
    tokens: dict[int, str]  # Player -> player token
    moves: list[game_pb2.MoveRecord] = field(default_factory=list)


def create_game(
    client: Client, name: str = "alice", time_control: game_pb2.TimeControl | None = None
) -> PlayedGame:
    """Creates a game with the standard preset, seated as FIRST (who moves first).

    `time_control` unset or empty = untimed (see parse_time_control).
    """
    created = client.games.CreateGame(
        game_pb2.CreateGameRequest(
            rules=rules_pb2.RulesSpec(preset="standard"),
            seat=rules_pb2.PLAYER_FIRST,
            display_name=name,
            time_control=time_control,
        ),
        timeout=CALL_TIMEOUT,
    )
    return PlayedGame(game=created.game, tokens={created.seat: created.player_token})


def join_game(client: Client, played: PlayedGame, name: str = "bob") -> None:
    """Takes the free seat (SECOND); the game becomes ACTIVE."""
    joined = client.games.JoinGame(
        game_pb2.JoinGameRequest(game_id=played.game.id, display_name=name), timeout=CALL_TIMEOUT
    )
    played.tokens[joined.seat] = joined.player_token
    played.game = joined.game


def play_move(client: Client, played: PlayedGame, rng: random.Random) -> game_pb2.MoveRecord:
    """Asks RulesService for the legal moves of the game's position, plays one at random."""
    game = played.game
    legal = client.rules.LegalMoves(
        rules_pb2.LegalMovesRequest(rules=rules_pb2.RulesSpec(rule_set=game.rule_set), position=game.position),
        timeout=CALL_TIMEOUT,
    ).moves
    if not legal:
        raise AssertionError(f"no legal move in an active game: {game.position.notation}")
    move = rng.choice(list(legal))
    response = client.games.PlayMove(
        # expected_ply guards against playing on a position that changed meanwhile.
        game_pb2.PlayMoveRequest(game_id=game.id, move=move, expected_ply=game.position.ply),
        metadata=bearer(played.tokens[game.position.to_move]),
        timeout=CALL_TIMEOUT,
    )
    played.game = response.game
    played.moves.append(response.record)
    return response.record


def play_self_game(client: Client, played: PlayedGame, seed: int = 7, on_move=None) -> game_pb2.Game:
    """Plays both seats until the game is over; returns the final game."""
    rng = random.Random(seed)
    while played.game.status == game_pb2.GAME_STATUS_ACTIVE:
        record = play_move(client, played, rng)
        if on_move is not None:
            on_move(record)
    return played.game


# -- playing on the clock ---------------------------------------------------------------------


def parse_time_control(text: str) -> game_pb2.TimeControl:
    """A time control as players write it.

    * "3+2": 3 minutes each, 2 seconds added after each move (Fischer, real time);
    * "30s+0": 30 seconds each (seconds instead of minutes: an "s" after the first number);
    * "2d", "12h", "30m": correspondence, a fixed time for every move;
    * "" or "untimed": no clock (an empty TimeControl, which the server reads as unset).

    The server checks the ranges (1 s to 3 h initial, 0 to 180 s increment, 1 minute to 30 days
    per move) and answers INVALID_ARGUMENT naming the field.
    """
    text = text.strip().lower()
    if text in ("", "untimed"):
        return game_pb2.TimeControl()
    try:
        if "+" in text:
            initial, increment = text.split("+", 1)
            initial_seconds = float(initial[:-1]) if initial.endswith("s") else float(initial) * 60
            control = game_pb2.TimeControl()
            control.real_time.initial.FromMilliseconds(round(initial_seconds * 1000))
            control.real_time.increment.FromMilliseconds(round(float(increment) * 1000))
            return control
        unit = {"d": 86_400, "h": 3_600, "m": 60}[text[-1]]
        control = game_pb2.TimeControl()
        control.correspondence.per_move.FromSeconds(round(float(text[:-1]) * unit))
        return control
    except (KeyError, ValueError, IndexError) as error:
        raise ValueError(f"time control {text!r}: expected e.g. 3+2, 30s+0, 2d or untimed") from error


def format_time_control(control: game_pb2.TimeControl) -> str:
    """The inverse of parse_time_control, for display."""
    kind = control.WhichOneof("kind")
    if kind == "real_time":
        initial = control.real_time.initial.ToMilliseconds() / 1000
        increment = control.real_time.increment.ToMilliseconds() / 1000
        first = f"{initial / 60:g}" if initial % 60 == 0 else f"{initial:g}s"
        return f"{first}+{increment:g}"
    if kind == "correspondence":
        seconds = control.correspondence.per_move.ToSeconds()
        for unit, size in (("d", 86_400), ("h", 3_600)):
            if seconds % size == 0:
                return f"{seconds // size}{unit} per move"
        return f"{seconds / 60:g}m per move"
    return "untimed"


def clocks_of(event: game_pb2.GameEvent) -> game_pb2.Clocks | None:
    """The clocks an event carries (TurnStarted, MovePlayed, GameOver, a Snapshot's game), or
    None for events without clocks and for untimed games."""
    kind = event.WhichOneof("kind")
    if kind in ("turn_started", "move_played", "game_over"):
        holder = getattr(event, kind)
    elif kind == "snapshot":
        holder = event.snapshot.game
    else:
        return None
    return holder.clocks if holder.HasField("clocks") else None


def remaining(clocks: game_pb2.Clocks, player: int, received_at: float | None = None) -> float:
    """`player`'s time left in seconds.

    With `received_at` (your own time.monotonic() when the message arrived) this is the time
    left now, for a ticking display: the running player's clock goes down by the time elapsed
    on *your* clock since then. Never compare `measured_at` with your own wall clock: the
    two machines' clocks may differ.
    """
    field = clocks.first_remaining if player == rules_pb2.PLAYER_FIRST else clocks.second_remaining
    left = field.ToMilliseconds() / 1000
    if received_at is not None and clocks.running == player:
        left -= time.monotonic() - received_at
    return max(left, 0.0)


def format_clocks(clocks: game_pb2.Clocks) -> str:
    """"FIRST 2:58.412 | SECOND 3:00.000, SECOND's clock running"."""

    def mmss(seconds: float) -> str:
        return f"{int(seconds // 60)}:{seconds % 60:06.3f}"

    text = (
        f"FIRST {mmss(remaining(clocks, rules_pb2.PLAYER_FIRST))}"
        f" | SECOND {mmss(remaining(clocks, rules_pb2.PLAYER_SECOND))}"
    )
    if clocks.running == rules_pb2.PLAYER_UNSPECIFIED:
        return text + ", no clock running"
    return text + f", {rules_pb2.Player.Name(clocks.running).removeprefix('PLAYER_')}'s clock running"


@dataclass
class SeatPlayer:
    """One person at the board: their own client (channel), their seat and its token."""

    client: Client
    seat: int
    token: str
    name: str = ""


def play_online(
    players: list[SeatPlayer],
    game: game_pb2.Game,
    rng: random.Random,
    max_moves: int | None = None,
    on_move=None,
) -> game_pb2.Game:
    """Plays the game between two SeatPlayers, each move through the mover's own client and
    token, until it is over or `max_moves` were played here; returns the game as it is then.

    A real client would wait for TurnStarted on its event stream before moving; here both
    players live in one process, so the previous move's response says whose turn it is.
    """
    by_seat = {player.seat: player for player in players}
    if set(by_seat) != {rules_pb2.PLAYER_FIRST, rules_pb2.PLAYER_SECOND}:
        raise ValueError(f"need one player per seat, got seats {sorted(by_seat)}")
    played = 0
    while game.status == game_pb2.GAME_STATUS_ACTIVE and (max_moves is None or played < max_moves):
        mover = by_seat[game.position.to_move]
        legal = mover.client.rules.LegalMoves(
            rules_pb2.LegalMovesRequest(rules=rules_pb2.RulesSpec(rule_set=game.rule_set), position=game.position),
            timeout=CALL_TIMEOUT,
        ).moves
        if not legal:
            raise AssertionError(f"no legal move in an active game: {game.position.notation}")
        response = mover.client.games.PlayMove(
            game_pb2.PlayMoveRequest(game_id=game.id, move=rng.choice(list(legal)), expected_ply=game.position.ply),
            metadata=bearer(mover.token),
            timeout=CALL_TIMEOUT,
        )
        game = response.game
        played += 1
        if on_move is not None:
            on_move(response.record, game)
    return game


# -- seeks ------------------------------------------------------------------------------------


class SeekCall:
    """One GameService.Seek stream, read in a background thread.

    The stream sends `waiting` (the open seek, as ListSeeks shows it) unless a compatible seek
    was already waiting, heartbeats while it waits, then `paired` (the game and the caller's
    seat and token), and ends with OK. cancel() withdraws the seek.
    """

    def __init__(
        self,
        client: Client,
        request: game_pb2.SeekRequest,
        timeout: float = 60.0,
        metadata: list[tuple[str, str]] | None = None,
    ):
        # A deadline bounds the wait for an opponent: when it passes the call is cancelled,
        # which withdraws the seek like cancel() does. `metadata`: bearer(api_key) to seek as
        # an account.
        self._call = client.games.Seek(request, timeout=timeout, metadata=metadata)
        self.messages: list[game_pb2.SeekResponse] = []
        self.waiting: game_pb2.Seek | None = None
        self.paired: game_pb2.SeekResponse.Paired | None = None
        self.error: BaseException | None = None
        self.ended = False  # the stream ended (OK or not)
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="seek", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for response in self._call:
                with self._changed:
                    self.messages.append(response)
                    kind = response.WhichOneof("kind")
                    if kind == "waiting":
                        self.waiting = response.waiting
                    elif kind == "paired":
                        self.paired = response.paired
                    self._changed.notify_all()
        except BaseException as error:  # noqa: BLE001 - reported by wait_*()
            with self._changed:
                self.error = error
        finally:
            with self._changed:
                self.ended = True
                self._changed.notify_all()

    def _wait(self, predicate, what: str, timeout: float):
        with self._changed:
            if not self._changed.wait_for(lambda: predicate() or self.ended, timeout):
                raise TimeoutError(f"seek: no {what} within {timeout}s")
            if not predicate():
                raise self.error or AssertionError(f"seek stream ended without {what}")

    def wait_waiting(self, timeout: float = CALL_TIMEOUT) -> game_pb2.Seek:
        """The open seek (only when no compatible seek was waiting before this one)."""
        self._wait(lambda: self.waiting is not None or self.paired is not None, "waiting", timeout)
        if self.waiting is None:
            raise AssertionError("paired at once: this seek never waited")
        return self.waiting

    def wait_paired(self, timeout: float = CALL_TIMEOUT) -> game_pb2.SeekResponse.Paired:
        self._wait(lambda: self.paired is not None, "paired", timeout)
        return self.paired

    def wait_ended(self, timeout: float = CALL_TIMEOUT) -> None:
        """Waits for the end of the stream; raises if it ended with an error."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"seek stream still open after {timeout}s")
        if self.error is not None:
            raise self.error

    def cancel(self) -> None:
        """Withdraws the seek (if still waiting) by cancelling the stream."""
        self._call.cancel()
        self._thread.join(CALL_TIMEOUT)


def seek(
    client: Client, name: str, time_control: game_pb2.TimeControl | None = None, preset: str = "standard"
) -> SeekCall:
    """Starts seeking an opponent for `preset` rules and `time_control` (unset = untimed)."""
    return SeekCall(
        client,
        game_pb2.SeekRequest(
            rules=rules_pb2.RulesSpec(preset=preset), time_control=time_control, display_name=name
        ),
    )


# -- accounts and rated games -----------------------------------------------------------------


@dataclass
class Account:
    """A registered account and its API key (shown once by Register: keep it)."""

    username: str
    api_key: str
    key_id: str


def random_username(prefix: str = "ex_") -> str:
    """A fresh username for a run: names are unique for good (ignoring case and look-alike
    letters), so a fixed one would be taken from the second run on. 3–20 letters, digits,
    `_` and `-`; here `prefix` + 8 hex digits."""
    return prefix + secrets.token_hex(4)


def register(client: Client, username: str) -> Account:
    """AccountService.Register: the new account and its first API key (`oqk_…`)."""
    response = client.accounts.Register(account_pb2.RegisterRequest(username=username), timeout=CALL_TIMEOUT)
    return Account(username=response.player.username, api_key=response.api_key, key_id=response.key.id)


def rated_seek(
    client: Client,
    account: Account,
    time_control: game_pb2.TimeControl,
    rating_range: tuple[int, int] | None = None,
    preset: str = "standard",
) -> SeekCall:
    """Seeks a rated game as `account` (its API key as bearer). Rated seeks need a time control
    and pair only with rated seeks of other accounts; `rating_range` (min, max) limits the
    opponent's rating at the game's speed."""
    request = game_pb2.SeekRequest(rules=rules_pb2.RulesSpec(preset=preset), time_control=time_control, rated=True)
    if rating_range is not None:
        request.rating_range.min, request.rating_range.max = rating_range
    return SeekCall(client, request, metadata=bearer(account.api_key))


def format_rating(rating: int, provisional: bool) -> str:
    """"1500?": a provisional rating is shown with a question mark."""
    return f"{rating}{'?' if provisional else ''}"


def format_change(change: game_pb2.RatingChange) -> str:
    """"1500 -> 1662? (+162)". Only the rating after the game says whether it is provisional."""
    return f"{change.before} -> {format_rating(change.after, change.provisional)} ({change.after - change.before:+d})"


def rating_changes(result: game_pb2.GameResult) -> dict[int, game_pb2.RatingChange]:
    """Player -> rating before and after, from a rated game's result (GameOver, GetGame);
    empty for an unrated or aborted game."""
    changes = {}
    if result.HasField("first_rating"):
        changes[rules_pb2.PLAYER_FIRST] = result.first_rating
    if result.HasField("second_rating"):
        changes[rules_pb2.PLAYER_SECOND] = result.second_rating
    return changes
