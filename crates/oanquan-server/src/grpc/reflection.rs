//! Server reflection under the request rate limit, message by message.
//!
//! Reflection is one bidirectional stream: a client may send any number of requests on it, and
//! the [`super::RateLimitLayer`] sees the stream open once. [`Metered`] counts every request
//! message after the first against the same per-address bucket. When the bucket refuses one, the
//! request stream is ended before that message (the reflection service answers what came before
//! and finishes), and the call ends with the same RESOURCE_EXHAUSTED status as a refused call,
//! instead of the service's OK.
//!
//! A status that ends a call is cut to [`MAX_MESSAGE`] bytes in its `grpc-message`, and a
//! request whose names hold a control character or a bidirectional override is refused with
//! INVALID_ARGUMENT before the service sees it whole: the service's answers quote names (cut
//! short, see [`super::reflection_index`]).
//!
//! A request that cannot be decoded (a message cut short by the end of the stream, a
//! compressed or unknown flag, a length over the message size limit, bytes that are no
//! protobuf message) is seen in the framing here (each message is decoded once more, as a
//! `ServerReflectionRequest`, which both versions share on the wire), and the call ends with
//! the error: the status tonic gives any other service's undecodable request. (tonic-reflection,
//! the service this wraps first, ended such a stream with OK.)

use std::convert::Infallible;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use futures::future::BoxFuture;
use http_body::Frame;
use prost::Message as _;
use tonic::Status;
use tonic::body::Body;
use tonic::server::NamedService;
use tonic_reflection::pb::v1::ServerReflectionRequest;
use tower::Service;

use super::status;
use crate::domain::limits::RateLimiter;
use crate::metrics::Metrics;
use crate::peer::peer_ip;

/// The longest `grpc-message` (as sent, percent-encoded) a reflection call ends with.
pub const MAX_MESSAGE: usize = 512;

/// A reflection service (`v1` or `v1alpha`) whose request messages are rate limited one by one.
#[derive(Debug, Clone)]
pub struct Metered<S> {
    inner: S,
    limiter: Arc<RateLimiter>,
    metrics: Option<Arc<Metrics>>,
}

impl<S> Metered<S> {
    /// `inner`, counting each request message after the first against `limiter`.
    #[must_use]
    pub fn new(inner: S, limiter: Arc<RateLimiter>, metrics: Option<Arc<Metrics>>) -> Metered<S> {
        Metered {
            inner,
            limiter,
            metrics,
        }
    }
}

impl<S: NamedService> NamedService for Metered<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> Service<http::Request<Body>> for Metered<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let Some(ip) = peer_ip(&request) else {
            return Box::pin(self.inner.call(request));
        };
        let refused = Arc::new(OnceLock::new());
        let request = request.map(|body| {
            Body::new(Counted {
                inner: body,
                frames: Framing::default(),
                check: Check {
                    ip,
                    limiter: Arc::clone(&self.limiter),
                    metrics: self.metrics.clone(),
                    refused: Arc::clone(&refused),
                },
                ended: false,
            })
        });
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            Ok(response.map(|body| {
                Body::new(Ending {
                    inner: body,
                    refused,
                    done: false,
                })
            }))
        })
    }
}

/// The bucket a stream's messages are counted in, and where a refusal is left for the answer.
struct Check {
    ip: IpAddr,
    limiter: Arc<RateLimiter>,
    metrics: Option<Arc<Metrics>>,
    refused: Arc<OnceLock<Status>>,
}

impl Check {
    /// Whether one more message may pass; a refusal is kept for the response's trailers.
    fn allow(&self) -> bool {
        match self.limiter.check(self.ip) {
            Ok(()) => true,
            Err(limited) => {
                tracing::debug!(ip = %self.ip, "reflection request rate limited");
                if let Some(metrics) = &self.metrics {
                    metrics.rate_limited();
                }
                let _ = self.refused.set(status::rate_limited(&limited));
                false
            }
        }
    }
}

/// Where the request's bytes are in the gRPC framing: each message is a 5-byte prefix (a flag
/// and a big-endian length) and that many bytes.
#[derive(Debug, Default)]
struct Framing {
    /// Bytes of the current message's body still to come.
    body_left: u64,
    /// Prefix bytes seen of the next message (0 to 4; at 5 the message starts).
    prefix: [u8; 5],
    prefix_len: usize,
    /// Messages begun so far.
    messages: u64,
    /// What is wrong with a message, if anything.
    malformed: Option<Status>,
    /// The current message's bytes so far, to decode when it is whole (while nothing is wrong:
    /// at most [`MAX_REQUEST`] bytes).
    body: Vec<u8>,
}

/// The largest request message: tonic's default decoding limit, which the reflection services
/// keep.
const MAX_REQUEST: u64 = 4 * 1024 * 1024;

/// What is wrong with a message whose prefix has `flag` and `length`, if anything.
fn malformed(flag: u8, length: u64) -> Option<Status> {
    if flag > 1 {
        return Some(Status::invalid_argument(format!(
            "a message's flag is {flag}: gRPC knows 0 (plain) and 1 (compressed)"
        )));
    }
    if flag == 1 {
        return Some(Status::invalid_argument(
            "a compressed message, but server reflection takes no compression",
        ));
    }
    (length > MAX_REQUEST).then(|| {
        Status::resource_exhausted(format!(
            "a request message of {length} bytes; the limit is {MAX_REQUEST}"
        ))
    })
}

impl Framing {
    /// Walks `data`; at the start of each message after the first asks `allow`. Returns how many
    /// bytes of `data` may pass: all of them, or those before the prefix of a refused message.
    fn feed(&mut self, data: &[u8], mut allow: impl FnMut() -> bool) -> Option<usize> {
        let mut at = 0;
        while at < data.len() {
            if self.body_left > 0 {
                let take = usize::try_from(self.body_left)
                    .unwrap_or(usize::MAX)
                    .min(data.len() - at);
                if self.malformed.is_none() {
                    self.body.extend_from_slice(&data[at..at + take]);
                }
                at += take;
                self.body_left -= take as u64;
                if self.body_left == 0 && self.message_whole() {
                    // Refused by its content: the service must not see it whole, so its last
                    // byte is held back and the request stream ends inside it.
                    return Some(at - 1);
                }
                continue;
            }
            if self.prefix_len == 0 && self.messages >= 1 && !allow() {
                return Some(at);
            }
            self.prefix[self.prefix_len] = data[at];
            self.prefix_len += 1;
            at += 1;
            if self.prefix_len == 5 {
                self.prefix_len = 0;
                self.messages += 1;
                let [flag, a, b, c, d] = self.prefix;
                self.body_left = u64::from(u32::from_be_bytes([a, b, c, d]));
                if self.malformed.is_none() {
                    self.malformed = malformed(flag, self.body_left);
                }
                if self.body_left == 0 {
                    // An empty message holds no names to refuse.
                    self.message_whole();
                }
            }
        }
        None
    }

    /// The current message has all its bytes: they must decode, and the names it asks for
    /// must be visible text. Returns whether it is refused for its content, which the service
    /// must then not see: its answers quote a name they do not know, and an outside probe had
    /// a right-to-left override and a newline sent back raw (by tonic-reflection, before).
    fn message_whole(&mut self) -> bool {
        let mut refused = false;
        if self.malformed.is_none() {
            match ServerReflectionRequest::decode(self.body.as_slice()) {
                Err(error) => {
                    self.malformed = Some(Status::internal(format!(
                        "failed to decode Protobuf message: {error}"
                    )));
                }
                Ok(request) => {
                    if let Some(ch) = invisible_in(&request) {
                        self.malformed = Some(Status::invalid_argument(format!(
                            "a name in the request holds the invisible or control character \
                             U+{:04X}; protobuf names and file names have none",
                            u32::from(ch)
                        )));
                        refused = true;
                    }
                }
            }
        }
        self.body.clear();
        refused
    }
}

/// The first invisible or control character in the text fields of a reflection request.
fn invisible_in(request: &ServerReflectionRequest) -> Option<char> {
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    let asked = match &request.message_request {
        Some(
            MessageRequest::FileByFilename(text)
            | MessageRequest::FileContainingSymbol(text)
            | MessageRequest::AllExtensionNumbersOfType(text)
            | MessageRequest::ListServices(text),
        ) => text.as_str(),
        Some(MessageRequest::FileContainingExtension(extension)) => {
            extension.containing_type.as_str()
        }
        None => "",
    };
    request
        .host
        .chars()
        .chain(asked.chars())
        .find(|&c| oanquan_game::is_invisible(c))
}

/// The request body, cut before the first message the bucket refuses.
struct Counted {
    inner: Body,
    frames: Framing,
    check: Check,
    ended: bool,
}

impl Counted {
    /// Leaves the first thing wrong with the request for the response's trailers.
    fn note_malformed(&mut self) {
        let unfinished = self.frames.body_left > 0 || self.frames.prefix_len > 0;
        let problem = self.frames.malformed.take().or_else(|| {
            unfinished
                .then(|| Status::invalid_argument("the request stream ended inside a message"))
        });
        if let Some(problem) = problem {
            let _ = self.check.refused.set(problem);
        }
    }
}

impl http_body::Body for Counted {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        if this.ended {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(mut data) => {
                    let cut = this.frames.feed(data.chunk(), || this.check.allow());
                    if this.frames.malformed.is_some() {
                        this.note_malformed();
                    }
                    let Some(cut) = cut else {
                        return Poll::Ready(Some(Ok(Frame::data(data))));
                    };
                    this.ended = true;
                    data.truncate(cut);
                    if data.is_empty() {
                        Poll::Ready(None)
                    } else {
                        Poll::Ready(Some(Ok(Frame::data(data))))
                    }
                }
                Err(frame) => Poll::Ready(Some(Ok(frame))),
            },
            Poll::Ready(None) => {
                this.note_malformed();
                Poll::Ready(None)
            }
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.is_end_stream()
    }
}

/// The response body, ending with the refusal's status when the request was cut.
struct Ending {
    inner: Body,
    refused: Arc<OnceLock<Status>>,
    done: bool,
}

impl Ending {
    fn refusal_trailers(&self) -> Option<http::HeaderMap> {
        let status = self.refused.get()?;
        let mut trailers = http::HeaderMap::new();
        status.add_header(&mut trailers).ok()?;
        Some(trailers)
    }
}

impl http_body::Body for Ending {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        if self.done {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) if frame.is_trailers() => {
                self.done = true;
                let trailers = match self.refusal_trailers() {
                    Some(refusal) => refusal,
                    None => {
                        let Ok(mut trailers) = frame.into_trailers() else {
                            unreachable!("checked to be trailers")
                        };
                        cut_message(&mut trailers);
                        trailers
                    }
                };
                Poll::Ready(Some(Ok(Frame::trailers(trailers))))
            }
            Poll::Ready(None) => {
                self.done = true;
                Poll::Ready(self.refusal_trailers().map(|t| Ok(Frame::trailers(t))))
            }
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        // An answer that is over before its first frame (trailers-only: the status is in its
        // headers) must say so, or it would be polled and could end with a second status.
        self.done || self.inner.is_end_stream()
    }
}

/// Cuts a `grpc-message` longer than [`MAX_MESSAGE`], never inside a `%XX` escape.
fn cut_message(trailers: &mut http::HeaderMap) {
    let Some(message) = trailers.get("grpc-message") else {
        return;
    };
    let bytes = message.as_bytes();
    if bytes.len() <= MAX_MESSAGE {
        return;
    }
    let mut cut = MAX_MESSAGE - 3;
    if let Some(escape) = bytes[cut.saturating_sub(2)..cut]
        .iter()
        .position(|&b| b == b'%')
    {
        cut = cut - 2 + escape;
    }
    let mut shorter = bytes[..cut].to_vec();
    shorter.extend_from_slice(b"...");
    if let Ok(value) = http::HeaderValue::from_bytes(&shorter) {
        trailers.insert("grpc-message", value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message's prefix: not compressed, then `len` big-endian.
    fn prefix(len: u32) -> Vec<u8> {
        let mut bytes = vec![0];
        bytes.extend_from_slice(&len.to_be_bytes());
        bytes
    }

    /// A whole message of `len` bytes, prefix and body.
    fn message(len: u32) -> Vec<u8> {
        let mut bytes = prefix(len);
        bytes.extend(std::iter::repeat_n(7, len as usize));
        bytes
    }

    /// Whole messages of these lengths, one after another.
    fn messages(lens: &[u32]) -> Vec<u8> {
        lens.iter().flat_map(|&len| message(len)).collect()
    }

    /// Feeds `chunks` in turn to a new [`Framing`] that allows every message; returns how many
    /// messages it asked about, and how many it saw begin.
    fn feed_allowing<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> (u32, u64) {
        let mut framing = Framing::default();
        let mut asked = 0;
        for chunk in chunks {
            assert_eq!(
                framing.feed(chunk, || {
                    asked += 1;
                    true
                }),
                None
            );
        }
        (asked, framing.messages)
    }

    #[test]
    fn every_message_after_the_first_is_asked_for() {
        assert_eq!(feed_allowing([&messages(&[3, 0, 300])[..]]), (2, 3));
    }

    #[test]
    fn messages_split_across_frames_are_counted_once() {
        // One byte at a time: prefixes and bodies cut everywhere.
        assert_eq!(feed_allowing(messages(&[10, 70_000, 1]).chunks(1)), (2, 3));
    }

    #[test]
    fn a_refused_message_is_cut_with_what_follows() {
        let mut framing = Framing::default();
        assert_eq!(
            framing.feed(&messages(&[4, 2, 9]), || false),
            Some(message(4).len())
        );
        assert_eq!(framing.messages, 1);
    }

    #[test]
    fn long_messages_are_cut_outside_escapes() {
        for text in [
            "x".repeat(10_000),
            "%C3%A9".repeat(3_000),
            "ab%20".repeat(500),
        ] {
            let mut trailers = http::HeaderMap::new();
            trailers.insert("grpc-status", http::HeaderValue::from_static("5"));
            trailers.insert("grpc-message", text.parse().unwrap());
            cut_message(&mut trailers);
            let cut = trailers["grpc-message"].to_str().unwrap();
            assert!(cut.len() <= MAX_MESSAGE, "{}", cut.len());
            assert!(cut.ends_with("..."), "{cut}");
            let body = cut.strip_suffix("...").unwrap();
            assert!(text.starts_with(body));
            // Every escape whole: what is left of the last '%' is at least "%XX".
            if let Some(at) = body.rfind('%') {
                assert!(body.len() - at >= 3, "{body}");
            }
            assert_eq!(trailers["grpc-status"], "5");
        }
        let mut short = http::HeaderMap::new();
        short.insert("grpc-message", "not found".parse().unwrap());
        cut_message(&mut short);
        assert_eq!(short["grpc-message"], "not found");
    }

    #[test]
    fn a_trailers_only_answer_stays_without_trailers() {
        let refused = Arc::new(OnceLock::new());
        let _ = refused.set(Status::resource_exhausted("slow down"));
        let ending = Ending {
            inner: Body::empty(),
            refused,
            done: false,
        };
        assert!(http_body::Body::is_end_stream(&ending));
    }

    /// A message of `body`, prefix and body.
    fn framed(body: &[u8]) -> Vec<u8> {
        let mut bytes = prefix(u32::try_from(body.len()).unwrap());
        bytes.extend_from_slice(body);
        bytes
    }

    #[test]
    fn each_whole_message_must_decode_as_a_request() {
        let list = ServerReflectionRequest {
            host: "h".repeat(300),
            message_request: Some(
                tonic_reflection::pb::v1::server_reflection_request::MessageRequest::ListServices(
                    String::new(),
                ),
            ),
        }
        .encode_to_vec();
        // Good messages, empty ones included, split anywhere: nothing wrong.
        let good = [framed(&list), framed(&[]), framed(&list)].concat();
        for size in [1, 2, 7, good.len()] {
            let mut framing = Framing::default();
            for chunk in good.chunks(size) {
                framing.feed(chunk, || true);
            }
            assert!(framing.malformed.is_none(), "chunks of {size}");
            assert!(framing.body.is_empty());
        }
        // Then a field with a wire type protobuf does not have: the status tonic gives.
        let bad = [good, framed(&[0x0f, 0x01])].concat();
        for size in [1, bad.len()] {
            let mut framing = Framing::default();
            for chunk in bad.chunks(size) {
                framing.feed(chunk, || true);
            }
            let status = framing.malformed.expect("not a request");
            assert_eq!(status.code(), tonic::Code::Internal);
            assert!(
                status
                    .message()
                    .starts_with("failed to decode Protobuf message"),
                "{status:?}"
            );
        }
    }

    /// A name with an invisible character is refused before the service sees the message
    /// whole (it would quote the name back as it came); the messages before it pass.
    #[test]
    fn a_name_with_invisible_characters_is_held_back() {
        use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
        let request = |symbol: &str| {
            ServerReflectionRequest {
                host: String::new(),
                message_request: Some(MessageRequest::FileContainingSymbol(symbol.to_owned())),
            }
            .encode_to_vec()
        };
        let good = framed(&request("oanquan.v1.GameService"));
        let bad = framed(&request("a\u{202e}b\n"));
        let data = [good.clone(), bad.clone()].concat();
        let mut framing = Framing::default();
        assert_eq!(framing.feed(&data, || true), Some(data.len() - 1));
        let status = framing.malformed.expect("refused");
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert!(status.message().contains("U+202E"), "{status:?}");
        // Byte by byte: held back at the message's last byte.
        let mut framing = Framing::default();
        for (i, byte) in data.iter().enumerate() {
            let cut = framing.feed(std::slice::from_ref(byte), || true);
            assert_eq!(cut, (i == data.len() - 1).then_some(0), "byte {i}");
        }
        // A visible name passes.
        let mut framing = Framing::default();
        assert_eq!(framing.feed(&good, || true), None);
        assert!(framing.malformed.is_none());
    }

    #[test]
    fn a_huge_declared_length_does_not_overflow() {
        let mut framing = Framing::default();
        let mut data = prefix(u32::MAX);
        data.extend([1; 100]);
        assert_eq!(framing.feed(&data, || false), None);
        assert_eq!(framing.body_left, u64::from(u32::MAX) - 100);
    }
}
