//! A tower layer over every service: a request id for each call, and its metrics.
//!
//! **Request ids.** A call's id is the client's `x-request-id` metadata when it is 1 to
//! [`MAX_REQUEST_ID`] printable ASCII characters (no spaces), else a fresh random one: the
//! id goes into logs and must not let a client write anything else there. It is recorded in
//! the call's `rpc` span (so every log line of the call carries it) and returned in the
//! response's `x-request-id` metadata, on errors and streams too.
//!
//! **Metrics.** Each call is counted once, by method and final gRPC status, when its status
//! is known: at once for an error without a body, else when the body's trailers go out. A
//! call whose response or body is dropped before that (the client went away) counts as
//! CANCELLED; one cut by its deadline is answered, and counted, DEADLINE_EXCEEDED. Streams of the counted kinds are open from their
//! response headers until then.
//!
//! **A request that never arrived whole.** When reading the request's body fails (the client
//! reset the stream or closed the connection halfway through its message, or sent a malformed
//! HTTP/1.1 body), tonic answers INTERNAL or UNKNOWN with hyper's error text, as if the
//! server had failed. The client broke the call, and INTERNAL is what operators alert on, so
//! such an answer becomes CANCELLED with a message that says what happened, and counts so. A
//! body that ends cleanly before a whole message (none at all, or fewer bytes than its prefix
//! declares) is a request that is not one: INVALID_ARGUMENT, as on a reflection stream; so is
//! a gRPC-Web text body that is not base64 (tonic-web's INTERNAL).
//!
//! **A request message over the size limit** is RESOURCE_EXHAUSTED, as the gRPC spec has it
//! (`doc/statuscodes.md`: a message larger than the receiver's limit); tonic says
//! OUT_OF_RANGE, which this API keeps for `after_sequence` beyond the last event. Mended both in
//! a trailers-only answer and in a stream's trailers.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Instant;

use bytes::Bytes;
use http::HeaderValue;
use http_body::{Frame, SizeHint};
use pin_project_lite::pin_project;
use tonic::body::Body;
use tower::{Layer, Service};

use crate::metrics::{MethodMetrics, Metrics};

/// Longest request id taken from a client.
pub const MAX_REQUEST_ID: usize = 128;

/// The metadata key of the request id, both ways.
pub const REQUEST_ID: &str = "x-request-id";

/// gRPC's CANCELLED.
const CANCELLED: i32 = 1;
/// gRPC's UNKNOWN: a status that cannot be read.
const UNKNOWN: i32 = 2;
/// gRPC's RESOURCE_EXHAUSTED.
const RESOURCE_EXHAUSTED: i32 = 8;
/// gRPC's OUT_OF_RANGE.
const OUT_OF_RANGE: i32 = 11;
/// gRPC's INTERNAL.
const INTERNAL: i32 = 13;
/// gRPC's INVALID_ARGUMENT.
const INVALID_ARGUMENT: i32 = 3;

/// How tonic's decoder begins the OUT_OF_RANGE message of a request over the size limit.
const TOO_LARGE: &str = "Error, decoded message length too large";

/// What a call whose request body could not be read is told, with CANCELLED.
const BODY_BROKEN: &str = "the request's body could not be read whole: the stream was reset or \
                           the connection closed before its message ended, or the body was \
                           malformed";

/// What a call whose request body ended before a whole message is told, with INVALID_ARGUMENT
/// (as a reflection stream that ends so is).
const BODY_CUT_SHORT: &str = "the request's body ended before its message was whole: no \
                              message, or fewer bytes than its length prefix declares";

/// [`RequestBody`]'s word on the request, for the answer: read whole (or not yet at all)...
const WHOLE: u8 = 0;
/// ... reading it failed (the connection closed, a malformed HTTP/1.1 body) ...
const READ_FAILED: u8 = 1;
/// ... or it ended before a whole message: the client sent none, or ended its stream halfway
/// through it ...
const CUT_SHORT: u8 = 2;
/// ... or, in gRPC-Web text, it is not base64.
const NOT_BASE64: u8 = 3;

/// What a gRPC-Web text call whose body is not base64 is told, with INVALID_ARGUMENT.
const BODY_NOT_BASE64: &str = "the request's body is not valid base64: gRPC-Web text \
                               (application/grpc-web-text) sends its messages base64-encoded";

/// Whether `status`, an error reading the request's body, is tonic-web's word that a gRPC-Web
/// text body is not base64 (the base64 crate's errors, and tonic-web's own for a body that
/// ends mid-group or has trailers in the clear). Its other errors, which pass on a failed
/// read, begin the same way and are not these.
fn not_base64(status: &tonic::Status) -> bool {
    status
        .message()
        .strip_prefix("tonic-web: ")
        .is_some_and(|rest| {
            [
                "Invalid symbol",
                "Invalid input length",
                "Invalid last symbol",
                "Invalid padding",
                "malformed base64 request",
            ]
            .iter()
            .any(|said| rest.starts_with(said))
        })
}

/// See the module docs.
#[derive(Debug, Clone)]
pub struct ObserveLayer {
    metrics: Option<Arc<Metrics>>,
    max_request: u64,
}

/// tonic's own bound on a request message, for a layer not told the server's.
const DEFAULT_MAX_REQUEST: u64 = 4 * 1024 * 1024;

impl ObserveLayer {
    /// Request ids always; metrics into `metrics` when given.
    #[must_use]
    pub fn new(metrics: Option<Arc<Metrics>>) -> ObserveLayer {
        ObserveLayer {
            metrics,
            max_request: DEFAULT_MAX_REQUEST,
        }
    }

    /// Request messages up to `bytes` (the server's bound) are held back until whole; see
    /// [`RequestBody`].
    #[must_use]
    pub fn with_max_request(self, bytes: usize) -> ObserveLayer {
        ObserveLayer {
            max_request: u64::try_from(bytes).unwrap_or(u64::MAX),
            ..self
        }
    }
}

impl<S> Layer<S> for ObserveLayer {
    type Service = Observe<S>;
    fn layer(&self, inner: S) -> Observe<S> {
        Observe {
            inner,
            metrics: self.metrics.clone(),
            max_request: self.max_request,
        }
    }
}

/// The service [`ObserveLayer`] makes.
#[derive(Debug, Clone)]
pub struct Observe<S> {
    inner: S,
    metrics: Option<Arc<Metrics>>,
    max_request: u64,
}

/// The client's request id if it is acceptable, else a new one.
#[must_use]
pub fn request_id(headers: &http::HeaderMap) -> HeaderValue {
    headers
        .get(REQUEST_ID)
        .filter(|value| {
            let bytes = value.as_bytes();
            !bytes.is_empty()
                && bytes.len() <= MAX_REQUEST_ID
                && bytes.iter().all(u8::is_ascii_graphic)
        })
        .cloned()
        .unwrap_or_else(|| {
            // 32 hex digits, written in place rather than formatted: this runs for most calls.
            let id: u128 = rand::random();
            let mut hex = [0; 32];
            for (index, digit) in hex.iter_mut().enumerate() {
                let nibble = (id >> (124 - 4 * index)) & 0xf;
                *digit = b"0123456789abcdef"[nibble as usize];
            }
            HeaderValue::from_bytes(&hex)
                .unwrap_or_else(|_| HeaderValue::from_static("unavailable"))
        })
}

impl<S> Service<http::Request<Body>> for Observe<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>>,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = ObserveFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let id = request_id(request.headers());
        let broken = Arc::new(AtomicU8::new(WHOLE));
        // Reflection's one method streams requests; every other method takes one.
        let one_message = !request.uri().path().starts_with("/grpc.reflection.");
        let request = request.map(|inner| {
            Body::new(RequestBody {
                inner,
                broken: Arc::clone(&broken),
                framing: Framing::default(),
                one_message,
                max_request: self.max_request,
                held: VecDeque::new(),
                last: None,
                ended: false,
            })
        });
        let done = self.metrics.as_ref().map(|metrics| Done {
            method: Arc::clone(metrics.method(request.uri().path())),
            metrics: Arc::clone(metrics),
            started: Instant::now(),
            code: None,
            stream_open: false,
            undecodable: false,
        });
        ObserveFuture {
            inner: self.inner.call(request),
            id: Some(id),
            recorded: false,
            done,
            broken,
        }
    }
}

/// A call being counted: counted when dropped, with `code` or else CANCELLED.
#[derive(Debug)]
struct Done {
    metrics: Arc<Metrics>,
    method: Arc<MethodMetrics>,
    started: Instant,
    code: Option<i32>,
    /// Whether the stream gauge of the method's kind counts this call.
    stream_open: bool,
    /// Whether its INTERNAL was for a request that was not protobuf.
    undecodable: bool,
}

impl Done {
    fn finish(mut self, code: i32, undecodable: bool) {
        self.code = Some(code);
        self.undecodable = undecodable;
    }
}

/// Whether the final status `code` in `headers` (trailers, or a trailers-only answer's
/// headers) is tonic's INTERNAL for a request that was not protobuf. Only an INTERNAL is read.
fn undecodable(code: i32, headers: &http::HeaderMap) -> bool {
    code == INTERNAL
        && tonic::Status::from_header_map(headers)
            .is_some_and(|status| is_undecodable(status.message()))
}

/// Whether an INTERNAL's message is tonic's for a request that is not valid protobuf, or whose
/// framing's compression flag is wrong (set with no `grpc-encoding`, or neither 0 nor 1): the
/// client's fault, INTERNAL as gRPC's compression spec has it.
fn is_undecodable(message: &str) -> bool {
    message.starts_with(UNDECODABLE) || message.starts_with(BAD_COMPRESSION_FLAG)
}

/// How tonic's INTERNAL for a request that is not valid protobuf begins.
const UNDECODABLE: &str = "failed to decode Protobuf message";

/// How tonic's INTERNAL for a message frame with a compression flag it cannot take begins.
const BAD_COMPRESSION_FLAG: &str = "protocol error: received message with";

impl Drop for Done {
    fn drop(&mut self) {
        let code = self.code.unwrap_or(CANCELLED);
        self.metrics
            .rpc_done(&self.method, code, self.started.elapsed());
        if self.undecodable {
            self.metrics.undecodable();
        }
        if self.stream_open
            && let Some(kind) = self.method.stream()
        {
            self.metrics.streams_open(kind).dec();
        }
    }
}

/// The `grpc-status` in `headers`, if any (UNKNOWN if unreadable).
fn status_in(headers: &http::HeaderMap) -> Option<i32> {
    headers.get("grpc-status").map(|value| {
        value
            .to_str()
            .ok()
            .and_then(|text| text.parse().ok())
            .unwrap_or(UNKNOWN)
    })
}

pin_project! {
    /// The future of [`Observe`].
    #[derive(Debug)]
    pub struct ObserveFuture<F> {
        #[pin]
        inner: F,
        id: Option<HeaderValue>,
        recorded: bool,
        done: Option<Done>,
        // Set when reading the request's body failed.
        broken: Arc<AtomicU8>,
    }
}

/// The request's body, marking `broken` when reading it fails or when it ends without a whole
/// message. Every method here but reflection's takes exactly one request message; for a body
/// that ends without an error before a whole one, tonic answers INTERNAL ("Unexpected EOF"),
/// so the gRPC framing is followed to tell an ending that cuts a message short. A second message fails the body: tonic reads a unary request's first message and
/// drops the rest unseen, so a call sending two (a probe sent two `CreateGame`s in one
/// gRPC-Web body) got the first done and an OK, as if the second had been.
///
/// A message's bytes are held back until the message is whole (or the body ends), when its
/// length is within the server's bound: tonic's decoder reserves a message's declared length
/// as soon as it reads the prefix, so a client that sent a prefix for 128 KiB and one byte
/// made the server hold 128 KiB for the call's whole deadline. A probe pinned 250 MB from one
/// address so. Held, memory follows the bytes that came. A length over the bound goes on at
/// once, for tonic to refuse.
#[derive(Debug)]
struct RequestBody {
    inner: Body,
    broken: Arc<AtomicU8>,
    framing: Framing,
    one_message: bool,
    max_request: u64,
    /// Data read from `inner` and not yet passed on, oldest first.
    held: VecDeque<Bytes>,
    /// A trailers frame read from `inner`, passed on after `held`.
    last: Option<Frame<Bytes>>,
    /// Whether `inner` has ended (or sent its trailers).
    ended: bool,
}

/// The answer to a request body holding more than one message.
const SECOND_MESSAGE: &str = "this method takes one request message, and the request's body \
                              holds more: send each in a call of its own";

/// Where the request's bytes stand in gRPC's framing: a 5-byte prefix (a flag and a big-endian
/// length), then that many bytes of message.
#[derive(Debug, Default)]
struct Framing {
    prefix: [u8; 5],
    /// Bytes of the current prefix read so far (0 to 4).
    have: usize,
    /// Bytes of the current message still to come.
    remaining: u64,
    /// Whole messages read.
    messages: u32,
    /// Whether bytes came after the first whole message.
    more: bool,
    /// The length the current (or last) message's prefix declared.
    declared: u64,
}

impl Framing {
    fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            if self.messages > 0 && self.remaining == 0 {
                self.more = true;
            }
            if self.remaining > 0 {
                let n = data
                    .len()
                    .min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
                self.remaining -= n as u64;
                data = &data[n..];
                if self.remaining == 0 {
                    self.messages = self.messages.saturating_add(1);
                }
                continue;
            }
            let n = (5 - self.have).min(data.len());
            self.prefix[self.have..self.have + n].copy_from_slice(&data[..n]);
            self.have += n;
            data = &data[n..];
            if self.have == 5 {
                self.have = 0;
                let [_, a, b, c, d] = self.prefix;
                self.remaining = u64::from(u32::from_be_bytes([a, b, c, d]));
                self.declared = self.remaining;
                if self.remaining == 0 {
                    self.messages = self.messages.saturating_add(1);
                }
            }
        }
    }

    /// Whether an ending here leaves a message cut short, or none at all.
    fn cut_short(&self) -> bool {
        self.have > 0 || self.remaining > 0 || self.messages == 0
    }

    /// Whether a message is under way whose length, if known, is at most `max`: its bytes
    /// are worth holding until it is whole.
    fn holds(&self, max: u64) -> bool {
        self.have > 0 || (self.remaining > 0 && self.declared <= max)
    }
}

impl http_body::Body for RequestBody {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        let this = &mut *self;
        loop {
            if this.ended || !this.framing.holds(this.max_request) {
                if let Some(data) = this.held.pop_front() {
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                if let Some(frame) = this.last.take() {
                    return Poll::Ready(Some(Ok(frame)));
                }
                if this.ended {
                    return Poll::Ready(None);
                }
            }
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        this.framing.feed(&data);
                        if this.one_message && this.framing.more {
                            return Poll::Ready(Some(Err(tonic::Status::invalid_argument(
                                SECOND_MESSAGE,
                            ))));
                        }
                        // A message that came whole in one piece (most calls) goes on as it
                        // is, never through the queue.
                        if this.held.is_empty() && !this.framing.holds(this.max_request) {
                            return Poll::Ready(Some(Ok(Frame::data(data))));
                        }
                        if !data.is_empty() {
                            this.held.push_back(data);
                        }
                    }
                    Err(trailers) => {
                        // Nothing follows a request's trailers.
                        this.end();
                        this.last = Some(trailers);
                    }
                },
                Some(Err(error)) => {
                    let why = if not_base64(&error) {
                        NOT_BASE64
                    } else {
                        READ_FAILED
                    };
                    mark(&this.broken, why);
                    return Poll::Ready(Some(Err(error)));
                }
                None => this.end(),
            }
        }
    }

    // A reader may stop here without polling for the end (http-body-util's `collect` does).
    fn is_end_stream(&self) -> bool {
        if !self.held.is_empty() || self.last.is_some() {
            return false;
        }
        let end = self.ended || self.inner.is_end_stream();
        if end && self.framing.cut_short() {
            mark(&self.broken, CUT_SHORT);
        }
        end
    }

    fn size_hint(&self) -> SizeHint {
        let held: u64 = self.held.iter().map(|data| data.len() as u64).sum();
        if self.ended {
            return SizeHint::with_exact(held);
        }
        let inner = self.inner.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower().saturating_add(held));
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper.saturating_add(held));
        }
        hint
    }
}

impl RequestBody {
    /// `inner` has ended: an ending that leaves a message cut short breaks the call.
    fn end(&mut self) {
        self.ended = true;
        if self.framing.cut_short() {
            mark(&self.broken, CUT_SHORT);
        }
    }
}

/// Records what went wrong with the request first; later words do not change it.
fn mark(broken: &AtomicU8, state: u8) {
    let _ = broken.compare_exchange(WHOLE, state, Ordering::Relaxed, Ordering::Relaxed);
}

/// A trailers-only INTERNAL or UNKNOWN answer to a request whose body broke becomes
/// CANCELLED, and a request over the size limit RESOURCE_EXHAUSTED (see the module docs);
/// returns the answer's code.
fn mend_broken_request(headers: &mut http::HeaderMap, broken: &AtomicU8) -> Option<i32> {
    let code = status_in(headers)?;
    if matches!(code, INTERNAL | UNKNOWN) {
        match broken.load(Ordering::Relaxed) {
            READ_FAILED => {
                replace_status(headers, &tonic::Status::cancelled(BODY_BROKEN));
                return Some(CANCELLED);
            }
            CUT_SHORT => {
                replace_status(headers, &tonic::Status::invalid_argument(BODY_CUT_SHORT));
                return Some(INVALID_ARGUMENT);
            }
            NOT_BASE64 => {
                replace_status(headers, &tonic::Status::invalid_argument(BODY_NOT_BASE64));
                return Some(INVALID_ARGUMENT);
            }
            _ => {}
        }
    }
    Some(mend_too_large(headers, code))
}

/// RESOURCE_EXHAUSTED for tonic's OUT_OF_RANGE on a request over the size limit, in the
/// headers of a trailers-only answer or in trailers; returns the code they now hold.
fn mend_too_large(headers: &mut http::HeaderMap, code: i32) -> i32 {
    if code != OUT_OF_RANGE {
        return code;
    }
    let status = tonic::Status::from_header_map(headers);
    let Some(limit) = status
        .as_ref()
        .and_then(|status| status.message().strip_prefix(TOO_LARGE))
    else {
        return code;
    };
    // The bound in force is the smaller of the two flags; which one, this layer does not know.
    let message = format!(
        "the request message is too large{limit} (the server's --max-request-size, or \
         --max-message-size where that is smaller); send a smaller request"
    );
    replace_status(headers, &super::status::request_too_large(message));
    RESOURCE_EXHAUSTED
}

/// Writes `status` into `headers` in place of the one there.
fn replace_status(headers: &mut http::HeaderMap, status: &tonic::Status) {
    // tonic writes the headers (the message percent-encoded, as gRPC has it).
    let mended = status.clone().into_http::<Body>();
    for name in ["grpc-status", "grpc-message", "grpc-status-details-bin"] {
        match mended.headers().get(name) {
            Some(value) => {
                headers.insert(name, value.clone());
            }
            None => {
                headers.remove(name);
            }
        }
    }
}

impl<F, E> Future for ObserveFuture<F>
where
    F: Future<Output = Result<http::Response<Body>, E>>,
{
    type Output = Result<http::Response<Body>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        // tonic polls the call inside its `rpc` span (not while `call` runs).
        if !*this.recorded {
            *this.recorded = true;
            if let Some(id) = this.id.as_ref().and_then(|id| id.to_str().ok()) {
                tracing::Span::current().record("request_id", id);
            }
        }
        let result = ready!(this.inner.poll(cx));
        let Ok(mut response) = result else {
            if let Some(done) = this.done.take() {
                done.finish(UNKNOWN, false);
            }
            return Poll::Ready(result);
        };
        if let Some(mut id) = this.id.take() {
            // Never indexed by HPACK: each call's id is new, so indexing it would only cost
            // an insertion and an eviction in both ends' header tables on every call.
            id.set_sensitive(true);
            response.headers_mut().insert(REQUEST_ID, id);
        }
        let trailers_only = mend_broken_request(response.headers_mut(), this.broken);
        let Some(mut done) = this.done.take() else {
            return Poll::Ready(Ok(response));
        };
        if let Some(code) = trailers_only {
            // The status is final already.
            done.finish(code, undecodable(code, response.headers()));
            return Poll::Ready(Ok(response));
        }
        if let Some(kind) = done.method.stream() {
            done.metrics.streams_open(kind).inc();
            done.stream_open = true;
        }
        Poll::Ready(Ok(response.map(|inner| {
            Body::new(ObservedBody {
                inner,
                done: Some(done),
            })
        })))
    }
}

/// A response body that counts its call when the trailers pass (or when it is dropped).
#[derive(Debug)]
struct ObservedBody {
    inner: Body,
    done: Option<Done>,
}

impl http_body::Body for ObservedBody {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        let mut frame = ready!(Pin::new(&mut self.inner).poll_frame(cx));
        let status = match &mut frame {
            Some(Ok(frame)) => frame.trailers_mut().map(|t| {
                let code = mend_too_large(t, status_in(t).unwrap_or(UNKNOWN));
                (code, undecodable(code, t))
            }),
            Some(Err(status)) => Some((
                status.code() as i32,
                status.code() == tonic::Code::Internal && is_undecodable(status.message()),
            )),
            None => None,
        };
        if let Some((code, undecodable)) = status
            && let Some(done) = self.done.take()
        {
            done.finish(code, undecodable);
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_request_id_goes_back_never_indexed() {
        use tower::ServiceExt as _;
        let service =
            ObserveLayer::new(None).layer(tower::service_fn(|_: http::Request<Body>| async {
                Ok::<_, std::convert::Infallible>(http::Response::new(Body::empty()))
            }));
        let request = http::Request::builder()
            .header(REQUEST_ID, "abc-123")
            .body(Body::empty())
            .unwrap();
        let response = service.oneshot(request).await.unwrap();
        let id = &response.headers()[REQUEST_ID];
        assert_eq!(id, "abc-123");
        assert!(id.is_sensitive());
    }

    /// A service that reads the request's body as tonic does, and answers as tonic does when
    /// that fails: INTERNAL with the transport's error text.
    fn reading_service() -> impl Service<
        http::Request<Body>,
        Response = http::Response<Body>,
        Error = std::convert::Infallible,
        Future = impl Future<Output = Result<http::Response<Body>, std::convert::Infallible>>,
    > {
        tower::service_fn(|request: http::Request<Body>| async move {
            use http_body_util::BodyExt as _;
            Ok(match request.into_body().collect().await {
                Ok(_) => tonic::Status::internal("a real failure").into_http(),
                Err(_) => {
                    tonic::Status::internal("error reading a body from connection").into_http()
                }
            })
        })
    }

    #[tokio::test]
    async fn an_answer_to_a_broken_or_cut_request_body_is_not_internal() {
        use tower::ServiceExt as _;
        let metrics = Metrics::new("test");
        let service = || ObserveLayer::new(Some(Arc::clone(&metrics))).layer(reading_service());
        let broken = Body::new(http_body_util::StreamBody::new(futures::stream::iter([
            Ok(Frame::data(Bytes::from_static(b"\0\0\0\0\x10half"))),
            Err(tonic::Status::unknown("stream reset")),
        ])));
        let request = http::Request::builder()
            .uri("/oanquan.v1.GameService/GetGame")
            .body(broken)
            .unwrap();
        let response = service().oneshot(request).await.unwrap();
        assert_eq!(response.headers()["grpc-status"], "1");
        let message = response.headers()["grpc-message"].to_str().unwrap();
        assert!(
            message.starts_with("the%20request's%20body%20could%20not%20be%20read"),
            "{message}"
        );
        // A body that just ends halfway through its message, or before any: the request was
        // not whole.
        for cut in [&b"\0\0\0\0\x10half"[..], b""] {
            let request = http::Request::builder()
                .uri("/oanquan.v1.GameService/GetGame")
                .body(Body::new(http_body_util::Full::new(Bytes::from_static(
                    cut,
                ))))
                .unwrap();
            let response = service().oneshot(request).await.unwrap();
            assert_eq!(response.headers()["grpc-status"], "3", "{cut:?}");
            let message = response.headers()["grpc-message"].to_str().unwrap();
            assert!(
                message.starts_with("the%20request's%20body%20ended%20before"),
                "{message}"
            );
        }
        // A server failure on a whole request stays what it is.
        let whole = http::Request::builder()
            .uri("/oanquan.v1.GameService/GetGame")
            .body(Body::new(http_body_util::Full::new(Bytes::from_static(
                b"\0\0\0\0\0",
            ))))
            .unwrap();
        let response = service().oneshot(whole).await.unwrap();
        assert_eq!(response.headers()["grpc-status"], "13");
        let text = metrics.render().await;
        assert!(
            text.contains(r#"method="GetGame",code="CANCELLED"} 1"#)
                && text.contains(r#"method="GetGame",code="INVALID_ARGUMENT"} 2"#)
                && text.contains(r#"method="GetGame",code="INTERNAL"} 1"#),
            "{text}"
        );
    }

    /// A request body fed by the test, one chunk at a time, through [`RequestBody`].
    fn fed_body(
        max_request: u64,
    ) -> (
        futures::channel::mpsc::UnboundedSender<Result<Frame<Bytes>, tonic::Status>>,
        RequestBody,
    ) {
        let (send, receive) = futures::channel::mpsc::unbounded();
        let body = RequestBody {
            inner: Body::new(http_body_util::StreamBody::new(receive)),
            broken: Arc::new(AtomicU8::new(WHOLE)),
            framing: Framing::default(),
            one_message: true,
            max_request,
            held: VecDeque::new(),
            last: None,
            ended: false,
        };
        (send, body)
    }

    /// What the body passes on now, without waiting.
    fn passed(body: &mut RequestBody) -> Vec<u8> {
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut out = Vec::new();
        while let Poll::Ready(Some(Ok(frame))) =
            http_body::Body::poll_frame(Pin::new(&mut *body), &mut cx)
        {
            out.extend_from_slice(frame.data_ref().unwrap());
        }
        out
    }

    #[test]
    fn a_message_is_passed_on_only_once_it_is_whole() {
        let (send, mut body) = fed_body(1024);
        let chunk = |bytes: &'static [u8]| Ok(Frame::data(Bytes::from_static(bytes)));
        // A prefix for 100 bytes and one byte of them: nothing for tonic to reserve 100 for.
        send.unbounded_send(chunk(b"\0\0\0\0\x64a")).unwrap();
        assert!(passed(&mut body).is_empty());
        assert!(!http_body::Body::is_end_stream(&body));
        let rest = [b'b'; 99];
        send.unbounded_send(Ok(Frame::data(Bytes::from(rest[..50].to_vec()))))
            .unwrap();
        assert!(passed(&mut body).is_empty());
        send.unbounded_send(Ok(Frame::data(Bytes::from(rest[50..].to_vec()))))
            .unwrap();
        let whole = passed(&mut body);
        assert_eq!(whole.len(), 5 + 100);
        assert_eq!(&whole[..6], b"\0\0\0\0\x64a");
        drop(send);
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(matches!(
            http_body::Body::poll_frame(Pin::new(&mut body), &mut cx),
            Poll::Ready(None)
        ));
        assert_eq!(body.broken.load(Ordering::Relaxed), WHOLE);

        // Half a prefix is held too; a length over the bound goes on at once, for tonic to
        // refuse.
        let (send, mut body) = fed_body(1024);
        send.unbounded_send(chunk(b"\0\0")).unwrap();
        assert!(passed(&mut body).is_empty());
        send.unbounded_send(chunk(b"\0\x10\0x")).unwrap();
        assert_eq!(passed(&mut body), b"\0\0\0\x10\0x");

        // A body that ends halfway passes on what came, and breaks the call.
        let (send, mut body) = fed_body(1024);
        send.unbounded_send(chunk(b"\0\0\0\0\x64a")).unwrap();
        drop(send);
        assert_eq!(passed(&mut body), b"\0\0\0\0\x64a");
        assert_eq!(body.broken.load(Ordering::Relaxed), CUT_SHORT);
    }

    #[test]
    fn framing_tells_a_whole_message_from_one_cut_short() {
        let fed = |chunks: &[&[u8]]| {
            let mut framing = Framing::default();
            for chunk in chunks {
                framing.feed(chunk);
            }
            framing
        };
        assert!(fed(&[]).cut_short(), "no message at all");
        assert!(!fed(&[b"\0\0\0\0\0"]).cut_short(), "an empty message");
        assert!(!fed(&[b"\0\0\0", b"\0\x02", b"a", b"b"]).cut_short());
        assert!(fed(&[b"\0\0\0\0\x02a"]).cut_short(), "a byte short");
        assert!(fed(&[b"\0\0\0"]).cut_short(), "half a prefix");
        assert!(
            fed(&[b"\0\0\0\0\x01a\0"]).cut_short(),
            "a second prefix begun"
        );
        let two = fed(&[b"\0\0\0\0\x01a\0\0\0\0\x01b"]);
        assert_eq!(two.messages, 2);
        assert!(!two.cut_short());
        assert!(two.more, "a second message");
        assert!(
            fed(&[b"\0\0\0\0\x01a", b"\0"]).more,
            "a second prefix begun"
        );
        assert!(!fed(&[b"\0\0\0\0\x01a", b""]).more, "nothing after");
        assert!(
            !fed(&[b"\0\0\0", b"\0\x02", b"a", b"b"]).more,
            "one message in pieces"
        );
        assert!(
            fed(&[b"\0\xff\xff\xff\xff", &[7; 1000]]).cut_short(),
            "4 GiB announced"
        );
    }

    #[test]
    fn client_ids_are_kept_only_when_short_and_printable() {
        let with = |value: &[u8]| {
            let mut headers = http::HeaderMap::new();
            headers.insert(REQUEST_ID, HeaderValue::from_bytes(value).unwrap());
            request_id(&headers)
        };
        assert_eq!(with(b"abc-123_X.y"), "abc-123_X.y");
        let long = "a".repeat(MAX_REQUEST_ID);
        assert_eq!(with(long.as_bytes()), long.as_str());
        for bad in [
            "a".repeat(MAX_REQUEST_ID + 1).into_bytes(),
            b"has space".to_vec(),
            b"tab\there".to_vec(),
            b"caf\xc3\xa9".to_vec(),
            Vec::new(),
        ] {
            let id = with(&bad);
            assert_ne!(id.as_bytes(), bad.as_slice());
            assert_eq!(id.len(), 32, "{id:?}");
            assert!(id.as_bytes().iter().all(u8::is_ascii_hexdigit));
        }
        let generated = request_id(&http::HeaderMap::new());
        assert_eq!(generated.len(), 32);
        assert_ne!(generated, request_id(&http::HeaderMap::new()));
    }
}
