//! Generated protobuf messages and gRPC services of the Ô Ăn Quan API (`oanquan.v1`).
//!
//! The `.proto` sources live in `proto/oanquan/v1/` at the workspace root; they are the
//! documentation of the API. Everything is re-exported under [`v1`]:
//!
//! * messages and enums, e.g. [`v1::Position`], [`v1::Move`], [`v1::Game`], [`v1::Player`];
//! * nested types and oneofs in snake-case modules, e.g. [`v1::step::Kind`],
//!   [`v1::game_event::MovePlayed`];
//! * with the `server` feature, `v1::rules_service_server` and `v1::game_service_server`;
//! * with the `client` feature, `v1::rules_service_client` and `v1::game_service_client`.
//!
//! [`FILE_DESCRIPTOR_SET`] is the encoded descriptor set, for `tonic-reflection`.

/// Version 1 of the API: protobuf package `oanquan.v1`.
#[allow(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    rust_2018_idioms,
    clippy::all,
    clippy::pedantic,
    clippy::nursery
)]
pub mod v1 {
    tonic::include_proto!("oanquan.v1");
}

/// The encoded `google.protobuf.FileDescriptorSet` of every file of `oanquan.v1` and its imports
/// (`google/protobuf/timestamp.proto`), with source info (comments). Register it with
/// `tonic_reflection::server::Builder::configure().register_encoded_file_descriptor_set(..)`.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/oanquan_v1_descriptor.bin"));

#[cfg(test)]
mod tests {
    use prost::Message as _;

    use super::FILE_DESCRIPTOR_SET;

    #[test]
    fn descriptor_set_has_both_services() {
        let fds = prost_types::FileDescriptorSet::decode(FILE_DESCRIPTOR_SET)
            .expect("descriptor set decodes");
        let services: Vec<String> = fds
            .file
            .iter()
            .flat_map(|file| {
                let package = file.package().to_owned();
                file.service
                    .iter()
                    .map(move |service| format!("{package}.{}", service.name()))
            })
            .collect();
        assert!(
            services.iter().any(|s| s == "oanquan.v1.GameService"),
            "{services:?}"
        );
        assert!(
            services.iter().any(|s| s == "oanquan.v1.RulesService"),
            "{services:?}"
        );
        assert!(
            fds.file
                .iter()
                .any(|file| file.name() == "google/protobuf/timestamp.proto"),
            "imports included"
        );
        assert!(
            fds.file
                .iter()
                .filter(|file| file.package() == "oanquan.v1")
                .all(|file| file.source_code_info.is_some()),
            "comments included, for reflection"
        );
    }

    #[test]
    fn messages_round_trip() {
        use super::v1;

        let mv = v1::Move {
            square: Some(3),
            direction: v1::Direction::Right.into(),
        };
        let decoded = v1::Move::decode(mv.encode_to_vec().as_slice()).expect("decodes");
        assert_eq!(decoded, mv);
        assert_eq!(decoded.direction(), v1::Direction::Right);
    }
}
