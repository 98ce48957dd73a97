//! `oanquan-echo-server --help` describes the echo server, not the load benchmark whose crate
//! it shares.

use std::process::Command;

#[test]
fn echo_server_help_describes_the_echo_server() {
    let output = Command::new(env!("CARGO_BIN_EXE_oanquan-echo-server"))
        .arg("--help")
        .output()
        .expect("run oanquan-echo-server --help");
    assert!(output.status.success(), "{output:?}");
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(
        help.starts_with("The bare tonic echo server that `oanquan-bench` measures"),
        "{help}"
    );
    assert!(
        !help.contains(env!("CARGO_PKG_DESCRIPTION")),
        "the crate's description is the benchmark's: {help}"
    );
    // -h gives the one-line summary.
    let short = Command::new(env!("CARGO_BIN_EXE_oanquan-echo-server"))
        .arg("-h")
        .output()
        .expect("run oanquan-echo-server -h");
    let short = String::from_utf8_lossy(&short.stdout);
    assert!(short.starts_with("The bare tonic echo server"), "{short}");
    assert!(!short.contains("SIGTERM"), "-h stays short: {short}");
}
