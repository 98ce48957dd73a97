//! Helpers for the end-to-end tests in `tests/tests/`: they run the REAL binaries, `oanquan-server`
//! and the `oanquan` CLI, as child processes, the way a user or a script would.
//!
//! # Finding the binaries
//!
//! Cargo only exposes `CARGO_BIN_EXE_*` for binaries of the package under test, and artifact
//! dependencies are unstable, so this crate locates them in the target directory it was built
//! into itself: a test executable lives in `<target>/<profile>/deps/`, so the binaries are in
//! `<target>/<profile>/`. Before the first test uses them, [`binaries`] runs
//! `cargo build -p oanquan-server -p oanquan-cli` (with `--release` for a release test build)
//! once per test process, so the tests never run stale binaries; that is a quick no-op when they
//! are up to date. Set `OANQUAN_E2E_NO_BUILD=1` to skip it (binaries built by hand), or
//! `OANQUAN_E2E_BIN_DIR` to take the binaries from another directory.
//!
//! Every child is killed when its handle is dropped, so a failing test leaves no process behind.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead as _, BufReader, Read, Write as _};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

/// Paths of the two binaries under test.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub server: PathBuf,
    pub cli: PathBuf,
}

fn exe(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX))
}

/// Builds (once) and locates the binaries; see the crate docs.
///
/// # Panics
///
/// If the binaries cannot be built or found: the tests cannot run without them.
pub fn binaries() -> &'static Binaries {
    static BINARIES: OnceLock<Binaries> = OnceLock::new();
    BINARIES.get_or_init(|| {
        if let Some(dir) = std::env::var_os("OANQUAN_E2E_BIN_DIR") {
            let dir = PathBuf::from(dir);
            return Binaries {
                server: exe(&dir, "oanquan-server"),
                cli: exe(&dir, "oanquan"),
            };
        }
        let test_exe = std::env::current_exe().expect("current_exe");
        // <target>/<profile>/deps/<test binary>
        let profile_dir = test_exe
            .parent()
            .and_then(Path::parent)
            .expect("test binary in <target>/<profile>/deps")
            .to_path_buf();
        let target_dir = profile_dir.parent().expect("target dir").to_path_buf();
        if std::env::var_os("OANQUAN_E2E_NO_BUILD").is_none() {
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let mut cmd = Command::new(cargo);
            cmd.args(["build", "-p", "oanquan-server", "-p", "oanquan-cli"])
                .env("CARGO_TARGET_DIR", &target_dir)
                .current_dir(env!("CARGO_MANIFEST_DIR"));
            if profile_dir.file_name().is_some_and(|n| n == "release") {
                cmd.arg("--release");
            }
            let status = cmd.status().expect("run cargo build");
            assert!(status.success(), "cargo build of the binaries failed");
        }
        let found = Binaries {
            server: exe(&profile_dir, "oanquan-server"),
            cli: exe(&profile_dir, "oanquan"),
        };
        assert!(found.server.exists(), "missing {}", found.server.display());
        assert!(found.cli.exists(), "missing {}", found.cli.display());
        found
    })
}

/// How long any single expected output may take before a test fails.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(30);

/// A running `oanquan-server --listen 127.0.0.1:0`.
#[derive(Debug)]
pub struct Server {
    child: Child,
    pub addr: SocketAddr,
}

impl Server {
    /// Starts the server and waits for its `oanquan-server listening on <addr>` line.
    ///
    /// # Panics
    ///
    /// If it does not start or announces no address within [`STEP_TIMEOUT`].
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// [`Server::start`] with more command-line options.
    ///
    /// # Panics
    ///
    /// As [`Server::start`].
    pub fn start_with(extra: &[&str]) -> Self {
        let mut command = Command::new(&binaries().server);
        command
            .args(extra)
            .arg("--in-memory")
            .stderr(Stdio::inherit());
        Self::spawn(command)
    }

    /// [`Server::start_with`] on the SQLite database file `database` instead of in memory.
    ///
    /// # Panics
    ///
    /// As [`Server::start`].
    pub fn start_on(database: &Path, extra: &[&str]) -> Self {
        Self::spawn_at(Self::on(database, extra), "127.0.0.1:0")
    }

    /// [`Server::start_on`] listening on `addr`: a server restarted where its clients look
    /// for it.
    ///
    /// # Panics
    ///
    /// As [`Server::start`].
    pub fn start_on_at(database: &Path, addr: SocketAddr) -> Self {
        Self::spawn_at(Self::on(database, &[]), &addr.to_string())
    }

    fn on(database: &Path, extra: &[&str]) -> Command {
        let mut command = Command::new(&binaries().server);
        command
            .args(extra)
            .arg("--database")
            .arg(database)
            .env_remove("OANQUAN_IN_MEMORY")
            .stderr(Stdio::inherit());
        command
    }

    /// [`Server::start_with`] with `RUST_LOG=rust_log` and its log (stderr) written to `log`.
    ///
    /// # Panics
    ///
    /// As [`Server::start`], or if `log` cannot be created.
    pub fn start_logged(extra: &[&str], rust_log: &str, log: &Path) -> Self {
        let file = std::fs::File::create(log).expect("create the server log");
        let mut command = Command::new(&binaries().server);
        command
            .args(extra)
            .arg("--in-memory")
            .env("RUST_LOG", rust_log)
            .env("NO_COLOR", "1")
            .stderr(file);
        Self::spawn(command)
    }

    fn spawn(command: Command) -> Self {
        Self::spawn_at(command, "127.0.0.1:0")
    }

    fn spawn_at(mut command: Command, listen: &str) -> Self {
        let mut child = command
            .args(["--listen", listen])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn oanquan-server");
        let stdout = child.stdout.take().expect("server stdout");
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            if let Some(Ok(first)) = lines.next() {
                let _ = tx.send(first);
            }
            // Keep draining so the server never blocks on a full pipe.
            for _ in lines {}
        });
        let line = rx
            .recv_timeout(STEP_TIMEOUT)
            .expect("server announces its address");
        let addr = line
            .strip_prefix("oanquan-server listening on ")
            .and_then(|a| a.trim().parse().ok())
            .unwrap_or_else(|| panic!("unexpected first server line: {line:?}"));
        Self { child, addr }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops the server with SIGTERM, as an operator would, and waits for it to exit.
    ///
    /// # Panics
    ///
    /// If the signal cannot be sent or the server has not exited within [`STEP_TIMEOUT`].
    pub fn terminate(mut self) -> ExitStatus {
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -TERM failed");
        let deadline = Instant::now() + STEP_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for the server") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the server did not stop on SIGTERM"
            );
            // No child-exit notification in std short of blocking in `wait`, which could not
            // time out.
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Which stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// A line from some CLI process, tagged with the process's name.
#[derive(Debug, Clone)]
pub struct Line {
    /// When the line was read, for the timings in failure transcripts.
    pub at: Instant,
    pub who: String,
    pub stream: Stream,
    pub text: String,
}

/// The result of a finished one-shot CLI run.
#[derive(Debug)]
pub struct Output {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// A fresh config directory (token file) for one simulated user.
pub fn config_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// `oanquan ARGS` against `server` with the token file in `config`, plain output, nothing
/// started yet (for tests that need their own stdio).
pub fn cli_command(server: &str, config: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(&binaries().cli);
    cmd.args(args)
        .env("OANQUAN_SERVER", server)
        .env("OANQUAN_CONFIG_DIR", config)
        .env("NO_COLOR", "1")
        .env_remove("OANQUAN_NAME");
    cmd
}

/// Runs the CLI to completion with empty stdin.
///
/// # Panics
///
/// If the process cannot be started.
pub fn run_cli(server: &str, config: &Path, args: &[&str]) -> Output {
    let out = cli_command(server, config, args)
        .stdin(Stdio::null())
        .output()
        .expect("run oanquan");
    Output {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A long-running CLI (`play`, `watch`) whose output lines arrive on a shared channel.
#[derive(Debug)]
pub struct CliProcess {
    pub name: String,
    child: Child,
    stdin: Option<ChildStdin>,
}

fn pump(who: String, stream: Stream, reader: impl Read + Send + 'static, tx: Sender<Line>) {
    thread::spawn(move || {
        for text in BufReader::new(reader).lines().map_while(Result::ok) {
            let line = Line {
                at: Instant::now(),
                who: who.clone(),
                stream,
                text,
            };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
}

impl CliProcess {
    /// Starts `oanquan ARGS` with piped stdio; every output line goes to `tx`.
    ///
    /// # Panics
    ///
    /// If the process cannot be started.
    pub fn spawn(
        name: &str,
        server: &str,
        config: &Path,
        args: &[&str],
        tx: &Sender<Line>,
    ) -> Self {
        Self::start(name, cli_command(server, config, args), tx)
    }

    /// Starts `oanquan ARGS` on a terminal of its own: `script` (util-linux) runs it on a
    /// pseudo-terminal, so the client sees a terminal on stdin and stdout and plays
    /// interactively; what the test sends is typed into it (and echoed, as a terminal does).
    ///
    /// # Panics
    ///
    /// If `script` cannot be started.
    pub fn spawn_on_terminal(
        name: &str,
        server: &str,
        config: &Path,
        args: &[&str],
        tx: &Sender<Line>,
    ) -> Self {
        Self::spawn_on_terminal_sized(name, server, config, args, None, tx)
    }

    /// [`CliProcess::spawn_on_terminal`] on a terminal `columns` wide (`stty cols`, before the
    /// client starts), as a small window would be.
    ///
    /// # Panics
    ///
    /// As [`CliProcess::spawn_on_terminal`].
    pub fn spawn_on_terminal_sized(
        name: &str,
        server: &str,
        config: &Path,
        args: &[&str],
        columns: Option<u16>,
        tx: &Sender<Line>,
    ) -> Self {
        Self::spawn_on_terminal_with(name, server, config, args, columns, false, tx)
    }

    fn spawn_on_terminal_with(
        name: &str,
        server: &str,
        config: &Path,
        args: &[&str],
        columns: Option<u16>,
        dumb: bool,
        tx: &Sender<Line>,
    ) -> Self {
        let client = cli_command(server, config, args);
        let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
        let line: Vec<String> = std::iter::once(client.get_program())
            .chain(client.get_args())
            .map(|a| quote(&a.to_string_lossy()))
            .collect();
        let mut line = line.join(" ");
        if let Some(columns) = columns {
            line = format!("stty cols {columns} rows 50 && {line}");
        }
        let mut cmd = Command::new("script");
        cmd.args(["-q", "-f", "-e", "-c", &line, "/dev/null"]);
        // A terminal that takes colour and UTF-8, whatever the machine running the tests has
        // (the client draws plain text for `TERM=dumb` or a locale that is not UTF-8).
        cmd.env("TERM", "xterm")
            .env("LANG", "C.UTF-8")
            .env_remove("LC_ALL")
            .env_remove("LC_CTYPE");
        for (key, value) in client.get_envs() {
            match value {
                Some(value) => cmd.env(key, value),
                None => cmd.env_remove(key),
            };
        }
        if dumb {
            cmd.env("TERM", "dumb");
        }
        Self::start(name, cmd, tx)
    }

    /// [`CliProcess::spawn_on_terminal`] on a terminal that takes no cursor control
    /// (`TERM=dumb`, as Emacs's shell sets).
    ///
    /// # Panics
    ///
    /// As [`CliProcess::spawn_on_terminal`].
    pub fn spawn_on_dumb_terminal(
        name: &str,
        server: &str,
        config: &Path,
        args: &[&str],
        tx: &Sender<Line>,
    ) -> Self {
        Self::spawn_on_terminal_with(name, server, config, args, None, true, tx)
    }

    fn start(name: &str, mut command: Command, tx: &Sender<Line>) -> Self {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {:?}: {e}", command.get_program()));
        pump(
            name.to_owned(),
            Stream::Stdout,
            child.stdout.take().expect("stdout"),
            tx.clone(),
        );
        pump(
            name.to_owned(),
            Stream::Stderr,
            child.stderr.take().expect("stderr"),
            tx.clone(),
        );
        let stdin = child.stdin.take();
        Self {
            name: name.to_owned(),
            child,
            stdin,
        }
    }

    /// Types one line.
    ///
    /// # Panics
    ///
    /// If stdin was closed.
    pub fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{line}").expect("write to oanquan stdin");
        stdin.flush().expect("flush");
    }

    /// Sends SIGINT, as Ctrl-C on a terminal does.
    ///
    /// # Panics
    ///
    /// If the signal cannot be sent.
    pub fn interrupt(&self) {
        let sent = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -INT failed");
    }

    /// Closes stdin (end of input).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Waits for the process to exit.
    ///
    /// # Panics
    ///
    /// If it does not exit within [`STEP_TIMEOUT`].
    pub fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + STEP_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "{} did not exit", self.name);
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for CliProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads tagged lines, keeping a transcript for failure messages.
#[derive(Debug)]
pub struct Lines {
    rx: Receiver<Line>,
    start: Instant,
    pub transcript: Vec<Line>,
    /// Per process: the transcript index after the last line [`Lines::follow`] returned.
    cursors: HashMap<String, usize>,
}

impl Lines {
    pub fn new() -> (Sender<Line>, Self) {
        let (tx, rx) = mpsc::channel();
        (
            tx,
            Self {
                rx,
                start: Instant::now(),
                transcript: Vec::new(),
                cursors: HashMap::new(),
            },
        )
    }

    /// The next line from anyone.
    ///
    /// # Panics
    ///
    /// If nothing arrives within [`STEP_TIMEOUT`] (with the transcript's tail in the message).
    pub fn next_line(&mut self) -> Line {
        match self.rx.recv_timeout(STEP_TIMEOUT) {
            Ok(line) => {
                self.transcript.push(line.clone());
                line
            }
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                panic!(
                    "no output for {STEP_TIMEOUT:?}; last lines:\n{}",
                    self.tail(40)
                )
            }
        }
    }

    /// Skips lines until one from `who` on stdout matches `pred`.
    pub fn expect(&mut self, who: &str, pred: impl Fn(&str) -> bool) -> String {
        loop {
            let line = self.next_line();
            if line.who == who && line.stream == Stream::Stdout && pred(&line.text) {
                return line.text;
            }
        }
    }

    /// The next stdout line of `who` that matches `pred`, after the last one `follow` returned
    /// for `who`: from the lines read already, or else waiting for it. Unlike
    /// [`Lines::expect`], waiting for one process loses no line of another, so the lines of
    /// processes running side by side can be followed in any order. Returns the line and its
    /// index in the transcript.
    ///
    /// # Panics
    ///
    /// As [`Lines::next_line`].
    pub fn follow(&mut self, who: &str, pred: impl Fn(&str) -> bool) -> (usize, String) {
        let mut at = self.cursors.get(who).copied().unwrap_or(0);
        loop {
            while let Some(line) = self.transcript.get(at) {
                at += 1;
                if line.who == who && line.stream == Stream::Stdout && pred(&line.text) {
                    let text = line.text.clone();
                    self.cursors.insert(who.to_owned(), at);
                    return (at - 1, text);
                }
            }
            self.next_line();
        }
    }

    /// The last stdout line of `who` before transcript index `before` that matches `pred`.
    pub fn last_before(
        &self,
        who: &str,
        before: usize,
        pred: impl Fn(&str) -> bool,
    ) -> Option<String> {
        self.transcript[..before.min(self.transcript.len())]
            .iter()
            .rev()
            .find(|l| l.who == who && l.stream == Stream::Stdout && pred(&l.text))
            .map(|l| l.text.clone())
    }

    pub fn tail(&self, n: usize) -> String {
        let start = self.transcript.len().saturating_sub(n);
        self.transcript[start..]
            .iter()
            .map(|l| {
                let t = l.at.saturating_duration_since(self.start).as_secs_f64();
                format!("{t:8.3}s [{} {:?}] {}", l.who, l.stream, l.text)
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Takes in every line that has arrived, and those that arrive until `quiet` passes with
    /// none: what processes that have exited wrote last (a prompt left without a newline).
    pub fn settle(&mut self, quiet: Duration) {
        while let Ok(line) = self.rx.recv_timeout(quiet) {
            self.transcript.push(line);
        }
    }

    /// Stdout lines of one process, in order.
    pub fn stdout_of(&self, who: &str) -> Vec<String> {
        self.transcript
            .iter()
            .filter(|l| l.who == who && l.stream == Stream::Stdout)
            .map(|l| l.text.clone())
            .collect()
    }
}

/// A TCP proxy between a CLI and the server that a test can cut and restore, to simulate a
/// dropped connection without restarting the (in-memory) server.
#[derive(Debug)]
pub struct Proxy {
    pub addr: SocketAddr,
    down: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    /// Listens on 127.0.0.1:0 and forwards to `upstream`.
    ///
    /// # Panics
    ///
    /// If it cannot bind.
    pub fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let down = Arc::new(AtomicBool::new(false));
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (down2, open2) = (down.clone(), open.clone());
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                // While "down", connections are accepted and dropped at once: the client sees
                // its connection attempt fail, as with a dead network path.
                if down2.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
                    continue;
                };
                if let Ok(mut open) = open2.lock() {
                    open.extend(client.try_clone().ok());
                    open.extend(server.try_clone().ok());
                }
                copy_thread(client, server);
                copy_thread(s2, c2);
            }
        });
        Self { addr, down, open }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Closes every forwarded connection and refuses new ones until [`Proxy::restore`].
    pub fn cut(&self) {
        self.down.store(true, Ordering::SeqCst);
        if let Ok(mut open) = self.open.lock() {
            for stream in open.drain(..) {
                let _ = stream.shutdown(Shutdown::Both);
            }
        }
    }

    pub fn restore(&self) {
        self.down.store(false, Ordering::SeqCst);
    }
}

fn copy_thread(mut from: TcpStream, mut to: TcpStream) {
    thread::spawn(move || {
        let _ = std::io::copy(&mut from, &mut to);
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}

/// A tiny deterministic generator for picking moves (no extra dependency, reproducible games).
#[derive(Debug, Clone)]
pub struct Lcg(pub u64);

impl Lcg {
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        if items.is_empty() {
            return None;
        }
        let idx = usize::try_from((self.0 >> 33) % items.len() as u64).unwrap_or(0);
        items.get(idx)
    }
}

/// Plays `play` processes until every process in `finishers` has printed `game over:`.
///
/// At each `your move` prompt, `answer(who, legal, lines)` says what to type, given the moves
/// listed on that player's preceding `legal moves:` line. An answer of `resign` is confirmed
/// (`y`) when the client asks `resign? (y/N)`. `hook` sees every line first (to cut
/// a proxy, ...).
///
/// # Panics
///
/// If a prompt comes from a process not in `players`, or after 2,000 prompts (a game that does
/// not end), or if no line arrives within [`STEP_TIMEOUT`].
pub fn drive(
    lines: &mut Lines,
    players: &mut HashMap<String, CliProcess>,
    finishers: &[&str],
    mut answer: impl FnMut(&str, &[String], &Lines) -> String,
    mut hook: impl FnMut(&Line),
) {
    let mut legal: HashMap<String, Vec<String>> = HashMap::new();
    let mut finished: HashSet<String> = HashSet::new();
    let mut prompts = 0;
    while finishers.iter().any(|f| !finished.contains(*f)) {
        let line = lines.next_line();
        hook(&line);
        if line.stream != Stream::Stdout {
            continue;
        }
        let text = line.text.as_str();
        if let Some(list) = text.strip_prefix("legal moves: ") {
            legal.insert(
                line.who.clone(),
                list.split_whitespace().map(str::to_owned).collect(),
            );
        } else if text == "your move" {
            prompts += 1;
            assert!(prompts < 2000, "game does not end:\n{}", lines.tail(60));
            let moves = legal.remove(&line.who).unwrap_or_default();
            let typed = answer(&line.who, &moves, lines);
            players
                .get_mut(&line.who)
                .expect("a player prompts")
                .send(&typed);
        } else if text == "resign? (y/N)" {
            players.get_mut(&line.who).expect("a player asks").send("y");
        } else if text.starts_with("game over: ") {
            finished.insert(line.who.clone());
        }
    }
}

/// One of `moves` at random, for [`drive`].
///
/// # Panics
///
/// If `moves` is empty (a prompt without legal moves), with the transcript's tail.
pub fn random_move(rng: &mut Lcg, moves: &[String], lines: &Lines) -> String {
    rng.pick(moves)
        .unwrap_or_else(|| panic!("prompt without legal moves:\n{}", lines.tail(30)))
        .clone()
}
