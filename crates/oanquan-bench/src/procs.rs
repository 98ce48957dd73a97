//! Server processes: start one, read the address it prints, sample its CPU time and memory
//! from `/proc`, and kill it when dropped.

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context as _, bail};

/// A running server process (`oanquan-server` or `oanquan-echo-server`). Killed on drop.
#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    addr: SocketAddr,
}

impl ServerProcess {
    /// Starts `bin` with `args`, which must make it listen on a free port, and waits (at most
    /// 20 s) for its one stdout line `<name> listening on <ip:port>`. Its stderr (logs) is
    /// discarded.
    ///
    /// # Errors
    ///
    /// If the process cannot start, exits, or prints no such line in time.
    pub fn start(bin: &Path, args: &[String]) -> anyhow::Result<ServerProcess> {
        Self::start_with_env(bin, args, &[])
    }

    /// [`ServerProcess::start`] with more environment variables (a database URL, which may
    /// hold a password, goes there rather than into the process list).
    ///
    /// # Errors
    ///
    /// As [`ServerProcess::start`].
    pub fn start_with_env(
        bin: &Path,
        args: &[String],
        env: &[(&str, &str)],
    ) -> anyhow::Result<ServerProcess> {
        let mut child = Command::new(bin)
            .args(args)
            .env("RUST_LOG", "warn")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let stdout = child.stdout.take().context("no stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let _ = tx.send(line);
            // Keep reading so that the server never blocks on a full pipe.
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
        });
        let line = match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                bail!("{} printed no listening line within 20 s", bin.display());
            }
        };
        let Some(addr) = line
            .trim()
            .rsplit_once(" listening on ")
            .and_then(|(_, addr)| addr.parse().ok())
        else {
            let _ = child.kill();
            let status = child.wait().ok();
            bail!(
                "{} did not start: stdout {line:?}, exit {status:?} (args {args:?})",
                bin.display()
            );
        };
        Ok(ServerProcess { child, addr })
    }

    /// The address it listens on.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its process id.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// CPU time and memory now.
    ///
    /// # Errors
    ///
    /// If `/proc/<pid>` cannot be read (the process died).
    pub fn sample(&self) -> anyhow::Result<ProcSample> {
        ProcSample::read(self.pid())
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One reading of `/proc/<pid>/stat` and `/proc/<pid>/status`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcSample {
    /// User + system CPU time so far, in seconds.
    pub cpu_seconds: f64,
    /// Resident set size now (`VmRSS`), in KiB.
    pub rss_kib: u64,
    /// Peak resident set size (`VmHWM`), in KiB.
    pub hwm_kib: u64,
}

impl ProcSample {
    /// Reads the sample of process `pid` (`"self"` works through [`ProcSample::read_self`]).
    ///
    /// # Errors
    ///
    /// If the files cannot be read or parsed.
    pub fn read(pid: u32) -> anyhow::Result<ProcSample> {
        Self::read_dir(&PathBuf::from(format!("/proc/{pid}")))
    }

    /// Reads the sample of this process.
    ///
    /// # Errors
    ///
    /// If the files cannot be read or parsed.
    pub fn read_self() -> anyhow::Result<ProcSample> {
        Self::read_dir(Path::new("/proc/self"))
    }

    fn read_dir(dir: &Path) -> anyhow::Result<ProcSample> {
        let stat = std::fs::read_to_string(dir.join("stat"))?;
        let status = std::fs::read_to_string(dir.join("status"))?;
        let ticks = parse_stat_ticks(&stat).context("parsing /proc/<pid>/stat")?;
        Ok(ProcSample {
            cpu_seconds: ticks as f64 / clock_ticks_per_second() as f64,
            rss_kib: parse_status_kib(&status, "VmRSS:").unwrap_or(0),
            hwm_kib: parse_status_kib(&status, "VmHWM:").unwrap_or(0),
        })
    }
}

/// CPU time so far, in seconds, of every process whose command name (`/proc/<pid>/comm`) is
/// `command`, e.g. `postgres` for a local database server and all its sessions. Processes that
/// cannot be read (another user's, under some kernels' settings, or gone) count 0.
#[must_use]
pub fn command_cpu_seconds(command: &str) -> f64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    let mut ticks = 0;
    for entry in entries.flatten() {
        let dir = entry.path();
        let is_pid = entry
            .file_name()
            .to_str()
            .is_some_and(|name| name.bytes().all(|b| b.is_ascii_digit()));
        if !is_pid {
            continue;
        }
        let matches =
            std::fs::read_to_string(dir.join("comm")).is_ok_and(|comm| comm.trim() == command);
        if matches && let Ok(stat) = std::fs::read_to_string(dir.join("stat")) {
            ticks += parse_stat_ticks(&stat).unwrap_or(0);
        }
    }
    ticks as f64 / clock_ticks_per_second() as f64
}

/// `utime + stime` (fields 14 and 15) of a `/proc/<pid>/stat` line, in clock ticks. The command
/// name (field 2) may hold spaces and parentheses, so fields are counted after its last `)`.
#[must_use]
pub fn parse_stat_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // `rest` starts at field 3 (state): utime is field 14, the 12th from here.
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The value in KiB of a `Key:   123 kB` line of `/proc/<pid>/status`.
#[must_use]
pub fn parse_status_kib(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|value| value.parse().ok())
}

/// `getconf CLK_TCK`, read once; 100 (the Linux value everywhere in practice) if unavailable.
fn clock_ticks_per_second() -> u64 {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .and_then(|text| text.trim().parse().ok())
            .filter(|&ticks| ticks > 0)
            .unwrap_or(100)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_ticks_skip_odd_command_names() {
        let stat = "4242 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 3 0";
        assert_eq!(parse_stat_ticks(stat), Some(300));
    }

    #[test]
    fn status_values_in_kib() {
        let status = "Name:\tx\nVmHWM:\t  123456 kB\nVmRSS:\t   99 kB\n";
        assert_eq!(parse_status_kib(status, "VmHWM:"), Some(123_456));
        assert_eq!(parse_status_kib(status, "VmRSS:"), Some(99));
        assert_eq!(parse_status_kib(status, "VmSwap:"), None);
    }

    #[test]
    fn command_cpu_counts_only_that_command() {
        assert_eq!(command_cpu_seconds("no-such-command-oq"), 0.0);
        // This test's own process: busy for a moment so that it has a tick or more.
        let comm = std::fs::read_to_string("/proc/self/comm").expect("/proc/self/comm");
        let start = std::time::Instant::now();
        let mut x = 0_u64;
        while start.elapsed() < Duration::from_millis(50) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(command_cpu_seconds(comm.trim()) > 0.0);
    }

    #[test]
    fn this_process_has_a_sample() {
        let sample = ProcSample::read_self().expect("/proc/self");
        assert!(sample.rss_kib > 0 && sample.hwm_kib >= sample.rss_kib);
    }
}
