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
//! The services and clients encode with [`codec::Codec`]: prost's bytes, written in fewer passes.
//!
//! [`FILE_DESCRIPTOR_SET`] is the encoded descriptor set, for `tonic-reflection`. With the `json`
//! feature, [`json::to_json`] writes any message in the canonical protobuf JSON mapping.

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

pub mod codec;

/// The encoded `google.protobuf.FileDescriptorSet` of every file of `oanquan.v1` and its imports
/// (`google/protobuf/timestamp.proto`), with source info (comments). Register it with
/// `tonic_reflection::server::Builder::configure().register_encoded_file_descriptor_set(..)`.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/oanquan_v1_descriptor.bin"));

/// The canonical protobuf JSON mapping (<https://protobuf.dev/programming-guides/json/>), the
/// dialect of grpcurl, buf curl and every protobuf JSON library: lowerCamelCase field names, enum
/// value names (`PLAYER_FIRST`), RFC 3339 timestamps, 64-bit integers as strings, fields with
/// their default value left out.
///
/// The generated types carry no serde code; a message is re-read as a `prost_reflect`
/// `DynamicMessage` through the descriptor set embedded in this crate, so the JSON follows the
/// `.proto` files and cannot drift from them.
#[cfg(feature = "json")]
pub mod json {
    use std::sync::OnceLock;

    use prost_reflect::{DescriptorPool, DynamicMessage, SerializeOptions};

    /// A message this crate cannot describe: only possible for a type from outside `oanquan.v1`
    /// and its imports.
    #[derive(Debug)]
    pub struct JsonError(String);

    impl std::fmt::Display for JsonError {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0)
        }
    }

    impl std::error::Error for JsonError {}

    fn pool() -> Result<&'static DescriptorPool, JsonError> {
        static POOL: OnceLock<Result<DescriptorPool, String>> = OnceLock::new();
        POOL.get_or_init(|| {
            DescriptorPool::decode(super::FILE_DESCRIPTOR_SET).map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| JsonError(format!("the embedded descriptor set does not decode: {e}")))
    }

    /// `message` as one line of canonical protobuf JSON.
    ///
    /// # Errors
    ///
    /// [`JsonError`] if `M` is not a message of this API (or its imports).
    pub fn to_json<M: prost::Message + prost::Name>(message: &M) -> Result<String, JsonError> {
        let name = M::full_name();
        let descriptor = pool()?
            .get_message_by_name(&name)
            .ok_or_else(|| JsonError(format!("no descriptor for {name}")))?;
        let dynamic = DynamicMessage::decode(descriptor, message.encode_to_vec().as_slice())
            .map_err(|e| JsonError(format!("{name} does not re-decode: {e}")))?;
        let mut serializer = serde_json::Serializer::new(Vec::new());
        dynamic
            .serialize_with_options(&mut serializer, &SerializeOptions::new())
            .map_err(|e| JsonError(format!("{name} does not serialise: {e}")))?;
        String::from_utf8(serializer.into_inner())
            .map_err(|e| JsonError(format!("{name}: JSON is not UTF-8: {e}")))
    }
}

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

    #[cfg(feature = "json")]
    #[test]
    fn json_is_the_canonical_mapping() {
        use super::v1;

        let game = v1::Game {
            id: "g1".into(),
            status: v1::GameStatus::Active.into(),
            first_seat: Some(v1::Seat {
                player: v1::Player::First.into(),
                occupied: true,
                display_name: "Lan".into(),
                ..v1::Seat::default()
            }),
            move_count: 0,
            create_time: Some(prost_types::Timestamp {
                seconds: 1_700_000_000,
                nanos: 500_000_000,
            }),
            ..v1::Game::default()
        };
        let text = super::json::to_json(&v1::GetGameResponse { game: Some(game) }).expect("json");
        assert_eq!(
            text,
            r#"{"game":{"id":"g1","firstSeat":{"player":"PLAYER_FIRST","occupied":true,"displayName":"Lan"},"status":"GAME_STATUS_ACTIVE","createTime":"2023-11-14T22:13:20.500Z"}}"#
        );
        let event = v1::GameEvent {
            sequence: 7,
            ..v1::GameEvent::default()
        };
        assert_eq!(
            super::json::to_json(&event).expect("json"),
            r#"{"sequence":"7"}"#,
            "uint64 as a string"
        );
    }
}
