//! Compiles the benchmark's own `echo.proto` with protox (no `protoc`) and generates the tonic
//! client and server, as `oanquan-proto` does for the real API.

use std::{env, path::PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_root = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?).join("proto");
    let file = proto_root.join("oanquan/bench/v1/echo.proto");
    println!("cargo:rerun-if-changed={}", file.display());
    let fds = protox::Compiler::new([&proto_root])?
        .include_imports(true)
        .include_source_info(false)
        .open_files([&file])?
        .file_descriptor_set();
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .build_transport(true)
        // `bytes::Bytes` for the payloads: the server replies with one shared buffer, no copy.
        .bytes(".oanquan.bench.v1")
        .compile_fds(fds)?;
    Ok(())
}
