//! Compiles `proto/oanquan/v1/*.proto` with protox (no system `protoc` needed) and generates the
//! prost messages and tonic services. The encoded `FileDescriptorSet` (imports and source info
//! included, for gRPC reflection) is written to `$OUT_DIR/oanquan_v1_descriptor.bin`.

use std::{env, fs, path::PathBuf};

use prost::Message as _;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?);
    let proto_root = manifest_dir.join("../../proto");
    let proto_dir = proto_root.join("oanquan/v1");
    println!("cargo:rerun-if-changed={}", proto_dir.display());

    let mut files: Vec<PathBuf> = Vec::new();
    for entry in fs::read_dir(&proto_dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|ext| ext == "proto") {
            println!("cargo:rerun-if-changed={}", path.display());
            files.push(path);
        }
    }
    files.sort();

    let fds = protox::Compiler::new([&proto_root])?
        .include_imports(true)
        .include_source_info(true)
        .open_files(&files)?
        .file_descriptor_set();

    let out_dir = PathBuf::from(env::var("OUT_DIR")?);
    fs::write(
        out_dir.join("oanquan_v1_descriptor.bin"),
        fds.encode_to_vec(),
    )?;

    let client = env::var_os("CARGO_FEATURE_CLIENT").is_some();
    let server = env::var_os("CARGO_FEATURE_SERVER").is_some();
    // Type names (`prost::Name`) let the `json` feature find each message's descriptor by its
    // full name; they cost nothing when unused.
    let mut config = tonic_prost_build::Config::new();
    config.enable_type_names();
    tonic_prost_build::configure()
        // prost's bytes with fewer sizing passes (src/codec.rs).
        .codec_path("crate::codec::Codec")
        .build_client(client)
        .build_server(server)
        .build_transport(client)
        .compile_fds_with_config(fds, config)?;
    Ok(())
}
