//! What JSON clients (grpcurl, buf curl, the examples) see: responses of a real server written
//! in the canonical protobuf JSON mapping, through the descriptors the server serves.

mod common;

use std::sync::OnceLock;

use common::*;
use oanquan_proto::v1 as pb;
use prost::Message as _;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor, SerializeOptions};
use serde_json::{Value, json};
use tonic::Code;

fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| DescriptorPool::decode(oanquan_proto::FILE_DESCRIPTOR_SET).unwrap())
}

fn descriptor(name: &str) -> MessageDescriptor {
    pool()
        .get_message_by_name(&format!("oanquan.v1.{name}"))
        .unwrap()
}

/// `message` (of type `oanquan.v1.<name>`) in the canonical JSON mapping, defaults left out as
/// grpcurl and buf curl leave them.
fn to_json(name: &str, message: &impl prost::Message) -> Value {
    let dynamic =
        DynamicMessage::decode(descriptor(name), message.encode_to_vec().as_slice()).unwrap();
    let mut out = serde_json::Serializer::new(Vec::new());
    dynamic
        .serialize_with_options(&mut out, &SerializeOptions::new())
        .unwrap();
    serde_json::from_slice(&out.into_inner()).unwrap()
}

/// JSON text as a client would send it, parsed into `M` through the descriptors.
fn from_json<M: prost::Message + Default>(name: &str, text: &str) -> M {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let dynamic = DynamicMessage::deserialize(descriptor(name), &mut deserializer).unwrap();
    M::decode(dynamic.encode_to_vec().as_slice()).unwrap()
}

#[tokio::test]
async fn square_zero_is_written_in_json() {
    let server = start(config()).await;
    let mut rules = server.rules().await;

    // From the standard start, square 1 sown to the LEFT drops its first stone into square 0.
    let applied = rules
        .apply_move(from_json::<pb::ApplyMoveRequest>(
            "ApplyMoveRequest",
            r#"{"rules": {"preset": "standard"}, "move": {"square": 1, "direction": "DIRECTION_LEFT"}}"#,
        ))
        .await
        .unwrap()
        .into_inner();
    let steps = &to_json("ApplyMoveResponse", &applied)["steps"];
    assert_eq!(
        steps[0],
        json!({"pickUp": {"square": 1, "stones": 5}}),
        "{steps}"
    );
    assert_eq!(steps[1], json!({"sow": {"square": 0}}), "{steps}");

    // The same in a hosted game's trace, as PlayMove returns it.
    let mut games = server.games().await;
    let (id, first, _) = started(&mut games, "standard").await;
    let played = play(&mut games, &id, &first, 1, pb::Direction::Left, Some(0))
        .await
        .unwrap();
    let record = &to_json("PlayMoveResponse", &played)["record"];
    assert_eq!(
        record["move"],
        json!({"square": 1, "direction": "DIRECTION_LEFT"})
    );
    assert_eq!(
        record["steps"][1],
        json!({"sow": {"square": 0}}),
        "{record}"
    );

    // Square 0 sent in JSON reaches the server as square 0, so the move is refused as illegal (a
    // mandarin square is nobody's to empty), not as a move without a square.
    let status = rules
        .apply_move(from_json::<pb::ApplyMoveRequest>(
            "ApplyMoveRequest",
            r#"{"move": {"square": 0, "direction": "DIRECTION_RIGHT"}}"#,
        ))
        .await
        .unwrap_err();
    assert_reason(
        &status,
        Code::FailedPrecondition,
        "ERROR_REASON_ILLEGAL_MOVE",
    );
    let status = rules
        .apply_move(from_json::<pb::ApplyMoveRequest>(
            "ApplyMoveRequest",
            r#"{"move": {"direction": "DIRECTION_RIGHT"}}"#,
        ))
        .await
        .unwrap_err();
    assert_field(&status, "move.square");
    server.stop().await.unwrap();
}

/// Every field that holds a ring index has presence, so that square 0 is written like any other
/// square; a new one without `optional` fails here.
#[test]
fn every_ring_index_field_has_presence() {
    let mut checked = Vec::new();
    for message in pool().all_messages() {
        for field in message.fields() {
            let name = field.name();
            if matches!(name, "square" | "gap" | "next") || name.ends_with("_square") {
                assert!(
                    field.supports_presence() && !field.is_list(),
                    "{} must be `optional uint32`",
                    field.full_name()
                );
                checked.push(field.full_name().to_owned());
            }
        }
    }
    // Move.square and the squares of seven kinds of trace step (two in StopTwoEmpty).
    assert_eq!(checked.len(), 9, "{checked:?}");
}
