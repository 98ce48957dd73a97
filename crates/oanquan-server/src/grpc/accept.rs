//! Accepting connections: the accept loop, TLS, and a deadline on each connection's handshake.
//!
//! tonic would hand every accepted socket to hyper at once, and hyper waits for the client's
//! HTTP/2 preface without a deadline: a peer that connects and sends nothing (or half a
//! preface) holds a descriptor forever, and holds a graceful shutdown for its whole drain. So
//! the server accepts itself ([`spawn`]): each connection gets [`Handshake::timeout`] to finish
//! its TLS handshake (when TLS is on) and send its whole preface (the 24 fixed bytes and the
//! SETTINGS frame after them); only then is it handed to hyper, which reads the preface again
//! from what was buffered ([`ServerConnection`]). A connection still in its handshake belongs
//! to a task of its own that ends when the server stops, so it never holds shutdown.
//!
//! HTTP/1.1 (the page, gRPC-Web) has no preface, and hyper reads its first request without a
//! deadline either: a peer that sends `G` and stops, or adds a header line now and then, would
//! hold its connection (and a shutdown) as long as it liked. So a connection that starts like
//! an HTTP/1 request line is handed over only once its first request's head is in (the blank
//! line after the headers), within the same deadline.
//!
//! hyper has no deadline for the requests after the first on a kept-alive HTTP/1 connection
//! either (its header timeout needs a timer, which tonic gives HTTP/2 only), nor for a body
//! sent a byte at a time. So an HTTP/1 connection must see the server write within
//! [`Handshake::answer_within`] of the first byte of each request, and of its last answer
//! while it waits for the next request ([`AnswerDeadline`]); a dribbling peer, or one idle on
//! keep-alive, is closed after it. A live stream is not: it writes at least every heartbeat.
//!
//! The accept loop itself backs off when accepting fails for a reason that is not about one
//! connection: with its descriptors exhausted (`EMFILE`, `ENFILE`), the listener stays
//! readable and `accept` fails again at once, which would spin a core.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Stream, StreamExt as _};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::{Connected, TcpConnectInfo};
use tracing::{Instrument as _, debug, info, warn};

use super::connections::{ConnectionLimit, CountedConnection};
use super::frames::FrameBudget;
use super::stalls::{Registration, Stalls};

/// The fixed start of every HTTP/2 client connection (RFC 9113, section 3.4).
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// An HTTP/2 frame header: length (3 bytes), type, flags, stream id (4 bytes).
const FRAME_HEADER: usize = 9;
/// The type of a SETTINGS frame, which must come first.
const SETTINGS: u8 = 4;
/// The largest first frame (the protocol's default SETTINGS_MAX_FRAME_SIZE).
const MAX_FIRST_FRAME: usize = 16_384;

/// Most bytes of an HTTP/1 request head waited for: a longer head is hyper's to refuse (431).
const MAX_HTTP1_HEAD: usize = 64 * 1024;

/// Longest HTTP/1 method waited for (`OPTIONS`, with room for extension methods).
const MAX_METHOD: usize = 16;

/// How long the accept loop waits after an error that is not about one connection.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Connections handed to hyper but not yet taken by it.
const READY_QUEUE: usize = 64;

/// What each accepted connection goes through before hyper sees it.
#[derive(Clone)]
pub struct Handshake {
    /// Per-address connection cap, checked first.
    pub limit: Arc<ConnectionLimit>,
    /// TLS, if on: the certificate in use now (it may be reloaded).
    pub tls: Option<watch::Receiver<TlsAcceptor>>,
    /// Time from accept to the end of the client's preface (TLS handshake included).
    pub timeout: Duration,
    /// HTTP/1 only: the longest the server may go without writing while the peer sends a
    /// request or the connection idles ([`AnswerDeadline`]). Longer than a call's deadline and
    /// than the streams' heartbeat, so that only a peer that stalls meets it.
    pub answer_within: Duration,
    /// Where streams dropped for stalling are counted per connection, to close those that
    /// have too many ([`super::stalls`]).
    pub stalls: Arc<Stalls>,
    /// Loopback peers skip the idle-frame budget ([`super::frames`]), as they skip the other
    /// per-client limits.
    pub exempt_loopback: bool,
}

impl std::fmt::Debug for Handshake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handshake")
            .field("tls", &self.tls.is_some())
            .field("timeout", &self.timeout)
            .field("answer_within", &self.answer_within)
            .finish_non_exhaustive()
    }
}

/// Starts accepting from `accepted` (sockets as they are accepted, e.g. tonic's `TcpIncoming`)
/// until `stop` turns `true`. Returns the connections whose handshake is done, for
/// `serve_with_incoming_shutdown`, and the accept task.
pub fn spawn<S>(
    accepted: S,
    handshake: Handshake,
    stop: watch::Receiver<bool>,
) -> (
    ReceiverStream<io::Result<ServerConnection>>,
    tokio::task::JoinHandle<()>,
)
where
    S: Stream<Item = io::Result<TcpStream>> + Send + 'static,
{
    let (ready, incoming) = mpsc::channel(READY_QUEUE);
    let loop_stop = stop.clone();
    let task = tokio::spawn(accept_loop(Box::pin(accepted), loop_stop, move |stream| {
        // Over the per-address cap: dropped here, which closes it.
        let Some(counted) = handshake.limit.admit(stream) else {
            return;
        };
        let peer = counted.connect_info().remote_addr();
        let handshake = handshake.clone();
        let ready = ready.clone();
        let mut stop = stop.clone();
        let task = async move {
            let done = tokio::select! {
                _ = stop.wait_for(|stopping| *stopping) => return,
                done = tokio::time::timeout(handshake.timeout, shake(counted, handshake.tls.map(|tls| tls.borrow().clone()), handshake.answer_within)) => done,
            };
            let done = match done {
                Ok(Ok(mut connection)) => {
                    if let Some(peer) = peer {
                        connection.stalls = Some(handshake.stalls.register(peer));
                        if connection.http2
                            && !(handshake.exempt_loopback && peer.ip().is_loopback())
                        {
                            connection.frames = Some(FrameBudget::new(std::time::Instant::now()));
                        }
                    }
                    Ok(Ok(connection))
                }
                other => other,
            };
            match done {
                Ok(Ok(connection)) => {
                    // An error means the server is stopping: the connection is dropped.
                    let _ = ready.send(Ok(connection)).await;
                }
                Ok(Err(error)) => debug!(%error, "connection closed during its handshake"),
                Err(_) => debug!(
                    timeout = ?handshake.timeout,
                    "connection closed: no TLS handshake and HTTP/2 preface in time"
                ),
            }
        };
        tokio::spawn(task.instrument(tracing::debug_span!("handshake", ?peer)));
    }));
    (ReceiverStream::new(incoming), task)
}

/// Hands each connection of `accepted` to `accept` until it ends or `stop` turns `true`.
///
/// Errors about one connection (aborted or reset before it was taken) are skipped. Any other
/// error (out of descriptors, of buffers, of memory) comes back at once if retried at once, so
/// the loop waits [`ACCEPT_BACKOFF`] before it tries again, and logs once per run of errors.
pub async fn accept_loop<S, T>(
    mut accepted: Pin<Box<S>>,
    mut stop: watch::Receiver<bool>,
    mut accept: impl FnMut(T),
) where
    S: Stream<Item = io::Result<T>> + ?Sized,
{
    let mut failing: usize = 0;
    loop {
        let next = tokio::select! {
            _ = stop.wait_for(|stopping| *stopping) => return,
            next = accepted.next() => next,
        };
        match next {
            None => return,
            Some(Ok(connection)) => {
                if failing > 0 {
                    warn!(errors = failing, "accepting connections again");
                    failing = 0;
                }
                accept(connection);
            }
            Some(Err(error)) if about_one_connection(&error) => {
                debug!(%error, "a connection failed before it was accepted");
            }
            Some(Err(error)) => {
                if failing == 0 {
                    warn!(
                        %error,
                        backoff = ?ACCEPT_BACKOFF,
                        "cannot accept connections (out of file descriptors?); retrying"
                    );
                }
                failing += 1;
                tokio::select! {
                    _ = stop.wait_for(|stopping| *stopping) => return,
                    () = tokio::time::sleep(ACCEPT_BACKOFF) => {}
                }
            }
        }
    }
}

fn about_one_connection(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
            | io::ErrorKind::TimedOut
    )
}

/// TLS (if on), then the client's preface.
async fn shake(
    connection: CountedConnection,
    tls: Option<TlsAcceptor>,
    answer_within: Duration,
) -> io::Result<ServerConnection> {
    let mut transport = match tls {
        None => Transport::Plain(connection),
        Some(tls) => Transport::Tls(Box::new(tls.accept(connection).await?)),
    };
    let read = read_preface(&mut transport).await?;
    match &mut transport {
        Transport::Plain(connection) => connection.serving(),
        Transport::Tls(tls) => tls.get_mut().0.serving(),
    }
    // HTTP/2's preface starts like a request line too (`PRI * HTTP/2.0`).
    let is_http1 = !read.starts_with(PREFACE) && http1(&read) == Http1::Head;
    let answer = is_http1.then(|| AnswerDeadline::new(answer_within));
    let http2 = read.starts_with(PREFACE);
    Ok(ServerConnection {
        read,
        replayed: 0,
        transport,
        answer,
        stalls: None,
        http2,
        frames: None,
    })
}

/// HTTP/1's missing deadlines: the time from the first byte of a request, or from the server's
/// last write, to the server's next write. A request the server answers writes within a call's
/// deadline; a stream writes at least every heartbeat; so a connection that goes past it is a
/// peer sending a request too slowly to be answered, or one idle on keep-alive.
struct AnswerDeadline {
    limit: Duration,
    /// When the server last wrote, or the first byte of a request since then arrived.
    due: Pin<Box<tokio::time::Sleep>>,
    /// No byte was read since the server last wrote: the next one starts a request, which
    /// gets the whole limit; the bytes after it do not move the deadline.
    answered: bool,
}

impl AnswerDeadline {
    fn new(limit: Duration) -> AnswerDeadline {
        AnswerDeadline {
            limit,
            due: Box::pin(tokio::time::sleep(limit)),
            answered: false,
        }
    }

    fn restart(&mut self) {
        let due = tokio::time::Instant::now() + self.limit;
        self.due.as_mut().reset(due);
    }

    fn read(&mut self, bytes: usize) {
        if bytes > 0 && self.answered {
            self.answered = false;
            self.restart();
        }
    }

    fn wrote(&mut self, bytes: usize) {
        if bytes > 0 {
            self.answered = true;
            self.restart();
        }
    }

    /// Ready with an error once the deadline has passed; otherwise wakes `cx` when it does.
    fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        self.due.as_mut().poll(cx).map(|()| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                "HTTP/1 connection closed: no request answered in time",
            )
        })
    }
}

/// What the first bytes of an HTTP/1 connection say so far.
#[derive(Debug, PartialEq, Eq)]
enum Http1 {
    /// Not an HTTP/1 request line: hyper refuses it.
    No,
    /// Maybe, more bytes are needed to tell (a method still being sent).
    Maybe,
    /// A request line has begun (a method and a space): wait for the head's end.
    Head,
}

/// Whether `read` starts like an HTTP/1 request: a method of uppercase letters, then a space.
fn http1(read: &[u8]) -> Http1 {
    let method = read.iter().take_while(|b| b.is_ascii_uppercase()).count();
    match read.get(method) {
        _ if method > MAX_METHOD => Http1::No,
        Some(b' ') if method > 0 => Http1::Head,
        Some(_) => Http1::No,
        None => Http1::Maybe,
    }
}

/// Reads until the client's whole preface is in: the 24 fixed bytes and a SETTINGS frame; or,
/// for a connection that starts like an HTTP/1 request, until its first request's head is in
/// (or [`MAX_HTTP1_HEAD`] bytes of it). Bytes that cannot be either (another protocol, another
/// first frame, an oversized one) end the wait at once: hyper then refuses the connection with
/// the protocol's own errors. Returns every byte read.
async fn read_preface(io: &mut (impl AsyncRead + Unpin)) -> io::Result<Vec<u8>> {
    let mut read = Vec::with_capacity(128);
    let mut chunk = [0_u8; 1024];
    loop {
        let fixed = read.len().min(PREFACE.len());
        if read[..fixed] != PREFACE[..fixed] {
            match http1(&read) {
                Http1::No => return Ok(read),
                Http1::Head
                    if read.len() >= MAX_HTTP1_HEAD
                        || read.windows(4).any(|w| w == b"\r\n\r\n") =>
                {
                    return Ok(read);
                }
                Http1::Head | Http1::Maybe => {}
            }
        } else if let Some(header) = read.get(PREFACE.len()..PREFACE.len() + FRAME_HEADER) {
            let length =
                usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
            let settings = header[3] == SETTINGS;
            if !settings
                || length > MAX_FIRST_FRAME
                || read.len() >= PREFACE.len() + FRAME_HEADER + length
            {
                return Ok(read);
            }
        }
        let n = io.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the client closed the connection before its HTTP/2 preface or HTTP/1 request",
            ));
        }
        read.extend_from_slice(&chunk[..n]);
    }
}

enum Transport {
    Plain(CountedConnection),
    Tls(Box<TlsStream<CountedConnection>>),
}

/// A connection whose handshake is done: what was read of it while waiting for the preface,
/// then the connection itself.
pub struct ServerConnection {
    read: Vec<u8>,
    replayed: usize,
    transport: Transport,
    /// HTTP/1 connections only.
    answer: Option<AnswerDeadline>,
    /// Closes the connection once too many of its streams were dropped for stalling.
    stalls: Option<Registration>,
    /// The client began with the HTTP/2 preface.
    http2: bool,
    /// HTTP/2 connections of counted peers only.
    frames: Option<FrameBudget>,
}

impl std::fmt::Debug for ServerConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConnection")
            .field("tls", &matches!(self.transport, Transport::Tls(_)))
            .field("to_replay", &(self.read.len() - self.replayed))
            .field("http1", &self.answer.is_some())
            .finish_non_exhaustive()
    }
}

impl Connected for ServerConnection {
    // The TCP peer over TLS too: the rate limiter and handlers find the peer address where
    // they look for it, and no client certificates are asked for.
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        match &self.transport {
            Transport::Plain(connection) => connection.connect_info(),
            Transport::Tls(tls) => tls.get_ref().0.connect_info(),
        }
    }
}

impl AsyncRead for ServerConnection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if let Some(answer) = &mut this.answer
            && let Poll::Ready(expired) = answer.poll_expired(cx)
        {
            return Poll::Ready(Err(expired));
        }
        if this.closed(cx) {
            return Poll::Ready(Err(stalled()));
        }
        let before = buf.filled().len();
        if this.replayed < this.read.len() {
            let n = buf.remaining().min(this.read.len() - this.replayed);
            buf.put_slice(&this.read[this.replayed..this.replayed + n]);
            this.replayed += n;
            if this.replayed == this.read.len() {
                this.read = Vec::new();
                this.replayed = 0;
            }
            return Poll::Ready(this.budget(&buf.filled()[before..]));
        }
        let read = Pin::new(&mut this.transport).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &read {
            if let Some(answer) = &mut this.answer {
                answer.read(buf.filled().len() - before);
            }
            return Poll::Ready(this.budget(&buf.filled()[before..]));
        }
        read
    }
}

/// Why a connection closed by [`Stalls`] fails its reads and writes.
fn stalled() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "connection closed: its client left too many streams unread",
    )
}

impl ServerConnection {
    /// Whether [`Stalls`] closed this connection; if not, `cx` is woken when it does. Asked by
    /// reads: the connection's task always has one pending, so a close wakes it there.
    fn closed(&self, cx: &Context<'_>) -> bool {
        self.stalls
            .as_ref()
            .is_some_and(|stalls| stalls.poll_closed(cx))
    }

    /// Whether [`Stalls`] closed this connection, without waiting for it (writes).
    fn closed_now(&self) -> bool {
        self.stalls.as_ref().is_some_and(Registration::is_closed)
    }

    fn wrote(&mut self, written: &Poll<io::Result<usize>>) {
        if let Poll::Ready(Ok(bytes)) = written {
            if let Some(answer) = &mut self.answer {
                answer.wrote(*bytes);
            }
            if let Some(frames) = &mut self.frames {
                frames.wrote(*bytes);
            }
        }
    }

    /// Counts the idle frames among bytes just read: an error once over the budget.
    fn budget(&mut self, read: &[u8]) -> io::Result<()> {
        let Some(frames) = &mut self.frames else {
            return Ok(());
        };
        if frames.read(read, std::time::Instant::now) {
            return Ok(());
        }
        // One line per closed connection: a flood costs 10,000 frames a line.
        info!("closing a connection that sends too many idle HTTP/2 frames");
        Err(io::Error::new(
            io::ErrorKind::ConnectionAborted,
            "connection closed: too many PING, SETTINGS or other idle frames",
        ))
    }
}

impl AsyncWrite for ServerConnection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.closed_now() {
            return Poll::Ready(Err(stalled()));
        }
        let written = Pin::new(&mut self.transport).poll_write(cx, buf);
        self.wrote(&written);
        written
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.closed_now() {
            return Poll::Ready(Err(stalled()));
        }
        let written = Pin::new(&mut self.transport).poll_write_vectored(cx, bufs);
        self.wrote(&written);
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.transport.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.transport).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.transport).poll_shutdown(cx)
    }
}

// Both kinds are `Unpin`, so each call goes straight through.
impl AsyncRead for Transport {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(io) => Pin::new(io).poll_read(cx, buf),
            Transport::Tls(io) => Pin::new(io.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Transport {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(io) => Pin::new(io).poll_write(cx, buf),
            Transport::Tls(io) => Pin::new(io.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(io) => Pin::new(io).poll_write_vectored(cx, bufs),
            Transport::Tls(io) => Pin::new(io.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Transport::Plain(io) => io.is_write_vectored(),
            Transport::Tls(io) => io.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(io) => Pin::new(io).poll_flush(cx),
            Transport::Tls(io) => Pin::new(io.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(io) => Pin::new(io).poll_shutdown(cx),
            Transport::Tls(io) => Pin::new(io.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::time::Instant;

    use super::*;

    fn emfile() -> io::Error {
        io::Error::from_raw_os_error(24)
    }

    #[test]
    fn an_http1_request_line_is_told_from_other_bytes() {
        assert_eq!(http1(b""), Http1::Maybe);
        assert_eq!(http1(b"G"), Http1::Maybe);
        assert_eq!(http1(b"GET"), Http1::Maybe);
        assert_eq!(http1(b"GET "), Http1::Head);
        assert_eq!(http1(b"OPTIONS /x HTTP/1.1\r\n"), Http1::Head);
        assert_eq!(http1(b" GET"), Http1::No);
        assert_eq!(
            http1(b"\x16\x03\x01"),
            Http1::No,
            "a TLS hello on the plain port"
        );
        assert_eq!(http1(b"get /"), Http1::No);
        assert_eq!(http1(&[b'A'; 40]), Http1::No, "no method is that long");
    }

    /// The head of a first HTTP/1 request is read whole (and no further) before hyper gets the
    /// connection; an unfinished one keeps the wait going, which the handshake deadline ends.
    #[tokio::test]
    async fn an_http1_connection_is_handed_over_once_its_first_head_is_in() {
        let head = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
        let mut whole = &head[..];
        assert_eq!(read_preface(&mut whole).await.unwrap(), head);
        let mut garbage = &b"\x16\x03\x01 and more"[..];
        assert_eq!(
            read_preface(&mut garbage).await.unwrap(),
            b"\x16\x03\x01 and more"
        );
        let mut unfinished = &b"GET / HTTP/1.1\r\nHost: x\r\n"[..];
        assert_eq!(
            read_preface(&mut unfinished).await.unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof,
            "still waiting when the bytes ran out"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_accept_loop_backs_off_when_out_of_descriptors() {
        const ERRORS: usize = 20;
        let polls = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&polls);
        // A listener out of descriptors: every accept fails at once, then one succeeds.
        let accepted = futures::stream::iter(0..=ERRORS).map(move |i| {
            counted.fetch_add(1, Ordering::Relaxed);
            if i < ERRORS { Err(emfile()) } else { Ok(i) }
        });
        let (_stop, stopped) = watch::channel(false);
        let mut connections = Vec::new();
        let started = Instant::now();
        accept_loop(Box::pin(accepted), stopped, |c| connections.push(c)).await;
        // The clock is paused: only the loop's own waits move it.
        let waited = started.elapsed();
        assert_eq!(polls.load(Ordering::Relaxed), ERRORS + 1);
        assert_eq!(connections, [ERRORS]);
        assert!(
            waited >= ACCEPT_BACKOFF * u32::try_from(ERRORS).unwrap(),
            "{ERRORS} errors in {waited:?}: no back-off"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn errors_about_one_connection_do_not_slow_accepting() {
        let accepted = futures::stream::iter([
            Err(io::Error::from(io::ErrorKind::ConnectionAborted)),
            Ok(1),
            Err(io::Error::from(io::ErrorKind::ConnectionReset)),
            Ok(2),
        ]);
        let (_stop, stopped) = watch::channel(false);
        let mut connections = Vec::new();
        let started = Instant::now();
        accept_loop(Box::pin(accepted), stopped, |c| connections.push(c)).await;
        assert_eq!(connections, [1, 2]);
        assert_eq!(started.elapsed(), Duration::ZERO);
    }

    #[tokio::test]
    async fn the_accept_loop_ends_when_the_server_stops() {
        let (stop, stopped) = watch::channel(false);
        let failing = futures::stream::unfold((), |()| async {
            tokio::task::yield_now().await;
            Some((Err::<(), _>(emfile()), ()))
        });
        let looping = tokio::spawn(accept_loop(Box::pin(failing), stopped, |()| {}));
        tokio::time::sleep(ACCEPT_BACKOFF * 3).await;
        stop.send(true).unwrap();
        looping.await.unwrap();
    }

    #[tokio::test]
    async fn the_preface_is_read_whole_and_replayed() {
        let mut settings = vec![0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 100];
        let mut preface = PREFACE.to_vec();
        preface.append(&mut settings);
        preface.extend_from_slice(b"more");
        // Delivered a few bytes at a time.
        let mut reader = chunked(&preface);
        let read = read_preface(&mut reader).await.unwrap();
        assert!(read.starts_with(&preface[..PREFACE.len() + FRAME_HEADER + 6]));
        // Junk is handed over as soon as it cannot be a preface.
        let mut junk = chunked(b"GET / HTTP/1.1\r\n\r\n");
        let read = read_preface(&mut junk).await.unwrap();
        assert!(read.len() < PREFACE.len(), "{read:?}");
        for first_frame in [[0xff; 9], [0, 0, 4, 1, 0, 0, 0, 0, 1]] {
            let mut bytes = PREFACE.to_vec();
            bytes.extend_from_slice(&first_frame);
            let read = read_preface(&mut chunked(&bytes)).await.unwrap();
            assert_eq!(
                read, bytes,
                "handed over without waiting for the frame's payload"
            );
        }
        // A client that closes mid-preface is an error.
        let mut half = chunked(&PREFACE[..10]);
        assert_eq!(
            read_preface(&mut half).await.unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
    }

    /// A reader that yields `bytes` three at a time, then EOF.
    fn chunked(bytes: &[u8]) -> ChunkReader {
        ChunkReader {
            chunks: bytes.chunks(3).map(<[u8]>::to_vec).collect(),
            next: 0,
        }
    }

    struct ChunkReader {
        chunks: Vec<Vec<u8>>,
        next: usize,
    }

    impl AsyncRead for ChunkReader {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            if let Some(chunk) = self.chunks.get(self.next) {
                buf.put_slice(chunk);
                self.next += 1;
            }
            Poll::Ready(Ok(()))
        }
    }
}
