//! The deadline of a call: `--request-timeout`, or the client's `grpc-timeout` if shorter.
//!
//! tonic's own (`Server::timeout`) sits outside every layer a server adds, gRPC-Web's
//! translation included: a gRPC-Web call cut by it was answered as plain gRPC
//! (`application/grpc`), which a browser's client reads as a protocol error instead of the
//! status. This layer goes inside the translation, so the answer (CANCELLED, "Timeout expired",
//! as tonic's) is translated like any other. Like tonic's, it bounds the wait for a response's
//! headers: a stream, once answered, is not cut by it. Its deadline is set in `call`, before
//! tonic's (which still applies a client's `grpc-timeout`), and so is never later than it.
//! The timer is made (and boxed) only when the call first has to wait: a call answered at
//! once never touches the timer wheel, and the futures around it stay small.
//!
//! **Calls whose answer is shown once.** `Register`, `CreateApiKey`, `CreateGame`,
//! `JoinGame`, `AcceptSeek` and `OfferRematch` answer with a secret the server keeps only as a
//! hash (an API key, a seat token). Once such a call's handler has its request and begins
//! ([`begin_once`]), the server's own `--request-timeout` no longer cuts it: it is answered
//! when done. Cut there, it made the account or took the seat and told the client only
//! DEADLINE_EXCEEDED, the secret lost for good. A client's `grpc-timeout` still applies: the
//! client chose it and gives up at it on its side anyway (and tonic's own timer, outside every
//! layer, would cut the call there).
//!
//! **A malformed `grpc-timeout`** (not 1 to 8 digits and a unit) is INVALID_ARGUMENT, not
//! ignored as tonic does: `-1S` must not mean "no deadline".

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};
use tonic::body::Body;
use tower::{Layer, Service};

/// See the module docs.
#[derive(Debug, Clone, Copy)]
pub struct DeadlineLayer {
    server: Duration,
}

impl DeadlineLayer {
    /// Calls answer within `server`, or the client's shorter `grpc-timeout`.
    #[must_use]
    pub fn new(server: Duration) -> DeadlineLayer {
        DeadlineLayer { server }
    }
}

impl<S> Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;
    fn layer(&self, inner: S) -> Deadline<S> {
        Deadline {
            inner,
            server: self.server,
        }
    }
}

/// The service [`DeadlineLayer`] makes.
#[derive(Debug, Clone)]
pub struct Deadline<S> {
    inner: S,
    server: Duration,
}

/// The client's `grpc-timeout` (gRPC over HTTP/2: at most 8 digits and a unit): `Ok(None)` if
/// absent, `Err(())` if malformed.
fn client_timeout(headers: &http::HeaderMap) -> Result<Option<Duration>, ()> {
    let Some(value) = headers.get("grpc-timeout") else {
        return Ok(None);
    };
    let text = value.to_str().map_err(|_| ())?;
    let digits = text.get(..text.len().checked_sub(1).ok_or(())?).ok_or(())?;
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(());
    }
    let value: u64 = digits.parse().map_err(|_| ())?;
    Ok(Some(match &text[digits.len()..] {
        "H" => Duration::from_secs(value * 3600),
        "M" => Duration::from_secs(value * 60),
        "S" => Duration::from_secs(value),
        "m" => Duration::from_millis(value),
        "u" => Duration::from_micros(value),
        "n" => Duration::from_nanos(value),
        _ => return Err(()),
    }))
}

/// The methods whose answer carries a secret shown once (see the module docs).
const SHOWN_ONCE: [&str; 6] = [
    "/oanquan.v1.AccountService/Register",
    "/oanquan.v1.AccountService/CreateApiKey",
    "/oanquan.v1.GameService/CreateGame",
    "/oanquan.v1.GameService/JoinGame",
    "/oanquan.v1.GameService/AcceptSeek",
    "/oanquan.v1.GameService/OfferRematch",
];

/// The method whose handler reads its call's deadline ([`CallDeadline`]).
const ANALYZE: &str = "/oanquan.v1.RulesService/Analyze";

/// In the request's extensions of an `Analyze` call with a deadline: when the call is cut.
/// The search ends in time to answer before it (`rules_service`), rather than search on to a
/// time limit its caller will not wait for and answer nothing.
#[derive(Debug, Clone, Copy)]
pub struct CallDeadline(pub Instant);

/// In the request's extensions of a [`SHOWN_ONCE`] call: set by its handler when it begins.
#[derive(Debug, Clone, Default)]
pub struct Begun(Arc<AtomicBool>);

/// Tells the deadline layer that this call's handler has its request and begins: from here on
/// it is answered when done, not cut by its deadline (see the module docs). A call of another
/// method carries no mark, and this does nothing.
pub fn begin_once<T>(request: &tonic::Request<T>) {
    if let Some(begun) = request.extensions().get::<Begun>() {
        begun.0.store(true, Ordering::Relaxed);
    }
}

impl<S, B> Service<http::Request<B>> for Deadline<S>
where
    S: Service<http::Request<B>, Response = http::Response<Body>>,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = DeadlineFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let now = Instant::now();
        let (limit, whose, client) = match client_timeout(request.headers()) {
            Err(()) => {
                return DeadlineFuture {
                    inner: None,
                    deadline: None,
                    client_deadline: None,
                    whose: Whose::Malformed,
                    begun: None,
                    sleep: None,
                    started: false,
                };
            }
            Ok(Some(client)) if client <= self.server => (client, Whose::Client, None),
            Ok(client) => (self.server, Whose::Server(self.server), client),
        };
        // `--request-timeout` may be longer than the clock can count to: then there is none.
        let deadline = now.checked_add(limit);
        let client_deadline = client.and_then(|client| now.checked_add(client));
        if let Some(deadline) = deadline
            && request.uri().path() == ANALYZE
        {
            request.extensions_mut().insert(CallDeadline(deadline));
        }
        let begun = SHOWN_ONCE.contains(&request.uri().path()).then(|| {
            let begun = Begun::default();
            request.extensions_mut().insert(begun.clone());
            begun
        });
        DeadlineFuture {
            inner: Some(self.inner.call(request)),
            deadline,
            client_deadline,
            whose,
            begun,
            sleep: None,
            started: false,
        }
    }
}

pin_project! {
    /// The future of [`Deadline`].
    #[derive(Debug)]
    pub struct DeadlineFuture<F> {
        // None for a call refused before it was made (a malformed grpc-timeout).
        #[pin]
        inner: Option<F>,
        deadline: Option<Instant>,
        // The client's deadline when the server's comes first: where a begun call goes on to.
        client_deadline: Option<Instant>,
        whose: Whose,
        begun: Option<Begun>,
        sleep: Option<Pin<Box<Sleep>>>,
        started: bool,
    }
}

impl<F, E> Future for DeadlineFuture<F>
where
    F: Future<Output = Result<http::Response<Body>, E>>,
{
    type Output = Result<http::Response<Body>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let Some(inner) = this.inner.as_pin_mut() else {
            return Poll::Ready(Ok(malformed_timeout()));
        };
        // A call whose deadline has passed before it starts (`grpc-timeout: 1n`) is not run:
        // its answer could only be the timeout, and a CreateGame would still make a game the
        // client never hears of.
        if !*this.started {
            *this.started = true;
            if this
                .deadline
                .is_some_and(|deadline| deadline <= Instant::now())
            {
                return Poll::Ready(Ok(not_started()));
            }
        }
        if let Poll::Ready(result) = inner.poll(cx) {
            return Poll::Ready(result);
        }
        loop {
            let Some(deadline) = *this.deadline else {
                return Poll::Pending;
            };
            let sleep = this
                .sleep
                .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            // Begun, the server's own deadline gives way to the client's, if any: the answer is
            // awaited until then (its waker is the inner call's, registered above).
            let begun = this
                .begun
                .as_ref()
                .is_some_and(|begun| begun.0.load(Ordering::Relaxed));
            if !begun || !matches!(*this.whose, Whose::Server(_)) {
                return Poll::Ready(Ok(timed_out(*this.whose)));
            }
            *this.deadline = this.client_deadline.take();
            *this.whose = Whose::Client;
            *this.sleep = None;
        }
    }
}

/// Whose deadline a call has: the client's `grpc-timeout`, or the server's request timeout.
#[derive(Debug, Clone, Copy)]
enum Whose {
    Client,
    Server(Duration),
    /// None: the client's `grpc-timeout` could not be read.
    Malformed,
}

/// The answer to a call that ran past its deadline. It may still have done what it was asked
/// (gRPC's DEADLINE_EXCEEDED allows that), which the README tells clients how to check.
fn timed_out(whose: Whose) -> http::Response<Body> {
    let message = match whose {
        Whose::Client => {
            "the call's deadline (its grpc-timeout) passed before it was answered".to_owned()
        }
        Whose::Server(limit) => {
            format!("the call was not answered within the server's request timeout of {limit:?}")
        }
        Whose::Malformed => return malformed_timeout(),
    };
    tonic::Status::deadline_exceeded(message).into_http()
}

/// The answer to a call whose `grpc-timeout` cannot be read: it is not run.
fn malformed_timeout() -> http::Response<Body> {
    tonic::Status::invalid_argument(
        "the grpc-timeout header is malformed: gRPC writes it as 1 to 8 digits and a unit (H, M, \
         S, m, u or n), as in 500m; the call was not run",
    )
    .into_http()
}

/// The answer to a call whose deadline had passed before it started: it was not run.
fn not_started() -> http::Response<Body> {
    tonic::Status::deadline_exceeded(
        "the call's deadline had passed before it started; it was not run",
    )
    .into_http()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A service that answers at once, behind the layer (30 s), and whether it ran.
    fn recorded() -> (
        Arc<AtomicBool>,
        Deadline<
            impl Service<
                http::Request<()>,
                Response = http::Response<Body>,
                Error = std::convert::Infallible,
            >,
        >,
    ) {
        let ran = Arc::new(AtomicBool::new(false));
        let answer = {
            let ran = Arc::clone(&ran);
            tower::service_fn(move |_: http::Request<()>| {
                let ran = Arc::clone(&ran);
                async move {
                    ran.store(true, Ordering::SeqCst);
                    Ok::<_, std::convert::Infallible>(http::Response::new(Body::empty()))
                }
            })
        };
        (
            ran,
            DeadlineLayer::new(Duration::from_secs(30)).layer(answer),
        )
    }

    #[test]
    fn client_timeouts_are_read_as_grpc_writes_them() {
        let read = |value: &str| {
            let mut headers = http::HeaderMap::new();
            headers.insert("grpc-timeout", value.parse().unwrap());
            client_timeout(&headers)
        };
        assert_eq!(read("1H"), Ok(Some(Duration::from_secs(3600))));
        assert_eq!(read("2M"), Ok(Some(Duration::from_secs(120))));
        assert_eq!(read("99999999S"), Ok(Some(Duration::from_secs(99_999_999))));
        assert_eq!(read("200m"), Ok(Some(Duration::from_millis(200))));
        assert_eq!(read("7u"), Ok(Some(Duration::from_micros(7))));
        assert_eq!(read("5n"), Ok(Some(Duration::from_nanos(5))));
        for bad in [
            "",
            "S",
            "100000000S",
            "1s",
            "-1S",
            "1.5S",
            "+1S",
            "1 S",
            "1x",
        ] {
            assert_eq!(read(bad), Err(()), "{bad:?}");
        }
        assert_eq!(client_timeout(&http::HeaderMap::new()), Ok(None));
    }

    #[tokio::test]
    async fn a_timeout_past_what_the_clock_counts_is_none() {
        use tower::ServiceExt as _;
        let answer = tower::service_fn(|_: http::Request<()>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(Body::empty()))
        });
        let service = DeadlineLayer::new(Duration::MAX).layer(answer);
        let response = service.oneshot(http::Request::new(())).await.unwrap();
        assert!(response.headers().get("grpc-status").is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_past_its_deadline_is_answered_deadline_exceeded() {
        use tower::ServiceExt as _;
        let never = tower::service_fn(|_: http::Request<()>| async {
            std::future::pending::<Result<http::Response<Body>, std::convert::Infallible>>().await
        });
        let service = DeadlineLayer::new(Duration::from_secs(30)).layer(never);
        let request = http::Request::builder()
            .header("grpc-timeout", "200m")
            .body(())
            .unwrap();
        let started = tokio::time::Instant::now();
        let response = service.oneshot(request).await.unwrap();
        assert_eq!(started.elapsed(), Duration::from_millis(200));
        assert_eq!(response.headers()["grpc-status"], "4");
        let message = response.headers()["grpc-message"].to_str().unwrap();
        assert!(message.contains("grpc-timeout"), "{message}");
    }

    /// A call of a method whose answer holds a secret shown once is not cut by the server's
    /// request timeout once its handler has begun: it is answered when done, or at the client's
    /// own deadline if it has one. Before it begins (its request still on its way), and for
    /// other methods, the server's timeout cuts as before.
    #[tokio::test(start_paused = true)]
    async fn a_begun_call_whose_answer_is_shown_once_outlives_the_servers_timeout() {
        use tower::ServiceExt as _;
        // Begins (as a handler with its request does), then takes 5 s to answer.
        let slow = |begins: bool| {
            tower::service_fn(move |request: http::Request<()>| async move {
                if begins {
                    begin_once(&tonic::Request::from_http(request));
                }
                tokio::time::sleep(Duration::from_secs(5)).await;
                Ok::<_, std::convert::Infallible>(http::Response::new(Body::empty()))
            })
        };
        let call = |path: &str, timeout: Option<&str>| {
            let mut request = http::Request::builder().uri(path);
            if let Some(timeout) = timeout {
                request = request.header("grpc-timeout", timeout);
            }
            request.body(()).unwrap()
        };
        // The server's timeout 1 s; (path, the client's grpc-timeout, begins) → (seconds, status).
        let register = "/oanquan.v1.AccountService/Register";
        let cases = SHOWN_ONCE
            .iter()
            .map(|&path| (path, None, true, 5, None))
            .chain([
                (register, Some("10S"), true, 5, None),
                (register, Some("3S"), true, 3, Some("4")),
                (register, Some("500m"), true, 0, Some("4")),
                (register, None, false, 1, Some("4")),
                ("/oanquan.v1.GameService/PlayMove", None, true, 1, Some("4")),
            ]);
        for (path, timeout, begins, seconds, status) in cases {
            let service = DeadlineLayer::new(Duration::from_secs(1)).layer(slow(begins));
            let started = tokio::time::Instant::now();
            let response = service.oneshot(call(path, timeout)).await.unwrap();
            assert_eq!(
                started.elapsed().as_secs(),
                seconds,
                "{path} {timeout:?} {begins}"
            );
            assert_eq!(
                response
                    .headers()
                    .get("grpc-status")
                    .map(|s| s.to_str().unwrap()),
                status,
                "{path} {timeout:?} {begins}"
            );
        }
    }

    /// A `grpc-timeout` that cannot be read is INVALID_ARGUMENT, and the call is not run: an
    /// outside probe's `-1S` ran with no deadline at all.
    #[tokio::test]
    async fn a_malformed_grpc_timeout_is_refused_and_not_run() {
        let (ran, mut service) = recorded();
        for bad in ["-1S", "1x", "99999999999S", "1.5S", "S"] {
            let request = http::Request::builder()
                .header("grpc-timeout", bad)
                .body(())
                .unwrap();
            let response = service.call(request).await.unwrap();
            assert_eq!(response.headers()["grpc-status"], "3", "{bad}");
        }
        assert!(!ran.load(Ordering::SeqCst), "the handler did not run");
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_past_the_servers_timeout_says_so() {
        use tower::ServiceExt as _;
        let never = tower::service_fn(|_: http::Request<()>| async {
            std::future::pending::<Result<http::Response<Body>, std::convert::Infallible>>().await
        });
        let service = DeadlineLayer::new(Duration::from_secs(30)).layer(never);
        // A client's longer deadline leaves the server's in force.
        let request = http::Request::builder()
            .header("grpc-timeout", "60S")
            .body(())
            .unwrap();
        let started = tokio::time::Instant::now();
        let response = service.oneshot(request).await.unwrap();
        assert_eq!(started.elapsed(), Duration::from_secs(30));
        assert_eq!(response.headers()["grpc-status"], "4");
        let message = response.headers()["grpc-message"].to_str().unwrap();
        assert!(
            message.contains("request%20timeout%20of%2030s"),
            "{message}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_past_its_deadline_before_it_starts_is_not_run() {
        let (ran, mut service) = recorded();
        let request = |timeout: &str| {
            http::Request::builder()
                .header("grpc-timeout", timeout)
                .body(())
                .unwrap()
        };
        let call = service.call(request("1n"));
        tokio::time::advance(Duration::from_micros(1)).await;
        let response = call.await.unwrap();
        assert_eq!(response.headers()["grpc-status"], "4");
        assert!(!ran.load(Ordering::SeqCst), "the handler did not run");

        // A deadline still ahead runs the call as before.
        let call = service.call(request("1m"));
        tokio::time::advance(Duration::from_micros(1)).await;
        let response = call.await.unwrap();
        assert!(response.headers().get("grpc-status").is_none());
        assert!(ran.load(Ordering::SeqCst));
    }
}
