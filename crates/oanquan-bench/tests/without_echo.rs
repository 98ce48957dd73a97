//! The scenarios that compare nothing with the echo server run without it: a release
//! directory shipped with only `oanquan-server` and `oanquan-bench` (an outside probe's) could
//! run none of them, `clocks` and `cross-node` included.

use std::process::Command;

/// This package's `oanquan-bench`, copied alone into a directory of its own (no
/// `oanquan-echo-server` beside it), run with `args`: (exit success, stderr).
fn bench_alone(args: &[&str]) -> (bool, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = dir.path().join("oanquan-bench");
    std::fs::copy(env!("CARGO_BIN_EXE_oanquan-bench"), &bin).expect("copy");
    let output = Command::new(&bin)
        .args(args)
        .args(["--server-bin", "/nonexistent/oanquan-server"])
        .output()
        .expect("run oanquan-bench");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn only_the_scenarios_beside_echo_need_the_echo_server() {
    for needs in ["throughput", "all", "spectators", "first-move"] {
        let (ok, stderr) = bench_alone(&[needs]);
        assert!(!ok, "{needs}");
        assert!(
            stderr.contains("oanquan-echo-server is missing"),
            "{needs}: {stderr}"
        );
    }
    // Past the echo's check, these stop at the server that does not exist.
    for alone in ["clocks", "cross-node", "idle", "fanout"] {
        let (ok, stderr) = bench_alone(&[alone]);
        assert!(!ok, "{alone}");
        assert!(!stderr.contains("echo"), "{alone}: {stderr}");
        assert!(
            stderr.contains("/nonexistent/oanquan-server"),
            "{alone}: {stderr}"
        );
    }
}
