"""Accounts against the real server: registering, a rated game between two accounts changing
both ratings once, rated games by invitation, and API keys that stop working when revoked."""

from __future__ import annotations

import os
import pathlib
import random
import subprocess
import sys

import grpc
import pytest

import oanquan_client as oq
from oanquan_client import account_pb2, game_pb2, rules_pb2

HERE = pathlib.Path(__file__).resolve().parent
FIRST, SECOND = rules_pb2.PLAYER_FIRST, rules_pb2.PLAYER_SECOND
OTHER = {FIRST: SECOND, SECOND: FIRST}

# Rated seeks pair only with rated seeks of the same time control: one used by no other test
# (nor by the TypeScript suite, which may run against the same server). 9+5 is rapid: an
# estimated 9 + 40 × 5 s ≈ 12.3 minutes.
RATED_CONTROL = "9+5"


def rpc_error(call) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as error:
        call()
    return error.value


def get_player(client, username: str) -> account_pb2.PlayerProfile:
    return client.accounts.GetPlayer(account_pb2.GetPlayerRequest(username=username), timeout=oq.CALL_TIMEOUT).player


def player_games(client, username: str, result=account_pb2.PLAYER_RESULT_UNSPECIFIED) -> list[str]:
    request = account_pb2.ListPlayerGamesRequest(username=username, result=result)
    return [g.id for g in client.accounts.ListPlayerGames(request, timeout=oq.CALL_TIMEOUT).games]


@pytest.fixture()
def second_client(server_addr):
    with oq.Client(server_addr) as c:
        yield c


def test_random_usernames_are_valid_and_fresh():
    names = {oq.random_username() for _ in range(100)}
    assert len(names) == 100
    for name in names:
        assert 3 <= len(name) <= 20 and name.startswith("ex_") and name.replace("_", "").isalnum()


def test_register_gives_a_key_and_refuses_a_taken_or_bad_name(client):
    username = oq.random_username()
    account = oq.register(client, username)
    assert account.username == username
    assert account.api_key.startswith(f"oqk_{account.key_id}_")
    profile = get_player(client, username.upper())  # found by any case
    assert profile.username == username and list(profile.ratings) == []
    assert (profile.wins, profile.draws, profile.losses) == (0, 0, 0)
    me = client.accounts.GetMe(account_pb2.GetMeRequest(), metadata=oq.bearer(account.api_key), timeout=oq.CALL_TIMEOUT)
    assert me.player.username == username

    taken = rpc_error(lambda: oq.register(client, username.upper()))
    assert taken.code() == grpc.StatusCode.ALREADY_EXISTS
    assert oq.error_reason(taken) == "ERROR_REASON_USERNAME_TAKEN"
    bad = rpc_error(lambda: oq.register(client, "a b"))
    assert bad.code() == grpc.StatusCode.INVALID_ARGUMENT and "username" in bad.details()


def test_a_rated_game_between_two_accounts_changes_both_ratings(client, second_client):
    alice, bob = oq.register(client, oq.random_username()), oq.register(second_client, oq.random_username())
    control = oq.parse_time_control(RATED_CONTROL)

    # Two rated seeks, each with its account's key, pair into one rated game.
    alice_seek = oq.rated_seek(client, alice, control)
    try:
        waiting = alice_seek.wait_waiting()
        assert waiting.rated and waiting.account.username == alice.username
        bob_paired = oq.rated_seek(second_client, bob, control).wait_paired()
        alice_paired = alice_seek.wait_paired()
    finally:
        alice_seek.cancel()
    game = bob_paired.game
    assert alice_paired.game.id == game.id and game.rated
    assert {alice_paired.seat, bob_paired.seat} == {FIRST, SECOND}
    name_of = {alice_paired.seat: alice.username, bob_paired.seat: bob.username}
    for seat, shown in ((FIRST, game.first_seat.account), (SECOND, game.second_seat.account)):
        assert (shown.username, shown.rating, shown.provisional) == (name_of[seat], 1500, True)

    # They play with their API keys in place of the seat tokens; the player to move resigns.
    watcher = oq.EventFollower(client, game.id).start()
    watcher.wait_until(lambda w: len(w.snapshots) == 1)
    players = [
        oq.SeatPlayer(client, alice_paired.seat, alice.api_key, alice.username),
        oq.SeatPlayer(second_client, bob_paired.seat, bob.api_key, bob.username),
    ]
    game = oq.play_online(players, game, random.Random(13), max_moves=4)
    assert game.move_count == 4 and game.status == game_pb2.GAME_STATUS_ACTIVE
    loser = next(p for p in players if p.seat == game.position.to_move)
    client.games.Resign(
        game_pb2.ResignRequest(game_id=game.id), metadata=oq.bearer(loser.token), timeout=oq.CALL_TIMEOUT
    )
    watcher.join(timeout=30)

    # GameOver: both ratings before and after; the winner's went up, the loser's down.
    result = watcher.game_over.result
    assert result.end_reason == rules_pb2.END_REASON_RESIGNATION and result.winner == OTHER[loser.seat]
    changes = oq.rating_changes(result)
    assert set(changes) == {FIRST, SECOND}
    winner, lost = changes[result.winner], changes[loser.seat]
    assert winner.before == lost.before == 1500
    assert winner.after > winner.before and lost.after < lost.before
    assert winner.provisional and lost.provisional
    # GetGame's result is the same, computed once.
    got = client.games.GetGame(game_pb2.GetGameRequest(game_id=game.id), timeout=oq.CALL_TIMEOUT).game
    assert got.result.first_rating == result.first_rating and got.result.second_rating == result.second_rating

    # The profiles show the ratings GameOver announced, at the game's speed, still provisional.
    for seat, username in name_of.items():
        profile = get_player(second_client, username)
        assert len(profile.ratings) == 1
        rating = profile.ratings[0]
        assert rating.speed == account_pb2.SPEED_RAPID
        assert rating.rating == changes[seat].after
        assert (rating.games, rating.provisional) == (1, True)
        won = seat == result.winner
        assert (profile.wins, profile.draws, profile.losses) == ((1, 0, 0) if won else (0, 0, 1))
        # The game is in the player's history, under the right result filter only.
        assert player_games(client, username) == [game.id]
        mine, other = (
            (account_pb2.PLAYER_RESULT_WIN, account_pb2.PLAYER_RESULT_LOSS)
            if won
            else (account_pb2.PLAYER_RESULT_LOSS, account_pb2.PLAYER_RESULT_WIN)
        )
        assert player_games(client, username, mine) == [game.id]
        assert player_games(client, username, other) == []

    # Provisional ratings stay off the leaderboard.
    board = client.accounts.Leaderboard(
        account_pb2.LeaderboardRequest(speed=account_pb2.SPEED_RAPID, page_size=100), timeout=oq.CALL_TIMEOUT
    )
    assert not {e.username for e in board.entries} & set(name_of.values())


def test_a_rated_game_by_invitation_needs_two_accounts(client, second_client):
    alice, bob = oq.register(client, oq.random_username()), oq.register(second_client, oq.random_username())
    carl = oq.register(client, oq.random_username())
    request = game_pb2.CreateGameRequest(
        rules=rules_pb2.RulesSpec(preset="standard"),
        seat=FIRST,
        time_control=oq.parse_time_control("5+3"),
        rated=True,
    )

    # Without a key a rated game cannot be created.
    anonymous = rpc_error(lambda: client.games.CreateGame(request, timeout=oq.CALL_TIMEOUT))
    assert anonymous.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert oq.error_reason(anonymous) == "ERROR_REASON_RATED_NEEDS_ACCOUNT"

    created = client.games.CreateGame(request, metadata=oq.bearer(alice.api_key), timeout=oq.CALL_TIMEOUT)
    assert created.game.rated and created.game.first_seat.account.username == alice.username
    game_id = created.game.id
    # Only an account may join it.
    join = game_pb2.JoinGameRequest(game_id=game_id, display_name="anon")
    refused = rpc_error(lambda: second_client.games.JoinGame(join, timeout=oq.CALL_TIMEOUT))
    assert oq.error_reason(refused) == "ERROR_REASON_RATED_NEEDS_ACCOUNT"
    joined = second_client.games.JoinGame(
        game_pb2.JoinGameRequest(game_id=game_id), metadata=oq.bearer(bob.api_key), timeout=oq.CALL_TIMEOUT
    )
    assert joined.game.status == game_pb2.GAME_STATUS_ACTIVE
    assert joined.game.second_seat.account.username == bob.username

    # A key of an account without a seat here is refused on the game's calls.
    abort = game_pb2.AbortGameRequest(game_id=game_id)
    stranger = rpc_error(
        lambda: client.games.AbortGame(abort, metadata=oq.bearer(carl.api_key), timeout=oq.CALL_TIMEOUT)
    )
    assert stranger.code() == grpc.StatusCode.PERMISSION_DENIED
    assert oq.error_reason(stranger) == "ERROR_REASON_WRONG_TOKEN"

    # bob aborts it with his seat token (it still works next to the key): no result, and no
    # rating changes.
    aborted = second_client.games.AbortGame(abort, metadata=oq.bearer(joined.player_token), timeout=oq.CALL_TIMEOUT)
    assert aborted.game.status == game_pb2.GAME_STATUS_ABORTED
    assert oq.rating_changes(aborted.game.result) == {}
    for account in (alice, bob):
        assert list(get_player(client, account.username).ratings) == []


def test_a_revoked_key_is_refused_from_the_next_call(client):
    account = oq.register(client, oq.random_username())
    made = client.accounts.CreateApiKey(
        account_pb2.CreateApiKeyRequest(), metadata=oq.bearer(account.api_key), timeout=oq.CALL_TIMEOUT
    )
    spare = made.api_key
    get_me = account_pb2.GetMeRequest()
    me = client.accounts.GetMe(get_me, metadata=oq.bearer(spare), timeout=oq.CALL_TIMEOUT)
    assert me.player.username == account.username

    revoke = account_pb2.RevokeApiKeyRequest(key_id=made.key.id)
    client.accounts.RevokeApiKey(revoke, metadata=oq.bearer(account.api_key), timeout=oq.CALL_TIMEOUT)
    revoked = rpc_error(lambda: client.accounts.GetMe(get_me, metadata=oq.bearer(spare), timeout=oq.CALL_TIMEOUT))
    assert revoked.code() == grpc.StatusCode.UNAUTHENTICATED
    assert oq.error_reason(revoked) == "ERROR_REASON_BAD_API_KEY"
    # Nor can it play as the account.
    rated = game_pb2.CreateGameRequest(seat=FIRST, time_control=oq.parse_time_control("5+3"), rated=True)
    refused = rpc_error(lambda: client.games.CreateGame(rated, metadata=oq.bearer(spare), timeout=oq.CALL_TIMEOUT))
    assert refused.code() == grpc.StatusCode.UNAUTHENTICATED

    # The other key still works, and lists both keys, the revoked one with its revocation time.
    keys = client.accounts.ListApiKeys(
        account_pb2.ListApiKeysRequest(), metadata=oq.bearer(account.api_key), timeout=oq.CALL_TIMEOUT
    ).keys
    assert [(k.id, k.HasField("revoke_time")) for k in keys] == [(account.key_id, False), (made.key.id, True)]
    # A made-up key is refused the same way.
    unknown = rpc_error(
        lambda: client.accounts.GetMe(get_me, metadata=oq.bearer("oqk_nope"), timeout=oq.CALL_TIMEOUT)
    )
    assert unknown.code() == grpc.StatusCode.UNAUTHENTICATED


def test_accounts_script(server_addr):
    """accounts.py as an integrator would run it."""
    result = subprocess.run(
        [sys.executable, str(HERE / "accounts.py"), "--server", server_addr, "--time", "9+7", "--quiet"],
        capture_output=True,
        text=True,
        timeout=90,
        env=dict(os.environ),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "game over" in result.stdout and " -> " in result.stdout
