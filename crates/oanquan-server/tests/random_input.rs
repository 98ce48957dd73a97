//! Random requests to every method of every service, built from the descriptors the server
//! publishes: each field left unset or given an extreme value (empty, very long and non-ASCII
//! strings, 0 and the type's limits, out-of-range enum numbers, NaN and infinities, long
//! repeated fields), and the ids and tokens of a real game and account mixed in so that some
//! requests get past validation. Whatever the request, the server must answer with a status
//! that says what was wrong, never `INTERNAL`, `UNKNOWN` or `DATA_LOSS` (a bug or a panic
//! behind them), within the deadline; and afterwards serve a game as before.

mod common;

use std::time::Duration;

use common::*;
use oanquan_proto::v1 as pb;
use oanquan_proto::v1::account_service_client::AccountServiceClient;
use prost::Message as _;
use prost_reflect::{
    DescriptorPool, DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor,
    MethodDescriptor, Value,
};
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};

/// Requests per method and seed: enough to meet every field's values, few enough for
/// `cargo test`.
const CALLS_PER_METHOD: usize = 40;

/// How long a stream's first answer is waited for before it counts as open.
const STREAM_WAIT: Duration = Duration::from_millis(150);

/// Real values for the string fields, so that some requests reach past "not found".
struct Known {
    game_ids: Vec<String>,
    credentials: Vec<String>,
    usernames: Vec<String>,
}

fn text(rng: &mut StdRng, known: &Known, field: &FieldDescriptor) -> String {
    let name = field.name();
    let real =
        |values: &[String], rng: &mut StdRng| values[rng.random_range(0..values.len())].clone();
    if rng.random_bool(0.4) {
        if name.contains("game") || name == "id" || name == "of" {
            return real(&known.game_ids, rng);
        }
        if name.contains("name") {
            return real(&known.usernames, rng);
        }
        if name.contains("token") || name.contains("key") {
            return real(&known.credentials, rng);
        }
    }
    let choices: [&dyn Fn(&mut StdRng) -> String; 12] = [
        &|_| String::new(),
        &|_| " ".to_owned(),
        &|_| "\0".to_owned(),
        &|_| "Ô Ăn Quan".to_owned(),
        &|_| "😀".repeat(300),
        &|_| "x".repeat(70_000),
        &|_| "\u{200b}\u{202e}abc".to_owned(),
        &|_| "'; DROP TABLE games; --".to_owned(),
        &|_| "standard".to_owned(),
        &|_| "3+".to_owned(),
        &|_| "0123456789abcdef".to_owned(),
        &|rng| {
            let len = rng.random_range(0..40);
            (0..len)
                .map(|_| rng.random_range('\0'..='\u{2FFF}'))
                .collect()
        },
    ];
    choices[rng.random_range(0..choices.len())](rng)
}

fn int(rng: &mut StdRng) -> i64 {
    const EDGES: [i64; 12] = [
        0,
        1,
        -1,
        2,
        11,
        12,
        13,
        300,
        65_536,
        i32::MAX as i64,
        i64::MIN,
        i64::MAX,
    ];
    edge_or(rng, &EDGES, |rng| rng.random_range(-3..20))
}

fn float(rng: &mut StdRng) -> f64 {
    const EDGES: [f64; 8] = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        f64::MAX,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
    ];
    edge_or(rng, &EDGES, |rng| rng.random_range(-100.0..100.0))
}

/// One of `edges` half the time, else an ordinary value.
fn edge_or<T: Copy>(rng: &mut StdRng, edges: &[T], ordinary: impl FnOnce(&mut StdRng) -> T) -> T {
    if rng.random_bool(0.5) {
        edges[rng.random_range(0..edges.len())]
    } else {
        ordinary(rng)
    }
}

fn scalar(rng: &mut StdRng, known: &Known, field: &FieldDescriptor, depth: usize) -> Value {
    match field.kind() {
        Kind::String => Value::String(text(rng, known, field)),
        Kind::Bytes => {
            let len = [0, 1, 32, 33, 1000][rng.random_range(0..5)];
            Value::Bytes(
                (0..len)
                    .map(|_| rng.random::<u8>())
                    .collect::<Vec<_>>()
                    .into(),
            )
        }
        Kind::Bool => Value::Bool(rng.random()),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
            Value::I32(int(rng).clamp(i32::MIN.into(), i32::MAX.into()) as i32)
        }
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Value::I64(int(rng)),
        Kind::Uint32 | Kind::Fixed32 => Value::U32(int(rng).clamp(0, u32::MAX.into()) as u32),
        Kind::Uint64 | Kind::Fixed64 => Value::U64(int(rng).max(0) as u64),
        Kind::Float => Value::F32(float(rng) as f32),
        Kind::Double => Value::F64(float(rng)),
        Kind::Enum(values) => {
            let known: Vec<i32> = values.values().map(|v| v.number()).collect();
            Value::EnumNumber(match rng.random_range(0..4) {
                0 => [-1, 99, i32::MAX][rng.random_range(0..3)],
                _ => known[rng.random_range(0..known.len())],
            })
        }
        Kind::Message(message) => Value::Message(random_message(rng, known, &message, depth + 1)),
    }
}

fn random_message(
    rng: &mut StdRng,
    known: &Known,
    descriptor: &MessageDescriptor,
    depth: usize,
) -> DynamicMessage {
    let mut message = DynamicMessage::new(descriptor.clone());
    // Some requests set almost every field, others only one or two, which more often pass
    // validation and reach the game.
    let skip = [0.2, 0.8, 0.95][rng.random_range(0..3)];
    for field in descriptor.fields() {
        if rng.random_bool(if depth > 3 { 0.9 } else { skip }) {
            continue;
        }
        let value = if field.is_map() {
            let Kind::Message(entry) = field.kind() else {
                continue;
            };
            let (key, value) = (entry.map_entry_key_field(), entry.map_entry_value_field());
            let mut map = std::collections::HashMap::new();
            for _ in 0..rng.random_range(0..3) {
                let key = match scalar(rng, known, &key, depth) {
                    Value::String(s) => MapKey::String(s),
                    Value::I32(i) => MapKey::I32(i),
                    Value::I64(i) => MapKey::I64(i),
                    Value::U32(i) => MapKey::U32(i),
                    Value::U64(i) => MapKey::U64(i),
                    Value::Bool(b) => MapKey::Bool(b),
                    _ => continue,
                };
                map.insert(key, scalar(rng, known, &value, depth));
            }
            Value::Map(map)
        } else if field.is_list() {
            // Long lists of numbers (a board of 5,000 squares); strings and messages short,
            // so that a request stays under the message size limit.
            let long = !matches!(field.kind(), Kind::String | Kind::Bytes | Kind::Message(_));
            let lengths: &[usize] = if long && depth < 3 {
                &[0, 1, 2, 11, 12, 13, 5_000]
            } else {
                &[0, 1, 2, 3]
            };
            let len = lengths[rng.random_range(0..lengths.len())];
            Value::List(
                (0..len)
                    .map(|_| scalar(rng, known, &field, depth))
                    .collect(),
            )
        } else {
            scalar(rng, known, &field, depth)
        };
        message.set_field(&field, value);
    }
    message
}

/// The request as JSON, long strings and lists shortened, for a failure's message.
fn shown(request: &DynamicMessage) -> String {
    let json = serde_json::to_string(request).unwrap_or_else(|e| format!("(not JSON: {e})"));
    match json.char_indices().nth(2_000) {
        Some((cut, _)) => format!("{}… ({} bytes)", &json[..cut], json.len()),
        None => json,
    }
}

fn methods(pool: &DescriptorPool) -> Vec<MethodDescriptor> {
    pool.services()
        .filter(|s| s.full_name().starts_with("oanquan."))
        .flat_map(|s| s.methods().collect::<Vec<_>>())
        .collect()
}

#[tokio::test]
async fn random_fields_on_every_method_never_get_internal_errors() {
    let mut settings = config();
    settings.clients.rate_limit = 0.0;
    settings.games.max_open_games_per_client = 0;
    let server = start(settings).await;
    let mut games = server.games().await;
    let (game_id, first, second) = started(&mut games, "standard").await;
    let registered = AccountServiceClient::new(server.channel().await)
        .register(pb::RegisterRequest {
            username: "hoa".to_owned(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let known = Known {
        game_ids: vec![game_id, "0123456789abcdef".to_owned()],
        credentials: vec![first, second, registered.api_key],
        usernames: vec!["hoa".to_owned(), "HOA".to_owned()],
    };

    let pool = DescriptorPool::decode(oanquan_proto::FILE_DESCRIPTOR_SET).unwrap();
    let methods = methods(&pool);
    assert!(methods.len() >= 30, "{} methods", methods.len());
    let mut rng = StdRng::seed_from_u64(20_261_202);
    let mut answered = std::collections::BTreeMap::<String, usize>::new();
    for method in &methods {
        let path = format!("/{}/{}", method.parent_service().full_name(), method.name());
        for _ in 0..CALLS_PER_METHOD {
            let request = random_message(&mut rng, &known, &method.input(), 0);
            let authorization = match rng.random_range(0..6) {
                0 | 1 => Some(format!(
                    "Bearer {}",
                    known.credentials[rng.random_range(0..known.credentials.len())]
                )),
                2 => Some(
                    ["Bearer", "Bearer ", "Basic aG9hOg==", "bearer x"][rng.random_range(0..4)]
                        .to_owned(),
                ),
                3 => Some(format!("Bearer {}", "k".repeat(5_000))),
                _ => None,
            };
            let payload = request.encode_to_vec();
            let body = grpc_frame(false, u32::try_from(payload.len()).unwrap(), &payload);
            // A stream that stays open (a watch, a seek) is a fine answer.
            let code = raw_grpc_call(
                server.addr,
                &path,
                authorization.as_deref(),
                body,
                STREAM_WAIT,
            )
            .await
            .map_or_else(|| "open".to_owned(), |(code, _)| code);
            // 2 UNKNOWN, 13 INTERNAL, 15 DATA_LOSS: a bug or a panic behind the answer.
            assert!(
                !["2", "13", "15"].contains(&code.as_str()),
                "{path} answered grpc-status {code} to {}",
                shown(&request)
            );
            *answered.entry(code).or_default() += 1;
        }
    }
    // The requests got past validation often enough to mean something.
    assert!(answered.get("0").copied().unwrap_or(0) > 50, "{answered:?}");

    // And the server still serves a game as before.
    let (game_id, first, second) = started(&mut games, "standard").await;
    play_one(&mut games, &game_id, (&first, &second)).await;
}
