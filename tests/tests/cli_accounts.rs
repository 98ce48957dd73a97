//! Accounts and ratings through the real `oanquan` CLI and `oanquan-server`: registering (the
//! API key kept in a private file, never printed), profiles, a rated game paired by seeks that
//! changes both ratings, game histories, the leaderboard, key revocation, and anonymous play
//! next to it all.

use std::path::Path;

use oanquan_e2e::{CliProcess, Lines, Output, Server, cli_command, config_dir, run_cli};
use serde_json::Value;

fn json_of(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

/// `lines.follow`, the line only.
fn follow(lines: &mut Lines, who: &str, pred: impl Fn(&str) -> bool) -> String {
    lines.follow(who, pred).1
}

/// The API key stored in `dir`'s account file.
fn stored_key(dir: &Path) -> String {
    let file = json_of(&std::fs::read_to_string(dir.join("account.json")).expect("account file"));
    file["accounts"][0]["api_key"]
        .as_str()
        .expect("api_key")
        .to_owned()
}

/// Runs the CLI and checks its exit code.
fn ok(url: &str, dir: &Path, args: &[&str]) -> Output {
    let out = run_cli(url, dir, args);
    assert_eq!(out.code, Some(0), "{args:?}: {out:?}");
    out
}

fn register(url: &str, dir: &Path, name: &str) -> Output {
    let out = ok(url, dir, &["register", name]);
    let key = stored_key(dir);
    assert!(key.starts_with("oqk_"), "{key}");
    // The key goes to the file only.
    assert!(
        !out.stdout.contains(&key) && !out.stderr.contains(&key),
        "{out:?}"
    );
    out
}

/// The game id and seat from `paired into game ID as the SEAT player`.
fn paired(line: &str) -> (String, String) {
    let rest = line
        .strip_prefix("paired into game ")
        .expect("a paired line");
    let (id, seat) = rest.split_once(" as the ").expect("as the");
    (id.to_owned(), seat.trim_end_matches(" player").to_owned())
}

#[test]
fn register_keeps_the_key_private_and_refuses_what_it_must() {
    let server = Server::start();
    let url = server.url();
    let (lan, other, guest) = (config_dir(), config_dir(), config_dir());

    let out = register(&url, lan.path(), "Lan");
    assert!(
        out.stdout
            .starts_with(&format!("registered Lan on {url}\n")),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("account.json"), "{}", out.stdout);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(lan.path().join("account.json"))
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    let me = ok(&url, lan.path(), &["me"]);
    let first = me.stdout.lines().next().unwrap_or_default();
    assert!(first.starts_with("Lan, registered 2"), "{}", me.stdout);
    assert!(me.stdout.contains("games: 0 won, 0 drawn, 0 lost"));
    assert!(me.stdout.contains("no rated games yet"), "{}", me.stdout);
    let me = json_of(&ok(&url, lan.path(), &["me", "--json"]).stdout);
    assert_eq!(me["player"]["username"], "Lan", "{me}");
    let player = json_of(&ok(&url, guest.path(), &["player", "LAN", "--json"]).stdout);
    assert_eq!(player["player"]["username"], "Lan", "{player}");

    // One account per server and config directory, unless --force.
    let again = run_cli(&url, lan.path(), &["register", "Lan2"]);
    assert_eq!(again.code, Some(4), "{again:?}");
    assert!(again.stderr.contains("--force"), "{}", again.stderr);
    assert_eq!(
        json_of(&ok(&url, lan.path(), &["me", "--json"]).stdout)["player"]["username"],
        "Lan",
        "the stored account is kept"
    );
    // A taken name, in another case: ALREADY_EXISTS, exit 4, said plainly.
    let taken = run_cli(&url, other.path(), &["register", "lAN"]);
    assert_eq!(taken.code, Some(4), "{taken:?}");
    assert!(taken.stderr.contains("taken"), "{}", taken.stderr);
    assert!(!other.path().join("account.json").exists());

    // Without an account: `me` and `games` say how to get one; a rated game is refused before
    // any request.
    for args in [&["me"][..], &["games"][..], &["keys"][..]] {
        let out = run_cli(&url, guest.path(), args);
        assert_eq!(out.code, Some(5), "{args:?}: {out:?}");
        // Or, for an account made before (its stored key revoked, say), `login`.
        assert!(
            out.stderr.contains("oanquan register NAME") && out.stderr.contains("oanquan login"),
            "{}",
            out.stderr
        );
    }
    let rated = run_cli(
        &url,
        guest.path(),
        &["create", "--name", "g", "--time", "5+0", "--rated"],
    );
    assert_eq!(rated.code, Some(4), "{rated:?}");
    assert!(
        rated.stderr.contains("oanquan register NAME"),
        "{}",
        rated.stderr
    );
    // Without --name and no $USER either: the account is what is missing, not a name (an
    // outside probe was asked for --name first, which a rated seat never uses).
    for command in [
        &["seek", "3+2", "--rated"][..],
        &["create", "--time", "5+0", "--rated"],
    ] {
        let out = cli_command(&url, guest.path(), command)
            .env("USER", "")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run oanquan");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{command:?}: {stderr}");
        assert!(
            stderr.contains("--rated needs an account") && !stderr.contains("--name"),
            "{command:?}: {stderr}"
        );
    }
    // A --name beside the stored account: said once that the account sits, not the name.
    let named = ok(&url, lan.path(), &["create", "--name", "Someone"]);
    assert_eq!(
        named
            .stderr
            .matches("playing as your account Lan: --name")
            .count(),
        1,
        "{}",
        named.stderr
    );
    // The server's refusal of a username reads as a sentence.
    let reserved = run_cli(&url, config_dir().path(), &["register", "admin"]);
    assert_eq!(reserved.code, Some(2), "{reserved:?}");
    assert!(
        reserved.stderr.contains("the username is reserved"),
        "{}",
        reserved.stderr
    );
    let missing = run_cli(&url, guest.path(), &["player", "nobody"]);
    assert_eq!(missing.code, Some(3), "{missing:?}");
    assert!(missing.stderr.contains("no player"), "{}", missing.stderr);

    // --json prints the API's answer without the key.
    let registered = ok(&url, other.path(), &["register", "Minh", "--json"]);
    let answer = json_of(&registered.stdout);
    assert_eq!(answer["player"]["username"], "Minh", "{answer}");
    assert!(answer.get("apiKey").is_none(), "{answer}");
    assert!(!registered.stdout.contains(&stored_key(other.path())));
}

/// `oanquan login` with `stdin` as the key, in `dir`.
fn login(url: &str, dir: &Path, stdin: &str, extra: &[&str]) -> Output {
    use std::io::Write as _;
    let mut args = vec!["login"];
    args.extend_from_slice(extra);
    let mut child = cli_command(url, dir, &args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run oanquan login");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write the key");
    let out = child.wait_with_output().expect("wait for oanquan login");
    Output {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// An account registered on one machine is used on another with a key made for it, read from
/// stdin: nothing but the key moves, and nothing is stored for a key the server refuses.
#[test]
fn a_key_from_another_machine_logs_in_from_stdin() {
    let server = Server::start();
    let url = server.url();
    let (home, laptop) = (config_dir(), config_dir());
    register(&url, home.path(), "Lan");
    let made = ok(&url, home.path(), &["keys", "new"]);
    let key = made
        .stdout
        .lines()
        .find(|l| l.starts_with("oqk_"))
        .unwrap_or_else(|| panic!("no key in {}", made.stdout))
        .to_owned();

    for (input, code, says) in [
        ("", 2, "no API key on stdin"),
        ("hello\n", 2, "that is not an API key"),
        (
            "oqk_0123456789abcdef_0123456789abcdef0123456789abcdef\n",
            5,
            "does not know this API key",
        ),
    ] {
        let refused = login(&url, laptop.path(), input, &[]);
        assert_eq!(refused.code, Some(code), "{input:?}: {refused:?}");
        assert!(
            refused.stderr.contains(says),
            "{input:?}: {}",
            refused.stderr
        );
        assert!(!laptop.path().join("account.json").exists(), "{input:?}");
    }

    let logged = login(&url, laptop.path(), &format!("  {key}  \n"), &[]);
    assert_eq!(logged.code, Some(0), "{logged:?}");
    assert!(
        logged.stdout.starts_with("logged in as Lan on "),
        "{}",
        logged.stdout
    );
    assert!(!logged.stdout.contains(&key) && !logged.stderr.contains(&key));
    assert_eq!(stored_key(laptop.path()), key);
    assert_eq!(
        json_of(&ok(&url, laptop.path(), &["me", "--json"]).stdout)["player"]["username"],
        "Lan"
    );
    // `oanquan keys` marks the key stored on the laptop as the one stored there.
    let keys = ok(&url, laptop.path(), &["keys"]);
    let id = key.strip_prefix("oqk_").unwrap().split('_').next().unwrap();
    assert!(
        keys.stdout
            .lines()
            .any(|l| l.starts_with(id) && l.ends_with("(stored here)")),
        "{}",
        keys.stdout
    );
    // Not over a stored account without --force.
    let again = login(&url, laptop.path(), &format!("{key}\n"), &[]);
    assert_eq!(again.code, Some(4), "{again:?}");
    assert!(again.stderr.contains("--force"), "{}", again.stderr);
    let forced = login(&url, laptop.path(), &format!("{key}\n"), &["--force"]);
    assert_eq!(forced.code, Some(0), "{forced:?}");
}

#[test]
fn keys_are_listed_made_and_revoked() {
    let server = Server::start();
    let url = server.url();
    let (lan, copy) = (config_dir(), config_dir());
    register(&url, lan.path(), "Lan");
    std::fs::copy(
        lan.path().join("account.json"),
        copy.path().join("account.json"),
    )
    .expect("copy the account file");

    let listed = json_of(&ok(&url, lan.path(), &["keys", "--json"]).stdout);
    let stored_id = listed["keys"][0]["id"].as_str().expect("id").to_owned();
    let text = ok(&url, lan.path(), &["keys"]);
    assert!(
        text.stdout
            .lines()
            .any(|l| l.starts_with(&stored_id) && l.ends_with("active (stored here)")),
        "{}",
        text.stdout
    );

    // A new key is shown once, and works.
    let new = ok(&url, lan.path(), &["keys", "new"]);
    let key = new
        .stdout
        .lines()
        .find(|l| l.starts_with("oqk_"))
        .unwrap_or_else(|| panic!("no key in {}", new.stdout))
        .to_owned();
    assert_ne!(key, stored_key(lan.path()), "not stored");
    assert_eq!(
        json_of(&ok(&url, lan.path(), &["keys", "--json"]).stdout)["keys"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );

    // `--store` puts a new key in the file instead of printing it.
    let rotated = ok(&url, lan.path(), &["keys", "new", "--store"]);
    let stored = stored_key(lan.path());
    assert!(!rotated.stdout.contains("oqk_"), "{}", rotated.stdout);
    assert!(
        rotated.stdout.contains(&format!("keys revoke {stored_id}")),
        "{}",
        rotated.stdout
    );
    let unknown = run_cli(&url, lan.path(), &["keys", "revoke", "nosuchkey"]);
    assert_eq!(unknown.code, Some(3), "{unknown:?}");
    assert!(
        unknown.stderr.contains("`oanquan keys`"),
        "{}",
        unknown.stderr
    );

    // A revoked key is refused from the next call on, also when it would take a seat.
    ok(&url, lan.path(), &["keys", "revoke", &stored_id]);
    let refused = run_cli(&url, copy.path(), &["me"]);
    assert_eq!(refused.code, Some(5), "{refused:?}");
    assert!(
        refused.stderr.contains("refuses the API key"),
        "{}",
        refused.stderr
    );
    let create = run_cli(&url, copy.path(), &["create", "--time", "5+0"]);
    assert_eq!(create.code, Some(5), "{create:?}");
    assert_eq!(
        json_of(&ok(&url, lan.path(), &["me", "--json"]).stdout)["player"]["username"],
        "Lan",
        "the new key works"
    );

    // Revoking the key stored here takes it out of the file.
    let listed = json_of(&ok(&url, lan.path(), &["keys", "--json"]).stdout);
    let keys = listed["keys"].as_array().expect("keys");
    assert_eq!(keys.len(), 3, "{listed}");
    assert!(keys[0].get("revokeTime").is_some(), "{listed}");
    let current = keys[2]["id"].as_str().expect("id").to_owned();
    assert!(stored.contains(&current), "the stored key is the newest");
    let revoked = ok(&url, lan.path(), &["keys", "revoke", &current]);
    assert!(
        revoked
            .stdout
            .starts_with(&format!("revoked API key {current}\n")),
        "{}",
        revoked.stdout
    );
    assert!(
        revoked.stdout.contains("`oanquan login`"),
        "{}",
        revoked.stdout
    );
    let gone = run_cli(&url, lan.path(), &["me"]);
    assert_eq!(gone.code, Some(5), "{gone:?}");
    assert!(
        gone.stderr.contains("oanquan register NAME"),
        "{}",
        gone.stderr
    );
}

#[test]
fn a_rated_seek_game_changes_both_ratings() {
    let server = Server::start();
    let url = server.url();
    let (lan_dir, minh_dir) = (config_dir(), config_dir());
    register(&url, lan_dir.path(), "Lan");
    register(&url, minh_dir.path(), "Minh");
    let (tx, mut lines) = Lines::new();

    let mut lan = CliProcess::spawn(
        "lan",
        &url,
        lan_dir.path(),
        &["seek", "5+0", "--rated", "--range", "1400-1600"],
        &tx,
    );
    let waiting = follow(&mut lines, "lan", |l| l.starts_with("seek "));
    assert!(
        waiting.contains(": 5+0, standard, rated, opponents rated 1400-1600, as Lan (1500?); "),
        "{waiting}"
    );
    let seeks = ok(&url, minh_dir.path(), &["seeks"]);
    assert!(
        seeks
            .stdout
            .lines()
            .any(|l| l.contains("Lan (1500?)") && l.contains(" rated ") && l.contains("1400-1600")),
        "{}",
        seeks.stdout
    );
    let mut minh = CliProcess::spawn(
        "minh",
        &url,
        minh_dir.path(),
        &["seek", "5+0", "--rated"],
        &tx,
    );
    let (game, lan_seat) = paired(&follow(&mut lines, "lan", |l| {
        l.starts_with("paired into game ")
    }));
    let (minh_game, _) = paired(&follow(&mut lines, "minh", |l| {
        l.starts_with("paired into game ")
    }));
    assert_eq!(game, minh_game);
    for (who, opponent) in [("lan", "Minh (1500?)"), ("minh", "Lan (1500?)")] {
        follow(&mut lines, who, |l| l == format!("opponent: {opponent}"));
        follow(&mut lines, who, |l| l.starts_with("rated game"));
        // The board names both players with their ratings.
        let me = if who == "lan" { "Lan" } else { "Minh" };
        follow(&mut lines, who, |l| {
            l.contains(&format!(" player: {me} (1500?) (you)"))
        });
    }

    // Both move (a rated game ends rated only once both have), then the first player resigns
    // at the prompt: both see the end and both ratings change.
    let (first, first_name, second, second_name, winner, loser) = if lan_seat == "first" {
        (&mut lan, "lan", &mut minh, "minh", "Minh", "Lan")
    } else {
        (&mut minh, "minh", &mut lan, "lan", "Lan", "Minh")
    };
    follow(&mut lines, first_name, |l| l == "your move");
    first.send("1 r");
    follow(&mut lines, second_name, |l| l == "your move");
    second.send("2 r");
    follow(&mut lines, first_name, |l| l == "your move");
    first.send("resign");
    follow(&mut lines, first_name, |l| l == "resign? (y/N)");
    first.send("y");
    for who in ["lan", "minh"] {
        follow(&mut lines, who, |l| {
            l.starts_with("game over: ") && l.ends_with("(resignation by first)")
        });
        let mut changes = Vec::new();
        for _ in 0..2 {
            changes.push(follow(&mut lines, who, |l| l.starts_with("rating: ")));
        }
        for (name, sign) in [(winner, "(+"), (loser, "(-")] {
            assert!(
                changes
                    .iter()
                    .any(|l| l.starts_with(&format!("rating: {name} 1500 → "))
                        && l.contains("? ")
                        && l.contains(sign)),
                "{who}: {changes:?}"
            );
        }
    }
    assert_eq!(lan.wait().code(), Some(0), "{}", lines.tail(30));
    assert_eq!(minh.wait().code(), Some(0), "{}", lines.tail(30));

    // The profiles count the game and show the new provisional blitz ratings.
    let (winner_dir, loser_dir) = if winner == "Lan" {
        (&lan_dir, &minh_dir)
    } else {
        (&minh_dir, &lan_dir)
    };
    let me = ok(&url, winner_dir.path(), &["me"]).stdout;
    assert!(me.contains("games: 1 won, 0 drawn, 0 lost"), "{me}");
    let blitz = me
        .lines()
        .find(|l| l.starts_with("blitz "))
        .unwrap_or_else(|| panic!("no blitz line: {me}"));
    let fields: Vec<&str> = blitz.split_whitespace().collect();
    assert!(fields[1].ends_with('?'), "provisional: {blitz}");
    assert!(
        fields[1]
            .trim_end_matches('?')
            .parse::<i32>()
            .expect("rating")
            > 1500,
        "{blitz}"
    );
    assert_eq!(fields.last(), Some(&"1"), "one rated game: {blitz}");
    let profile = json_of(&ok(&url, winner_dir.path(), &["player", loser, "--json"]).stdout);
    assert_eq!(profile["player"]["losses"], 1, "{profile}");
    assert!(
        profile["player"]["ratings"][0]["rating"]
            .as_i64()
            .is_some_and(|r| r < 1500),
        "{profile}"
    );

    // Each player's history, from their side.
    let games = ok(&url, loser_dir.path(), &["games"]).stdout;
    let row = games
        .lines()
        .find(|l| l.contains(&game))
        .unwrap_or_else(|| panic!("{game} not in:\n{games}"));
    assert!(
        row.contains(" 5+0 ") && row.contains(" rated ") && row.contains(" loss (resignation) "),
        "{row}"
    );
    assert!(row.contains(&format!("{winner} (1500?)")), "{row}");
    assert!(row.contains("1500 → "), "{row}");
    // Lan's games under a look-alike spelling of her name (capital I for l, which the server
    // finds too) are still seen from her side.
    let games = ok(&url, winner_dir.path(), &["games", "Ian"]).stdout;
    let row = games
        .lines()
        .find(|l| l.contains(&game))
        .unwrap_or_else(|| panic!("{game} not in:\n{games}"));
    let lan_result = if winner == "Lan" { " win " } else { " loss " };
    assert!(
        row.contains(lan_result) && row.contains("Minh (1500?)"),
        "{row}"
    );
    let wins = json_of(
        &ok(
            &url,
            loser_dir.path(),
            &["games", winner, "--result", "win", "--json"],
        )
        .stdout,
    );
    assert_eq!(wins["games"][0]["id"], game.as_str(), "{wins}");
    assert_eq!(wins["games"][0]["rated"], true, "{wins}");
    let none = ok(
        &url,
        loser_dir.path(),
        &["games", winner, "--result", "loss"],
    );
    assert!(none.stdout.starts_with("no games of "), "{}", none.stdout);

    // One game leaves both ratings provisional: no leaderboard yet.
    let top = ok(&url, loser_dir.path(), &["top"]).stdout;
    assert!(top.starts_with("no blitz leaderboard yet"), "{top}");
    assert_eq!(
        json_of(&ok(&url, loser_dir.path(), &["top", "blitz", "--all", "--json"]).stdout),
        serde_json::json!({})
    );

    // `show` repeats the rating changes of the finished game.
    let shown = ok(&url, loser_dir.path(), &["show", &game]).stdout;
    assert_eq!(
        shown.lines().filter(|l| l.starts_with("rating: ")).count(),
        2,
        "{shown}"
    );
}

#[test]
fn anonymous_play_goes_on_beside_accounts() {
    let server = Server::start();
    let url = server.url();
    let (lan, guest, elsewhere) = (config_dir(), config_dir(), config_dir());
    register(&url, lan.path(), "Lan");

    // With an account stored, --anonymous plays as a display name.
    let created = json_of(
        &ok(
            &url,
            lan.path(),
            &["create", "--anonymous", "--name", "lan-incognito", "--json"],
        )
        .stdout,
    );
    let seat = &created["game"]["firstSeat"];
    assert_eq!(seat["displayName"], "lan-incognito", "{created}");
    assert!(seat.get("account").is_none(), "{created}");

    // Without --anonymous the seat is the account's (untimed: no rating to show).
    let created = json_of(&ok(&url, lan.path(), &["create", "--json"]).stdout);
    let id = created["game"]["id"].as_str().expect("id").to_owned();
    assert_eq!(
        created["game"]["firstSeat"]["account"]["username"], "Lan",
        "{created}"
    );
    let joined = ok(&url, guest.path(), &["join", &id, "--name", "guest"]);
    assert!(
        joined.stdout.contains("opponent: Lan\n"),
        "{}",
        joined.stdout
    );
    let shown = ok(&url, guest.path(), &["show", &id]).stdout;
    assert!(shown.contains("first player: Lan  score"), "{shown}");
    assert!(shown.contains("second player: guest (you)"), "{shown}");

    // A rated game takes accounts only.
    let rated = json_of(
        &ok(
            &url,
            lan.path(),
            &["create", "--time", "5+0", "--rated", "--json"],
        )
        .stdout,
    );
    assert_eq!(rated["game"]["rated"], true, "{rated}");
    let rated_id = rated["game"]["id"].as_str().expect("id");
    let refused = run_cli(&url, guest.path(), &["join", rated_id, "--name", "guest"]);
    assert_eq!(refused.code, Some(4), "{refused:?}");
    assert!(
        refused.stderr.contains("rated games are for accounts only"),
        "{}",
        refused.stderr
    );

    // The account's key acts for its seat where no seat token is stored (another machine).
    std::fs::copy(
        lan.path().join("account.json"),
        elsewhere.path().join("account.json"),
    )
    .expect("copy the account file");
    let resigned = ok(&url, elsewhere.path(), &["resign", &id]);
    assert!(
        resigned
            .stdout
            .starts_with(&format!("resigned game {id} as the first player\n")),
        "{}",
        resigned.stdout
    );
    // An unrated game counts in the record but changes no rating.
    assert!(!resigned.stdout.contains("rating: "), "{}", resigned.stdout);
    let me = ok(&url, lan.path(), &["me"]).stdout;
    assert!(me.contains("games: 0 won, 0 drawn, 1 lost"), "{me}");
    assert!(me.contains("no rated games yet"), "{me}");

    // A rated game resigned before both players moved counts too, but is not rated, and the
    // resigning player is told why.
    let minh = config_dir();
    register(&url, minh.path(), "Minh");
    ok(&url, minh.path(), &["join", rated_id]);
    let resigned = ok(&url, lan.path(), &["resign", rated_id]).stdout;
    assert!(
        resigned.contains("\nrating: unchanged (the game ended before both players moved)\n"),
        "{resigned}"
    );
    let me = ok(&url, lan.path(), &["me"]).stdout;
    assert!(me.contains("games: 0 won, 0 drawn, 2 lost"), "{me}");
    assert!(me.contains("no rated games yet"), "{me}");
}

/// An account file holding a registration of `name` begun with `key` whose answer never
/// came, as `oanquan register` leaves it when the connection or the server fails mid-call.
fn unfinished_registration(dir: &Path, url: &str, name: &str, key: &str) {
    let file = serde_json::json!({
        "version": 1,
        "accounts": [{
            "server": url,
            "username": name,
            "api_key": key,
            "key_id": &key[4..20],
            "pending": true,
        }],
    });
    std::fs::write(
        dir.join("account.json"),
        serde_json::to_vec(&file).expect("json"),
    )
    .expect("write the account file");
}

/// `oanquan register` makes the account's key itself and keeps it before asking the server,
/// so a registration whose answer was lost (the server killed after its commit) is finished
/// by the same command again, with the account made the first time. Before, the retry met
/// "taken" and the key was never seen.
#[test]
fn a_registration_whose_answer_was_lost_is_finished_by_the_same_command() {
    let server = Server::start();
    let url = server.url();
    let key = "oqk_0123456789abcdef_Xq3-vR8_kLm2Tz9YwB4nHc6JpDs1Ga5E";
    // Twice from the same unfinished state: the first call makes the account, the second
    // finds it (its answer, too, is the account and this key).
    for round in 0..2 {
        let dir = config_dir();
        unfinished_registration(dir.path(), &url, "Lan", key);
        // Meanwhile the account plays as nobody: `me` says to finish the registration.
        let me = run_cli(&url, dir.path(), &["me"]);
        assert_eq!(me.code, Some(5), "{me:?}");
        assert!(
            me.stderr.contains("did not finish") && me.stderr.contains("oanquan register Lan"),
            "{}",
            me.stderr
        );
        // So does registering another name, without --force.
        let other = run_cli(&url, dir.path(), &["register", "Minh"]);
        assert_eq!(other.code, Some(4), "{other:?}");
        assert!(
            other.stderr.contains("did not finish") && other.stderr.contains("--force"),
            "{}",
            other.stderr
        );
        let out = ok(&url, dir.path(), &["register", "Lan"]);
        assert!(
            out.stderr.contains("finishing the registration of Lan"),
            "round {round}: {out:?}"
        );
        assert!(
            out.stdout
                .starts_with(&format!("registered Lan on {url}\n")),
            "round {round}: {}",
            out.stdout
        );
        let file = json_of(&std::fs::read_to_string(dir.path().join("account.json")).unwrap());
        assert_eq!(file["accounts"][0]["api_key"], key);
        assert!(file["accounts"][0].get("pending").is_none(), "{file}");
        let me = json_of(&ok(&url, dir.path(), &["me", "--json"]).stdout);
        assert_eq!(me["player"]["username"], "Lan", "{me}");
    }
    // An unfinished registration of a name whose account another key made is refused as
    // taken, and the key that made nothing is dropped from the file.
    let late = config_dir();
    let stranger = "oqk_fedcba9876543210_Pw7-Kd2_Zx5Qm8Rt1Vn4Bh6Jy3Lc9Fs0";
    unfinished_registration(late.path(), &url, "Lan", stranger);
    let taken = run_cli(&url, late.path(), &["register", "Lan"]);
    assert_eq!(taken.code, Some(4), "{taken:?}");
    assert!(taken.stderr.contains("taken"), "{}", taken.stderr);
    let me = run_cli(&url, late.path(), &["me"]);
    assert!(
        me.stderr.contains("oanquan register NAME"),
        "nothing stored: {me:?}"
    );
    // Each fresh registration sends a key of its own making; the server takes its shape.
    let fresh = config_dir();
    register(&url, fresh.path(), "Hoa");
    let made = stored_key(fresh.path());
    assert_eq!(made.len(), 4 + 16 + 1 + 32, "{made}");
}

/// A registration that may have made its account keeps its key whatever the server says next,
/// unless that proves nothing was made with it: an outside probe's answer was lost on the
/// address's last registration of the hour, the retry was refused by the limit, and the CLI
/// dropped the only copy of the key.
#[test]
fn an_unfinished_registration_keeps_its_key_through_a_refusal_that_proves_nothing() {
    let server = Server::start_with(&[
        "--exempt-loopback",
        "false",
        "--registrations-per-hour",
        "1",
    ]);
    let url = server.url();
    register(&url, config_dir().path(), "Other");
    let dir = config_dir();
    let key = "oqk_0123456789abcdef_Xq3-vR8_kLm2Tz9YwB4nHc6JpDs1Ga5E";
    unfinished_registration(dir.path(), &url, "Lan", key);
    let refused = run_cli(&url, dir.path(), &["register", "Lan"]);
    assert_eq!(refused.code, Some(75), "{refused:?}");
    assert!(
        refused.stderr.contains("run the same command again"),
        "{}",
        refused.stderr
    );
    let file = json_of(&std::fs::read_to_string(dir.path().join("account.json")).unwrap());
    assert_eq!(file["accounts"][0]["api_key"], key, "{file}");
    assert_eq!(file["accounts"][0]["pending"], true, "{file}");
    // Any case of the name finishes it (the server's names ignore case).
    let again = run_cli(&url, dir.path(), &["register", "lan"]);
    assert!(
        again.stderr.contains("finishing the registration of Lan"),
        "{again:?}"
    );
}

/// Two `register` runs at once in one directory: one stores its account, the other is told
/// one is stored, and the stored key works (an outside probe's two runs both said
/// "registered", and one account's key was lost).
#[test]
fn two_registrations_at_once_in_one_directory_keep_one_account_whole() {
    let server = Server::start();
    let url = server.url();
    let dir = config_dir();
    let runs: Vec<_> = ["TwoA", "TwoB"]
        .iter()
        .map(|name| {
            cli_command(&url, dir.path(), &["register", name])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("run oanquan register")
        })
        .collect();
    let outs: Vec<_> = runs
        .into_iter()
        .map(|run| run.wait_with_output().expect("wait"))
        .collect();
    let codes: Vec<_> = outs.iter().map(|o| o.status.code()).collect();
    assert!(
        codes.contains(&Some(0)) && codes.contains(&Some(4)),
        "{outs:?}"
    );
    let winner = if codes[0] == Some(0) { "TwoA" } else { "TwoB" };
    let loser = outs.iter().find(|o| o.status.code() == Some(4)).unwrap();
    assert!(
        String::from_utf8_lossy(&loser.stderr).contains("already stored"),
        "{loser:?}"
    );
    let me = json_of(&ok(&url, dir.path(), &["me", "--json"]).stdout);
    assert_eq!(me["player"]["username"], winner, "{me}");
}

#[test]
fn an_account_survives_a_restart() {
    let data = tempfile::tempdir().expect("tempdir");
    let database = data.path().join("oanquan.db");
    let lan = config_dir();
    let server = Server::start_on(&database, &[]);
    register(&server.url(), lan.path(), "Lan");
    let stopped = server.terminate();
    assert!(stopped.success(), "{stopped:?}");
    // The key is kept hashed in the database: it still works after the restart (on another
    // port, the account file's key is for the first address; copy it over).
    let server = Server::start_on(&database, &[]);
    let moved = config_dir();
    let mut file =
        json_of(&std::fs::read_to_string(lan.path().join("account.json")).expect("read"));
    file["accounts"][0]["server"] = Value::String(server.url());
    std::fs::write(
        moved.path().join("account.json"),
        serde_json::to_vec(&file).expect("json"),
    )
    .expect("write");
    let me = ok(&server.url(), moved.path(), &["me", "--json"]);
    assert_eq!(json_of(&me.stdout)["player"]["username"], "Lan");
}

/// A rated seek that nobody answers in time plays the computer, and such a game is never
/// rated: the seeker is told so rather than finding out from the result.
#[test]
fn a_rated_seek_handed_to_the_computer_says_it_is_not_rated() {
    let server = Server::start();
    let url = server.url();
    let lan = config_dir();
    register(&url, lan.path(), "Lan");
    // It goes on to play the game; with no input it stops there, which is not under test.
    let seek = run_cli(
        &url,
        lan.path(),
        &["seek", "5+0", "--rated", "--computer-after", "1s"],
    );
    assert!(
        seek.stdout
            .contains("you play the computer, and a game against the computer is not rated"),
        "{seek:?}"
    );
    assert!(seek.stdout.contains("paired into game "), "{seek:?}");
}
