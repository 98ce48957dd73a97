//! The real binary's flags as users write them: switches from the environment
//! (`OANQUAN_IN_MEMORY=1`) and sizes with units (`--max-message-size "4 MiB"`, as the README
//! writes it).

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use oanquan_proto::v1 as pb;
use oanquan_proto::v1::game_service_client::GameServiceClient;
use tonic::Code;

/// `oanquan-server --listen 127.0.0.1:0` in `dir`, with none of the variables under test
/// inherited from the environment of the test run.
fn server(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_oanquan-server"));
    command
        .current_dir(dir)
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null());
    for variable in [
        "OANQUAN_IN_MEMORY",
        "OANQUAN_DATABASE",
        "OANQUAN_MAX_MESSAGE_SIZE",
        "OANQUAN_MAX_REQUEST_SIZE",
        "OANQUAN_DATABASE_URL",
        "OANQUAN_DATABASE_POOL_SIZE",
        "OANQUAN_DATABASE_POOL_WAIT",
        "OANQUAN_DATABASE_CONNECT_TIMEOUT",
        "OANQUAN_DATABASE_STATEMENT_TIMEOUT",
        "OANQUAN_DATABASE_BATCH",
        "OANQUAN_DATABASE_WRITERS",
        "OANQUAN_NODE_NAME",
        "OANQUAN_READY_FILE",
        "OANQUAN_MAX_ANALYSES",
        "OANQUAN_RATE_LIMIT",
        "OANQUAN_NO_WEB",
    ] {
        command.env_remove(variable);
    }
    command.envs(env.iter().copied());
    command
}

/// A started server; killed when dropped.
struct Running {
    child: Child,
    addr: SocketAddr,
}

impl Running {
    fn start(mut command: Command) -> Self {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn oanquan-server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read the first line");
        let addr = line
            .trim()
            .strip_prefix("oanquan-server listening on ")
            .unwrap_or_else(|| panic!("the server did not start; first line {line:?}"))
            .parse()
            .expect("an address");
        Self { child, addr }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

/// CreateGame with a display name of `len` bytes: the request is a little over `len` bytes.
async fn create_with_name_of(addr: SocketAddr, len: usize) -> Code {
    let mut client = GameServiceClient::connect(format!("http://{addr}"))
        .await
        .expect("connect")
        .max_encoding_message_size(usize::MAX);
    let request = pb::CreateGameRequest {
        display_name: "x".repeat(len),
        ..Default::default()
    };
    match client.create_game(request).await {
        Ok(_) => Code::Ok,
        Err(status) => status.code(),
    }
}

#[test]
fn switches_from_the_environment_and_sizes_with_units() {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = Running::start(server(
        dir.path(),
        &[
            ("OANQUAN_IN_MEMORY", "1"),
            ("OANQUAN_MAX_REQUEST_SIZE", "4 MiB"),
        ],
        &["--max-message-size", "4 MiB"],
    ));
    assert_eq!(
        files_in(dir.path()),
        Vec::<String>::new(),
        "in memory: no database file"
    );
    const MIB: usize = 1024 * 1024;
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    // Just under 4 MiB is decoded (and then refused for its name); just over is not decoded.
    // 4 MB (4,000,000) or 4 bytes would refuse both.
    let under = runtime.block_on(create_with_name_of(running.addr, 4 * MIB - 1024));
    assert_eq!(under, Code::InvalidArgument);
    let over = runtime.block_on(create_with_name_of(running.addr, 4 * MIB + 1024));
    assert_eq!(over, Code::ResourceExhausted);
}

/// Requests are bounded well below responses by default: a request message is held whole
/// until its last byte, so this bound is what a client that never sends that byte pins. The
/// largest request a game needs (a 10,000-move history) still fits.
#[test]
fn requests_are_bounded_at_128_kib_by_default() {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = Running::start(server(dir.path(), &[], &["--in-memory"]));
    const KIB: usize = 1024;
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let under = runtime.block_on(create_with_name_of(running.addr, 128 * KIB - 100));
    assert_eq!(under, Code::InvalidArgument);
    let over = runtime.block_on(create_with_name_of(running.addr, 128 * KIB + 1));
    assert_eq!(over, Code::ResourceExhausted);
    // 10,000 moves of a history: decoded, then refused for what they say (the first is not
    // even a legal move), not for their size.
    let history = runtime.block_on(async {
        let mut rules = pb::rules_service_client::RulesServiceClient::connect(format!(
            "http://{}",
            running.addr
        ))
        .await
        .expect("connect");
        let far = pb::Move {
            square: Some(11),
            direction: pb::Direction::Left.into(),
        };
        rules
            .legal_moves(pb::LegalMovesRequest {
                game: Some(pb::legal_moves_request::Game::History(pb::MoveHistory {
                    start: None,
                    moves: vec![far; 10_000],
                })),
                ..Default::default()
            })
            .await
            .expect_err("an illegal history")
    });
    assert_eq!(history.code(), Code::InvalidArgument, "{history:?}");
}

#[test]
fn a_switch_turned_off_in_the_environment_keeps_the_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let database = dir.path().join("games.db");
    let database = database.to_str().expect("a UTF-8 path");
    let running = Running::start(server(
        dir.path(),
        &[("OANQUAN_IN_MEMORY", "0")],
        &["--database", database],
    ));
    assert!(
        files_in(dir.path()).contains(&"games.db".to_owned()),
        "{:?}",
        files_in(dir.path())
    );
    drop(running);
}

/// Environment, arguments, and what the error must say.
type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str], &'a str);

/// Also values that would panic the server (a semaphore past tokio's 2^61 permits), leave it up
/// but unable to serve (no stream, no concurrency, a message limit below any message, a
/// handshake no client can make), turn a limit off by accident (NaN, negative) or make
/// deadlines that do not fit a timestamp: each is a usage error at start, naming the flag.
#[test]
fn bad_switches_and_sizes_are_refused_with_the_reason() {
    let huge = "2305843009213693952";
    let cases: [Case<'_>; 36] = [
        // Limits that 0 would make refuse everything they count, for ever.
        (&[], &["--in-memory", "--max-seeks", "0"], "give at least 1"),
        (&[], &["--in-memory", "--max-games", "0"], "give at least 1"),
        (
            &[],
            &["--in-memory", "--rate-limit-burst", "0"],
            "give --rate-limit 0",
        ),
        (
            &[],
            &["--in-memory", "--max-seeks", "-1"],
            "not a whole number of at least 1",
        ),
        (
            &[],
            &["--in-memory", "--rate-limit-burst", "4294967296"],
            "more than 4294967295 requests",
        ),
        (
            &[("OANQUAN_MAX_SEEKS_PER_CLIENT", "-1")],
            &["--in-memory"],
            "\"-1\" is not a whole number (0 or more)",
        ),
        (
            &[],
            &["--in-memory", "--max-spectators-per-connection", "x"],
            "\"x\" is not a whole number (0 or more)",
        ),
        (
            &[],
            &["--in-memory", "--max-searches", huge],
            "not in 0..=4096",
        ),
        (
            &[],
            &["--in-memory", "--metrics-listen", "localhost:0"],
            "give an IP address and a port",
        ),
        (
            &[],
            &[
                "--in-memory",
                "--heartbeat-interval",
                "99999999999999999999",
            ],
            "longer than any duration",
        ),
        // Read as the flag's value, not as a short flag `-5` (clap's guess).
        (
            &[],
            &["--in-memory", "--shutdown-drain-timeout", "-5s"],
            "\"-5s\" is negative; a duration is 0 or more",
        ),
        (
            &[],
            &["--in-memory", "--idle-game-timeout", "9000h"],
            "longer than a year (8760h)",
        ),
        (
            &[],
            &["--in-memory", "--max-message-size", "2048MiB"],
            "over the most a message may be here, 1024MiB",
        ),
        (
            &[("OANQUAN_MAX_ANALYSES", huge)],
            &["--in-memory"],
            "not in 0..=4096",
        ),
        (
            &[],
            &["--in-memory", "--concurrency-limit-per-connection", "0"],
            "not in 1..=65536",
        ),
        (
            &[],
            &[
                "--in-memory",
                "--concurrency-limit-per-connection",
                "18446744073709551615",
            ],
            "not in 1..=65536",
        ),
        (
            &[],
            &["--in-memory", "--max-concurrent-streams", "0"],
            "not in 1..=65536",
        ),
        (
            &[],
            &["--in-memory", "--max-message-size", "1"],
            "at least 64KiB",
        ),
        (
            &[],
            &["--in-memory", "--handshake-timeout", "0"],
            "at least 100ms",
        ),
        (
            &[("OANQUAN_RATE_LIMIT", "NaN")],
            &["--in-memory"],
            "is not a rate",
        ),
        (
            &[],
            &["--in-memory", "--first-move-time", "5000000000000000000"],
            "at most 30 days",
        ),
        (
            &[],
            &["--in-memory", "--rematch-window", "2500000h"],
            "at most 30 days",
        ),
        (
            &[("OANQUAN_REMATCH_WINDOW", "721h")],
            &["--in-memory"],
            "at most 30 days",
        ),
        (
            &[],
            &["--in-memory", "--keepalive-interval", "10h"],
            "at most 32767s",
        ),
        (
            &[("OANQUAN_IN_MEMORY", "maybe")],
            &[],
            "\"maybe\" is neither on nor off; use true/false, 1/0, yes/no or on/off",
        ),
        (
            &[("OANQUAN_IN_MEMORY", "YES")],
            &["--database", "games.db"],
            "contradict",
        ),
        (
            &[],
            &["--exempt-loopback", "perhaps", "--in-memory"],
            "neither on nor off",
        ),
        (
            &[("OANQUAN_HEARTBEAT_INTERVAL", "0")],
            &["--in-memory"],
            "\"0\" is too short; give at least 100ms (0 does not turn it off)",
        ),
        (
            &[],
            &["--in-memory", "--keepalive-interval", "50ms"],
            "too short; give at least 100ms",
        ),
        (
            &[],
            &["--in-memory", "--rate-limit", "-1"],
            "is not a rate: give a number of requests per second",
        ),
        (
            &[],
            &["--in-memory", "--health-rate-limit", "4e-324"],
            "too small a rate: give at least 0.001 per second, or 0 for no limit",
        ),
        (
            &[("OANQUAN_HEALTH_RATE_LIMIT", "-2")],
            &["--in-memory"],
            "is not a rate",
        ),
        (
            &[],
            &["--in-memory", "--max-open-games-per-client", "-3"],
            "-3",
        ),
        (
            &[],
            &["--in-memory", "--max-message-size", "0"],
            "0 bytes would refuse ordinary calls (a game with its moves); give at least 64KiB",
        ),
        (
            &[("OANQUAN_MAX_MESSAGE_SIZE", "4 GiB")],
            &["--in-memory"],
            "unknown unit \"GiB\"; use B, KB, KiB, MB or MiB",
        ),
        (
            &[],
            &[
                "--in-memory",
                "--max-message-size",
                "99999999999999999999 MiB",
            ],
            "is too large",
        ),
    ];
    for (env, args, reason) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        let output = server(dir.path(), env, args)
            .output()
            .expect("run oanquan-server");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{env:?} {args:?}: {stderr}");
        assert!(
            output.stdout.is_empty(),
            "{env:?} {args:?}: nothing listens"
        );
        assert!(stderr.contains(reason), "{env:?} {args:?}: {stderr}");
        assert_eq!(
            files_in(dir.path()),
            Vec::<String>::new(),
            "{env:?} {args:?}"
        );
    }
}

/// `OANQUAN_NO_WEB` takes the switch spellings, as the help says of every switch.
#[test]
fn no_web_takes_the_switch_spellings_in_the_environment() {
    let dir = tempfile::tempdir().expect("tempdir");
    drop(Running::start(server(
        dir.path(),
        &[("OANQUAN_NO_WEB", "yes")],
        &["--in-memory", "--metrics-listen", "127.0.0.1:0"],
    )));
}

/// The PostgreSQL pool and timeout flags: 0, huge and garbage values stop the server at start
/// with the reason, before it connects to anything (the URL points nowhere).
#[test]
fn bad_database_pool_and_timeout_values_are_refused_with_the_reason() {
    let url = "postgres://nobody@127.0.0.1:1/none";
    let cases: [Case<'_>; 8] = [
        (&[], &["--database-pool-size", "0"], "at least 1 connection"),
        (
            &[("OANQUAN_DATABASE_POOL_SIZE", "100000")],
            &[],
            "give at most 1000",
        ),
        (
            &[],
            &["--database-pool-size", "lots"],
            "not a number of connections",
        ),
        (
            &[("OANQUAN_DATABASE_STATEMENT_TIMEOUT", "0")],
            &[],
            "give at least 1ms",
        ),
        (
            &[],
            &["--database-statement-timeout", "30d"],
            "unknown unit \"d\"",
        ),
        (
            &[],
            &["--database-statement-timeout", "5h"],
            "too long; give at most 1h",
        ),
        (
            &[("OANQUAN_DATABASE_CONNECT_TIMEOUT", "soon")],
            &[],
            "not a duration",
        ),
        (&[], &["--database-pool-wait", "0ms"], "give at least 1ms"),
    ];
    for (env, args, reason) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        let output = server(dir.path(), env, args)
            .env("OANQUAN_DATABASE_URL", url)
            .output()
            .expect("run oanquan-server");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{env:?} {args:?}: {stderr}");
        assert!(
            output.stdout.is_empty(),
            "{env:?} {args:?}: nothing listens"
        );
        assert!(stderr.contains(reason), "{env:?} {args:?}: {stderr}");
    }
}

/// Good values are taken from the flags and the environment alike: a pool wait given in the
/// environment and the other flags on the command line start a server (here in memory, which
/// ignores them with a warning, so the test needs no PostgreSQL).
#[test]
fn database_pool_and_timeout_values_start_the_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = Running::start(server(
        dir.path(),
        &[("OANQUAN_DATABASE_POOL_WAIT", "250ms")],
        &[
            "--in-memory",
            "--database-pool-size",
            "1000",
            "--database-connect-timeout",
            "1h",
            "--database-statement-timeout",
            "1ms",
        ],
    ));
    drop(running);
}

/// A node name too long or with a control character stops the server with one line saying
/// why, without repeating the value; a plain one starts it.
#[test]
fn node_names_are_bounded_in_length_and_characters() {
    let huge = "n".repeat(100_000);
    let cases: [Case<'_>; 3] = [
        (
            &[],
            &["--node-name", &huge],
            "is 100000 bytes long; give at most 64",
        ),
        (
            &[("OANQUAN_NODE_NAME", "node\nfake_metric 1")],
            &[],
            "has a control character at byte 4",
        ),
        (&[], &["--node-name", "node a"], "has a space at byte 4"),
    ];
    for (env, args, reason) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        let output = server(dir.path(), env, args)
            .args(["--in-memory", "--metrics-listen", "127.0.0.1:0"])
            .output()
            .expect("run oanquan-server");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(output.stdout.is_empty(), "nothing listens: {stderr}");
        let first = stderr.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error: --node-name (OANQUAN_NODE_NAME) ") && first.contains(reason),
            "{stderr}"
        );
        assert!(
            stderr.len() < 500,
            "the value is not repeated: {} bytes",
            stderr.len()
        );
        assert!(!stderr.contains("fake_metric"), "{stderr}");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let name = "web-7.example.org:50051";
    assert_eq!(name.len(), 23);
    let running = Running::start(server(
        dir.path(),
        &[],
        &[
            "--in-memory",
            "--metrics-listen",
            "127.0.0.1:0",
            "--node-name",
            &"a".repeat(64),
        ],
    ));
    drop(running);
    let running = Running::start(server(
        dir.path(),
        &[("OANQUAN_NODE_NAME", name)],
        &["--in-memory", "--metrics-listen", "127.0.0.1:0"],
    ));
    drop(running);
}

/// The server removes and rewrites its ready file: a path that holds anything else is refused
/// before anything is touched (`/dev/null` would have been deleted and replaced, as root).
#[test]
fn a_ready_file_path_that_holds_something_else_is_refused_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "keep me\n").unwrap();
    for (path, reason) in [
        ("/dev/null", "is not a regular file"),
        ("notes.txt", "holds something other than a ready file"),
        ("no/such/folder/ready", "its folder does not exist"),
    ] {
        let output = server(dir.path(), &[], &["--in-memory", "--ready-file", path])
            .output()
            .expect("run oanquan-server");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{path}: {stderr}");
        assert!(output.stdout.is_empty(), "nothing listens: {stderr}");
        assert!(
            stderr.starts_with("error: --ready-file (OANQUAN_READY_FILE): ")
                && stderr.contains(reason),
            "{stderr}"
        );
    }
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "keep me\n");
    use std::os::unix::fs::FileTypeExt as _;
    assert!(
        std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device()
    );
}

/// What a started server wrote on stderr until it announced its address (the start-up
/// warnings), then killed.
fn startup_log(mut command: Command) -> String {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn oanquan-server");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read the first line");
    assert!(
        line.starts_with("oanquan-server listening on "),
        "the server did not start: {line:?}"
    );
    let _ = child.kill();
    let output = child.wait_with_output().expect("wait for oanquan-server");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// --database-batch and --database-writers (like the other PostgreSQL-only flags) do nothing on
/// another store: the server starts, and says so once at start, naming them; without them it
/// says nothing of the kind.
#[test]
fn postgres_only_flags_on_another_store_are_warned_about_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = startup_log(server(
        dir.path(),
        &[("OANQUAN_DATABASE_WRITERS", "4")],
        &["--in-memory", "--database-batch", "8"],
    ));
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("apply only to PostgreSQL"))
        .collect();
    assert_eq!(warnings.len(), 1, "{log}");
    assert!(
        warnings[0].contains("WARN")
            && warnings[0]
                .contains("--database-batch, --database-writers apply only to PostgreSQL"),
        "{log}"
    );

    let log = startup_log(server(dir.path(), &[], &["--in-memory"]));
    assert!(!log.contains("apply only to PostgreSQL"), "{log}");
}

/// A per-address limit above the server-wide one never binds: the server starts (the
/// server-wide limit still holds) and says so once per limit; with the defaults it says nothing.
#[test]
fn per_client_limits_above_their_server_wide_limit_are_warned_about() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = startup_log(server(
        dir.path(),
        &[("OANQUAN_MAX_SEEKS", "3")],
        &[
            "--in-memory",
            "--max-health-watches",
            "10",
            "--max-health-watches-per-client",
            "11",
        ],
    ));
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains("never binds")).collect();
    assert_eq!(warnings.len(), 2, "{log}");
    assert!(
        warnings.iter().all(|w| w.contains("WARN"))
            && warnings[0].contains("--max-seeks-per-client 4 is above --max-seeks 3")
            && warnings[1]
                .contains("--max-health-watches-per-client 11 is above --max-health-watches 10"),
        "{log}"
    );

    let log = startup_log(server(dir.path(), &[], &["--in-memory"]));
    assert!(!log.contains("never binds"), "{log}");
    assert!(!log.contains("--max-request-size"), "{log}");
    assert!(!log.contains("--max-analyses-per-client"), "{log}");

    // As many analyses per client as there are slots: one address can hold them all.
    let log = startup_log(server(
        dir.path(),
        &[],
        &[
            "--in-memory",
            "--max-analyses",
            "1",
            "--max-analyses-per-client",
            "5",
        ],
    ));
    assert!(
        log.lines().any(|l| l.contains("WARN")
            && l.contains("--max-analyses-per-client 5 is not below the 1 analysis slot(s)")),
        "{log}"
    );

    // A request bound above the response bound: the response bound holds, and it is said.
    let log = startup_log(server(
        dir.path(),
        &[],
        &["--in-memory", "--max-request-size", "8MiB"],
    ));
    assert!(
        log.lines().any(|l| l.contains("WARN")
            && l.contains("--max-request-size 8388608 is above --max-message-size 4194304")),
        "{log}"
    );
}

/// A port in use stops the server before it creates a database: nothing is left behind to
/// clean up, and the message names the address.
#[test]
fn a_port_in_use_is_refused_before_a_database_is_created() {
    let dir = tempfile::tempdir().expect("tempdir");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().unwrap().to_string();
    for (flag, what) in [
        ("--listen", format!("cannot listen on {addr}")),
        (
            "--metrics-listen",
            format!("cannot listen for metrics on {addr}"),
        ),
    ] {
        let mut command = Command::new(env!("CARGO_BIN_EXE_oanquan-server"));
        command
            .current_dir(dir.path())
            .env_remove("OANQUAN_LISTEN")
            .env_remove("OANQUAN_METRICS_LISTEN")
            .env_remove("OANQUAN_IN_MEMORY")
            .env_remove("OANQUAN_DATABASE_URL")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .args(["--database", "games.db"]);
        if flag == "--listen" {
            command.args(["--listen", &addr]);
        } else {
            command.args(["--listen", "127.0.0.1:0", "--metrics-listen", &addr]);
        }
        let output = command.output().expect("run oanquan-server");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{flag}: {stderr}");
        assert!(
            output.stdout.is_empty(),
            "{flag}: nothing listens: {stderr}"
        );
        assert!(stderr.contains(&what), "{flag}: {stderr}");
        assert!(
            stderr.contains("Address already in use"),
            "{flag}: {stderr}"
        );
        assert_eq!(files_in(dir.path()), Vec::<String>::new(), "{flag}");
    }
}

/// `--database :memory:` or a `file:` URI is not taken for a file: SQLite would keep the
/// games in memory, or open a file the lock does not guard. Refused with the way out, and
/// nothing is left behind (not even a `.lock`); `./:memory:` is a plain file name.
#[test]
fn names_sqlite_reads_as_no_file_are_refused() {
    for name in [":memory:", "file:games.db", "file:games.db?mode=memory"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let output = server(dir.path(), &[], &["--database", name])
            .output()
            .expect("run oanquan-server");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{name}: {stderr}");
        assert!(output.stdout.is_empty(), "{name}: nothing listens");
        assert!(
            stderr.contains("not as a file name") && stderr.contains("--in-memory"),
            "{name}: {stderr}"
        );
        assert_eq!(files_in(dir.path()), Vec::<String>::new(), "{name}");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let running = Running::start(server(dir.path(), &[], &["--database", "./:memory:"]));
    drop(running);
    assert!(
        files_in(dir.path()).contains(&":memory:".to_owned()),
        "{:?}",
        files_in(dir.path())
    );
}
