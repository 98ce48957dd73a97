//! `WatchGame` with each event converted and protobuf-encoded once for all its watchers.
//!
//! With many spectators of one game, converting the same [`GameEvent`] to protobuf and encoding
//! it again for every stream was a large share of the server's fan-out work. Here the route
//! `/oanquan.v1.GameService/WatchGame` is served by [`GameRoutes`] in front of the generated
//! `GameServiceServer` (every other method goes to the generated code unchanged), with a codec
//! ([`WireCodec`]) whose items are already-encoded `WatchGameResponse` messages ([`Wire`]).
//! Events delivered through the hub are the same `Arc<GameEvent>` for every watcher, so a small
//! cache keyed by that `Arc`'s identity ([`EncodedEvents`], one per [`GameRoutes`]) encodes each
//! once.
//! Snapshots and heartbeats are per stream and are encoded per stream, as before. The bytes on
//! the wire are exactly what the generated codec writes; stream semantics (sequences, resume,
//! heartbeats, stall timeout, final status) are those of [`super::stream`].
//!
//! Why not the generated service: its codec is chosen per service and encodes every item it is
//! given, so each stream would encode the event again; BENCHMARKS.md ("Spectator fan-out", under
//! "After the profile: the SQLite path") has what encoding once saves with 1,000 spectators.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::{BufMut as _, Bytes};
use futures::future::BoxFuture;
use oanquan_proto::v1 as pb;
use oanquan_proto::v1::game_service_server::GameServiceServer;
use prost::Message as _;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::server::{Grpc, NamedService, ServerStreamingService};
use tonic::{Request, Response, Status};

use super::game_service::{self, GameApi};
use super::status;
use super::stream::{self, WatchStream};
use crate::domain::{GameEvent, WatchItem};
use crate::metrics::StreamKind;
use oanquan_convert as convert;

/// The route served here; everything else goes to the generated service.
const WATCH_GAME: &str = "/oanquan.v1.GameService/WatchGame";

/// Encoded events kept for reuse: enough for the events of the latest moves of many games.
const CACHED_EVENTS: usize = 64;

/// An encoded `WatchGameResponse`.
#[derive(Debug, Clone)]
pub struct Wire(pub Bytes);

impl Wire {
    /// Encodes `message`.
    #[must_use]
    pub fn encode(message: &pb::WatchGameResponse) -> Wire {
        Wire(Bytes::from(message.encode_to_vec()))
    }
}

/// Recently encoded hub events, with the `Arc` each came from (held, so that its address cannot
/// be reused while it is a key).
#[derive(Debug, Default)]
pub struct EncodedEvents {
    recent: Mutex<VecDeque<(Arc<GameEvent>, Bytes)>>,
}

impl EncodedEvents {
    /// `event` as an encoded `WatchGameResponse`, encoded once per `Arc` while it stays among
    /// the [`CACHED_EVENTS`] most recent.
    #[must_use]
    pub fn get(&self, event: &Arc<GameEvent>) -> Bytes {
        let lock = || {
            self.recent
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some((_, bytes)) = lock().iter().rev().find(|(e, _)| Arc::ptr_eq(e, event)) {
            return bytes.clone();
        }
        // Encoded outside the lock: other streams' lookups need not wait for it.
        let bytes = Wire::encode(&pb::WatchGameResponse {
            event: Some(convert::game_event_out(event)),
        })
        .0;
        let mut cache = lock();
        if !cache.iter().any(|(e, _)| Arc::ptr_eq(e, event)) {
            if cache.len() >= CACHED_EVENTS {
                cache.pop_front();
            }
            cache.push_back((Arc::clone(event), bytes.clone()));
        }
        bytes
    }
}

/// Writes [`Wire`] messages as they are; decodes requests with prost.
#[derive(Debug, Clone, Copy, Default)]
pub struct WireCodec;

/// [`WireCodec`]'s encoder.
#[derive(Debug, Clone, Copy, Default)]
pub struct WireEncoder;

/// [`WireCodec`]'s decoder.
#[derive(Debug, Clone, Copy, Default)]
pub struct WireDecoder;

impl Codec for WireCodec {
    type Encode = Wire;
    type Decode = pb::WatchGameRequest;
    type Encoder = WireEncoder;
    type Decoder = WireDecoder;
    fn encoder(&mut self) -> WireEncoder {
        WireEncoder
    }
    fn decoder(&mut self) -> WireDecoder {
        WireDecoder
    }
}

impl Encoder for WireEncoder {
    type Item = Wire;
    type Error = Status;
    fn encode(&mut self, item: Wire, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item.0);
        Ok(())
    }
}

impl Decoder for WireDecoder {
    type Item = pb::WatchGameRequest;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, Status> {
        pb::WatchGameRequest::decode(src)
            .map(Some)
            .map_err(|e| status::undecodable(&e))
    }
}

/// `WatchGame` as [`GameApi::watch_game`](pb::game_service_server::GameService::watch_game)
/// serves it, with encoded messages; a hub event is encoded once for all its watchers.
struct WatchGameWire {
    api: GameApi,
    encoded: Arc<EncodedEvents>,
}

impl ServerStreamingService<pb::WatchGameRequest> for WatchGameWire {
    type Response = Wire;
    type ResponseStream = WatchStream<Wire>;
    type Future = BoxFuture<'static, Result<Response<WatchStream<Wire>>, Status>>;
    fn call(&mut self, request: Request<pb::WatchGameRequest>) -> Self::Future {
        let api = self.api.clone();
        let encoded = Arc::clone(&self.encoded);
        Box::pin(async move {
            let peer = request.remote_addr();
            let (watch, follow_rematch) = game_service::start_game_watch(&api, request)
                .await
                .map_err(status::into_status)?;
            Ok(Response::new(stream::spawn(
                watch,
                stream::Served {
                    settings: api.streams(),
                    peer,
                },
                StreamKind::Game,
                move |item| match item {
                    WatchItem::Event(event) => Wire(encoded.get(&event)),
                    snapshot => Wire::encode(&game_service::game_item(snapshot)),
                },
                |sequence| Wire::encode(&game_service::game_heartbeat(sequence)),
                game_service::game_is_last(follow_rematch),
                stream::no_side(),
            )))
        })
    }
}

/// `GameService`: the generated server, except `WatchGame` (see the module docs).
#[derive(Debug, Clone)]
pub struct GameRoutes {
    inner: GameServiceServer<GameApi>,
    api: GameApi,
    max_request: usize,
    max_message_size: usize,
    encoded: Arc<EncodedEvents>,
}

impl GameRoutes {
    /// Serves `api`, with requests of at most `max_request` bytes and responses of at most
    /// `max_message_size`.
    #[must_use]
    pub fn new(api: GameApi, max_request: usize, max_message_size: usize) -> GameRoutes {
        GameRoutes {
            inner: GameServiceServer::new(api.clone())
                .max_decoding_message_size(max_request)
                .max_encoding_message_size(max_message_size),
            api,
            max_request,
            max_message_size,
            encoded: Arc::default(),
        }
    }
}

impl NamedService for GameRoutes {
    const NAME: &'static str = <GameServiceServer<GameApi> as NamedService>::NAME;
}

impl tower::Service<http::Request<tonic::body::Body>> for GameRoutes {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        if request.uri().path() != WATCH_GAME {
            return self.inner.call(request);
        }
        let method = WatchGameWire {
            api: self.api.clone(),
            encoded: Arc::clone(&self.encoded),
        };
        let (max_request, max) = (self.max_request, self.max_message_size);
        Box::pin(async move {
            let mut grpc =
                Grpc::new(WireCodec).apply_max_message_size_config(Some(max_request), Some(max));
            Ok(grpc.server_streaming(method, request).await)
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use crate::domain::{GameEventKind, GameId};

    fn turn_started(sequence: u64) -> Arc<GameEvent> {
        Arc::new(GameEvent {
            game_id: GameId::generate(),
            sequence,
            time: SystemTime::now(),
            kind: GameEventKind::TurnStarted {
                player: oanquan_rules::Player::Second,
                ply: 6,
                refill: None,
                clock: None,
            },
        })
    }

    #[test]
    fn an_event_is_encoded_once_and_decodes_as_converted() {
        let event = turn_started(7);
        let cache = EncodedEvents::default();
        let first = cache.get(&event);
        let again = cache.get(&event);
        assert_eq!(first.as_ptr(), again.as_ptr(), "shared, not re-encoded");
        let decoded = pb::WatchGameResponse::decode(first).unwrap();
        assert_eq!(decoded.event, Some(convert::game_event_out(&event)));
    }

    #[test]
    fn each_cache_holds_only_its_latest_events() {
        let cache = EncodedEvents::default();
        let oldest = turn_started(0);
        let first = cache.get(&oldest);
        let newest: Vec<_> = (1..=CACHED_EVENTS as u64).map(turn_started).collect();
        for event in &newest {
            let _ = cache.get(event);
        }
        assert_eq!(cache.recent.lock().unwrap().len(), CACHED_EVENTS);
        let last = newest.last().unwrap();
        assert_eq!(cache.get(last).as_ptr(), cache.get(last).as_ptr());
        assert_ne!(
            cache.get(&oldest).as_ptr(),
            first.as_ptr(),
            "pushed out, so encoded again"
        );
        // Another server's cache does not see this one's entries.
        let other = EncodedEvents::default();
        assert_ne!(other.get(last).as_ptr(), cache.get(last).as_ptr());
    }
}
