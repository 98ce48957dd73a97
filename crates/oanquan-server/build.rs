//! Compiles the vendored `google/rpc/error_details.proto` (with its import
//! `google/protobuf/duration.proto`, which protox ships) into a descriptor set that the server
//! registers with gRPC reflection. Without it, grpcurl cannot decode the `google.rpc.BadRequest`
//! and `google.rpc.ErrorInfo` details of our errors. tonic-types embeds these types too, but
//! under the file name `error_details.proto` rather than the canonical path.

use std::{env, fs, path::PathBuf};

use prost::Message as _;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_root = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?).join("proto");
    let file = proto_root.join("google/rpc/error_details.proto");
    println!("cargo:rerun-if-changed={}", file.display());
    // The embedded web page (`include_dir!` in src/web.rs): files added or removed too.
    println!("cargo:rerun-if-changed=web-dist");
    let fds = protox::Compiler::new([&proto_root])?
        .include_imports(true)
        .include_source_info(false)
        .open_files([&file])?
        .file_descriptor_set();
    let out = PathBuf::from(env::var("OUT_DIR")?).join("google_rpc_descriptor.bin");
    fs::write(out, fds.encode_to_vec())?;
    Ok(())
}
