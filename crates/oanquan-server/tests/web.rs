//! The browser side over plain HTTP/1.1, as a browser speaks it: the embedded page (types,
//! caching, compression, `--no-web`), gRPC-Web calls and server streams on the gRPC port,
//! and CORS only for `--cors-origin`.

mod common;

use std::io::Read as _;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Buf as _, Bytes};
use common::{authed, closed_after, started};
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use oanquan_proto::v1 as pb;
use oanquan_server::web::parse_origin;
use prost::Message as _;

/// One HTTP/1.1 request on a fresh connection; the response's body is read by the caller.
async fn send(addr: SocketAddr, request: Request<Full<Bytes>>) -> Response<Incoming> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(connection);
    tokio::time::timeout(Duration::from_secs(10), sender.send_request(request))
        .await
        .expect("an answer within 10 s")
        .unwrap()
}

async fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> (Response<()>, Bytes) {
    let mut request = Request::get(path).header(header::HOST, addr.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = send(addr, request.body(Full::default()).unwrap()).await;
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    (Response::from_parts(parts, ()), body)
}

fn header_of(response: &Response<()>, name: header::HeaderName) -> &str {
    response
        .headers()
        .get(&name)
        .map_or("", |value| value.to_str().unwrap())
}

fn gunzip(data: &[u8]) -> String {
    let mut text = String::new();
    flate2::read::GzDecoder::new(data)
        .read_to_string(&mut text)
        .unwrap();
    text
}

#[tokio::test]
async fn the_page_is_served_with_types_caching_and_compression() {
    let server = common::start(common::config()).await;
    let addr = server.addr;

    let (index, zipped) = get(addr, "/", &[("accept-encoding", "gzip, br")]).await;
    assert_eq!(index.status(), StatusCode::OK);
    assert_eq!(
        header_of(&index, header::CONTENT_TYPE),
        "text/html; charset=utf-8"
    );
    assert_eq!(header_of(&index, header::CACHE_CONTROL), "no-cache");
    assert_eq!(header_of(&index, header::CONTENT_ENCODING), "gzip");
    assert!(header_of(&index, header::CONTENT_SECURITY_POLICY).contains("default-src 'self'"));
    let html = gunzip(&zipped);
    assert!(html.to_lowercase().starts_with("<!doctype html>"), "{html}");

    // Without gzip in Accept-Encoding: the same page, uncompressed.
    let (plain, body) = get(addr, "/index.html", &[]).await;
    assert_eq!(header_of(&plain, header::CONTENT_ENCODING), "");
    assert_eq!(String::from_utf8(body.to_vec()).unwrap(), html);

    // The page's revalidation: same ETag, 304 with no body; the weak form matches too. The
    // gzip and plain bodies are two representations, with two tags.
    let etag = header_of(&index, header::ETAG).to_owned();
    assert!(etag.starts_with('"'), "{etag}");
    let plain_etag = header_of(&plain, header::ETAG).to_owned();
    assert_ne!(etag, plain_etag);
    for tag in [etag.clone(), format!("W/{etag}")] {
        let (again, body) = get(
            addr,
            "/",
            &[("if-none-match", &tag), ("accept-encoding", "gzip")],
        )
        .await;
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED, "{tag}");
        assert!(body.is_empty());
    }
    let (other, _) = get(addr, "/", &[("if-none-match", &etag)]).await;
    assert_eq!(
        other.status(),
        StatusCode::OK,
        "the plain body is not the gzip one"
    );
    let (again, _) = get(addr, "/", &[("if-none-match", &plain_etag)]).await;
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);

    // The script the page names: hashed, so cached for good.
    let script = html
        .split('"')
        .find(|part| part.starts_with("/assets/") && part.ends_with(".js"))
        .unwrap_or_else(|| panic!("no script in {html}"))
        .to_owned();
    let (js, zipped) = get(addr, &script, &[("accept-encoding", "gzip")]).await;
    assert_eq!(js.status(), StatusCode::OK);
    assert_eq!(
        header_of(&js, header::CONTENT_TYPE),
        "text/javascript; charset=utf-8"
    );
    assert_eq!(
        header_of(&js, header::CACHE_CONTROL),
        "public, max-age=31536000, immutable"
    );
    assert_eq!(header_of(&js, header::CONTENT_ENCODING), "gzip");
    assert!(!gunzip(&zipped).is_empty());

    // HEAD: the headers without the body.
    let head = Request::builder()
        .method(Method::HEAD)
        .uri("/")
        .header(header::HOST, addr.to_string())
        .body(Full::default())
        .unwrap();
    let response = send(addr, head).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .is_empty()
    );

    let (missing, _) = get(addr, "/no/such/file.js", &[]).await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        header_of(&missing, header::X_CONTENT_TYPE_OPTIONS),
        "nosniff"
    );
}

#[tokio::test]
async fn no_web_turns_the_page_off_but_not_grpc_web() {
    let mut config = common::config();
    config.web.no_web = true;
    let server = common::start(config).await;
    let (index, _) = get(server.addr, "/", &[]).await;
    assert_eq!(index.status(), StatusCode::NOT_FOUND);
    let (script, _) = get(server.addr, "/index.html", &[]).await;
    assert_eq!(script.status(), StatusCode::NOT_FOUND);

    let mut games = server.games().await;
    let (id, _, _) = started(&mut games, "standard").await;
    let frames = grpc_web_unary(server.addr, "GetGame", pb::GetGameRequest { game_id: id }).await;
    assert_eq!(frames.trailers["grpc-status"], "0");
}

#[tokio::test]
async fn other_methods_on_the_page_are_refused_with_the_allowed_ones() {
    let server = common::start(common::config()).await;
    for (method, path) in [
        (Method::POST, "/"),
        (Method::PUT, "/index.html"),
        (Method::DELETE, "/"),
        (Method::OPTIONS, "/index.html"),
    ] {
        let request = Request::builder()
            .method(method.clone())
            .uri(path)
            .header(header::HOST, server.addr.to_string())
            .body(Full::new(Bytes::from_static(b"x")))
            .unwrap();
        let response = send(server.addr, request).await;
        assert_eq!(
            response.status(),
            StatusCode::METHOD_NOT_ALLOWED,
            "{method} {path}"
        );
        assert_eq!(response.headers()[header::ALLOW], "GET, HEAD");
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert!(
            String::from_utf8_lossy(&body).contains("GET or HEAD"),
            "{body:?}"
        );
    }
    // Not a file of the page: still the gRPC side's answer, and gRPC-Web still works.
    let request = Request::post("/no-such-file")
        .header(header::HOST, server.addr.to_string())
        .body(Full::default())
        .unwrap();
    assert_ne!(
        send(server.addr, request).await.status(),
        StatusCode::METHOD_NOT_ALLOWED
    );
    let mut games = server.games().await;
    let (id, _, _) = started(&mut games, "standard").await;
    let frames = grpc_web_unary(server.addr, "GetGame", pb::GetGameRequest { game_id: id }).await;
    assert_eq!(frames.trailers["grpc-status"], "0");
}

/// A gRPC-Web message frame: flag 0, length, message.
fn frame(message: &impl prost::Message) -> Bytes {
    let body = message.encode_to_vec();
    let mut framed = vec![0u8];
    framed.extend_from_slice(&u32::try_from(body.len()).unwrap().to_be_bytes());
    framed.extend_from_slice(&body);
    Bytes::from(framed)
}

fn grpc_web_request(addr: SocketAddr, method: &str, body: Bytes) -> Request<Full<Bytes>> {
    Request::post(format!("/oanquan.v1.GameService/{method}"))
        .header(header::HOST, addr.to_string())
        .header(header::CONTENT_TYPE, "application/grpc-web+proto")
        .header("x-grpc-web", "1")
        .body(Full::new(body))
        .unwrap()
}

/// What a gRPC-Web response carried: its messages, then its trailers (or the headers of a
/// trailers-only response).
#[derive(Debug, Default)]
struct Frames {
    messages: Vec<Bytes>,
    trailers: std::collections::HashMap<String, String>,
}

/// Reads gRPC-Web frames from `body` as they arrive, until `until` says enough or the body
/// ends.
async fn read_frames(
    body: &mut Incoming,
    buffer: &mut Vec<u8>,
    frames: &mut Frames,
    until: impl Fn(&Frames) -> bool,
) {
    loop {
        while buffer.len() >= 5 {
            let length = u32::from_be_bytes(buffer[1..5].try_into().unwrap()) as usize;
            if buffer.len() < 5 + length {
                break;
            }
            let flag = buffer[0];
            let payload = Bytes::copy_from_slice(&buffer[5..5 + length]);
            buffer.drain(..5 + length);
            if flag & 0x80 == 0 {
                frames.messages.push(payload);
            } else {
                for line in String::from_utf8(payload.to_vec()).unwrap().split("\r\n") {
                    if let Some((name, value)) = line.split_once(':') {
                        frames
                            .trailers
                            .insert(name.trim().to_lowercase(), value.trim().to_owned());
                    }
                }
            }
        }
        if until(frames) {
            return;
        }
        let next = tokio::time::timeout(Duration::from_secs(10), body.frame())
            .await
            .expect("a frame within 10 s");
        match next {
            None => return,
            Some(frame) => {
                if let Ok(mut data) = frame.unwrap().into_data() {
                    while data.has_remaining() {
                        let chunk = data.chunk().to_vec();
                        data.advance(chunk.len());
                        buffer.extend_from_slice(&chunk);
                    }
                }
            }
        }
    }
}

/// The game events of a `WatchGame` stream's messages so far, heartbeats left out.
fn game_events(frames: &Frames) -> Vec<pb::game_event::Kind> {
    frames
        .messages
        .iter()
        .filter_map(|message| pb::WatchGameResponse::decode(message.clone()).ok()?.event)
        .filter_map(|event| event.kind)
        .filter(|kind| !matches!(kind, pb::game_event::Kind::Heartbeat(_)))
        .collect()
}

/// A `WatchGame` stream of game `id` over gRPC-Web on HTTP/1.1: its body, to read frames from.
async fn watch_game_web(addr: SocketAddr, id: &str) -> Incoming {
    let request = grpc_web_request(
        addr,
        "WatchGame",
        frame(&pb::WatchGameRequest {
            game_id: id.to_owned(),
            ..Default::default()
        }),
    );
    let response = send(addr, request).await;
    assert_eq!(response.status(), StatusCode::OK);
    response.into_body()
}

async fn grpc_web_unary(addr: SocketAddr, method: &str, message: impl prost::Message) -> Frames {
    let response = send(addr, grpc_web_request(addr, method, frame(&message))).await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut frames = Frames::default();
    for (name, value) in response.headers() {
        if name.as_str().starts_with("grpc-") {
            frames
                .trailers
                .insert(name.to_string(), value.to_str().unwrap().to_owned());
        }
    }
    assert!(
        response.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("application/grpc-web"),
        "{:?}",
        response.headers()
    );
    let mut body = response.into_body();
    read_frames(&mut body, &mut Vec::new(), &mut frames, |_| false).await;
    frames
}

#[tokio::test]
async fn grpc_web_unary_calls_work_on_the_grpc_port_over_http1() {
    let server = common::start(common::config()).await;
    let mut games = server.games().await;
    let (id, _, _) = started(&mut games, "standard").await;

    let frames = grpc_web_unary(
        server.addr,
        "GetGame",
        pb::GetGameRequest {
            game_id: id.clone(),
        },
    )
    .await;
    assert_eq!(frames.trailers["grpc-status"], "0");
    assert_eq!(frames.messages.len(), 1);
    let game = pb::GetGameResponse::decode(frames.messages[0].clone())
        .unwrap()
        .game
        .unwrap();
    assert_eq!(game.id, id);
    assert_eq!(game.status, i32::from(pb::GameStatus::Active));

    // Errors come back as gRPC statuses, as from gRPC.
    let frames = grpc_web_unary(
        server.addr,
        "GetGame",
        pb::GetGameRequest {
            game_id: "no-such-game".into(),
        },
    )
    .await;
    assert!(frames.messages.is_empty());
    assert_ne!(frames.trailers["grpc-status"], "0", "{frames:?}");
}

#[tokio::test]
async fn grpc_web_server_streams_deliver_events_as_they_happen() {
    let server = common::start(common::config()).await;
    let mut games = server.games().await;
    let (id, first, _) = started(&mut games, "standard").await;

    let mut body = watch_game_web(server.addr, &id).await;
    let mut buffer = Vec::new();
    let mut frames = Frames::default();
    read_frames(&mut body, &mut buffer, &mut frames, |frames| {
        !game_events(frames).is_empty()
    })
    .await;
    assert!(matches!(
        game_events(&frames)[0],
        pb::game_event::Kind::Snapshot(_)
    ));

    // An event that happens after the stream opened arrives on it, then the stream ends
    // with the game, status OK in the trailers frame.
    games
        .resign(authed(pb::ResignRequest { game_id: id }, &first))
        .await
        .unwrap();
    read_frames(&mut body, &mut buffer, &mut frames, |frames| {
        frames.trailers.contains_key("grpc-status")
    })
    .await;
    assert!(
        game_events(&frames)
            .iter()
            .any(|kind| matches!(kind, pb::game_event::Kind::GameOver(_))),
        "{:?}",
        game_events(&frames)
    );
    assert_eq!(frames.trailers["grpc-status"], "0");
}

async fn preflight(addr: SocketAddr, origin: &str) -> Response<()> {
    let request = Request::builder()
        .method(Method::OPTIONS)
        .uri("/oanquan.v1.GameService/GetGame")
        .header(header::HOST, addr.to_string())
        .header(header::ORIGIN, origin)
        .header(header::ACCESS_CONTROL_REQUEST_METHOD, "POST")
        .header(
            header::ACCESS_CONTROL_REQUEST_HEADERS,
            "content-type,x-grpc-web,authorization",
        )
        .body(Full::default())
        .unwrap();
    let (parts, _) = send(addr, request).await.into_parts();
    Response::from_parts(parts, ())
}

#[tokio::test]
async fn cors_allows_only_the_configured_origins() {
    // By default no other origin may call: the preflight carries no permission.
    let server = common::start(common::config()).await;
    let denied = preflight(server.addr, "https://elsewhere.example").await;
    assert_eq!(header_of(&denied, header::ACCESS_CONTROL_ALLOW_ORIGIN), "");
    drop(server);

    let mut config = common::config();
    config.web.cors_origins = vec![parse_origin("https://play.example").unwrap()];
    let server = common::start(config).await;
    let allowed = preflight(server.addr, "https://play.example").await;
    assert_eq!(
        header_of(&allowed, header::ACCESS_CONTROL_ALLOW_ORIGIN),
        "https://play.example"
    );
    let allowed_headers = header_of(&allowed, header::ACCESS_CONTROL_ALLOW_HEADERS);
    for needed in ["content-type", "x-grpc-web", "authorization"] {
        assert!(allowed_headers.contains(needed), "{allowed_headers}");
    }
    let denied = preflight(server.addr, "https://elsewhere.example").await;
    assert_eq!(header_of(&denied, header::ACCESS_CONTROL_ALLOW_ORIGIN), "");

    // The call itself: the allowed origin may read the status trailers.
    let mut games = server.games().await;
    let (id, _, _) = started(&mut games, "standard").await;
    let mut request = grpc_web_request(
        server.addr,
        "GetGame",
        frame(&pb::GetGameRequest { game_id: id }),
    );
    request.headers_mut().insert(
        header::ORIGIN,
        http::HeaderValue::from_static("https://play.example"),
    );
    let response = send(server.addr, request).await;
    let (parts, _) = response.into_parts();
    let response = Response::from_parts(parts, ());
    assert_eq!(
        header_of(&response, header::ACCESS_CONTROL_ALLOW_ORIGIN),
        "https://play.example"
    );
    assert!(header_of(&response, header::ACCESS_CONTROL_EXPOSE_HEADERS).contains("grpc-status"));
}

/// A HEAD request for the page: its answer is a head alone, so the connection stays in step.
const HEAD_REQUEST: &[u8] = b"HEAD / HTTP/1.1\r\nHost: localhost\r\n\r\n";

/// Reads one HTTP/1 response head from `stream`.
async fn response_head(stream: &mut (impl tokio::io::AsyncRead + Unpin)) -> String {
    use tokio::io::AsyncReadExt as _;
    let mut head = Vec::new();
    let mut byte = [0; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut byte))
            .await
            .expect("an answer within 5 s")
            .unwrap();
        assert_eq!(n, 1, "closed before the answer: {head:?}");
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap()
}

#[tokio::test]
async fn kept_alive_http1_connections_cannot_stall_the_next_request() {
    use tokio::io::AsyncWriteExt as _;
    let mut settings = common::config();
    settings.transport.handshake_timeout = Duration::from_millis(300);
    settings.transport.request_timeout = Duration::from_millis(500);
    settings.streams.heartbeat_interval = Duration::from_millis(200);
    // The handshake's time and the longer of a call's deadline and the heartbeat.
    let limit = Duration::from_millis(800);
    let server = common::start(settings).await;
    let answered_once = || async {
        let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
        stream.write_all(HEAD_REQUEST).await.unwrap();
        assert!(response_head(&mut stream).await.starts_with("HTTP/1.1 200"));
        stream
    };
    let in_time = |closed: Option<Duration>, what: &str| {
        let closed = closed.unwrap_or_else(|| panic!("{what}: still open after 5 s"));
        assert!(
            closed >= limit / 2 && closed < limit + Duration::from_millis(1500),
            "{what}: closed after {closed:?}"
        );
    };

    // The second request's head, a header line every 100 ms: the first byte starts the clock.
    let (read, mut write) = answered_once().await.into_split();
    let dribbling = tokio::spawn(async move {
        write.write_all(b"HEAD / HTTP/1.1\r\n").await?;
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            write.write_all(b"X-Slow: 1\r\n").await?;
        }
        #[allow(unreachable_code)]
        Ok::<(), std::io::Error>(())
    });
    in_time(closed_after(read).await, "a dribbled second head");
    dribbling.abort();

    // A whole request and one byte of the next, sent together, then nothing.
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    stream
        .write_all(&[HEAD_REQUEST, b"H"].concat())
        .await
        .unwrap();
    response_head(&mut stream).await;
    in_time(closed_after(stream).await, "a pipelined byte");

    // Idle on keep-alive after an answer.
    in_time(closed_after(answered_once().await).await, "idle keep-alive");

    // HTTP/2 (gRPC) connections are not held to it, although their preface starts like a
    // request line (`PRI * HTTP/2.0`): one quiet for three limits still answers.
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let (mut h2, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        TokioIo::new(tcp),
    )
    .await
    .unwrap();
    tokio::spawn(connection);
    tokio::time::sleep(limit * 3).await;
    let page = Request::get(format!("http://{}/", server.addr))
        .body(Full::<Bytes>::default())
        .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(5), h2.send_request(page))
        .await
        .expect("an answer within 5 s")
        .expect("the HTTP/2 connection is still open");
    assert_eq!(answer.status(), StatusCode::OK);

    // A client that asks now and then, each time within the limit, keeps its connection for
    // as long as it likes.
    let mut patient = answered_once().await;
    for _ in 0..6 {
        tokio::time::sleep(limit / 2).await;
        patient.write_all(HEAD_REQUEST).await.unwrap();
        assert!(
            response_head(&mut patient)
                .await
                .starts_with("HTTP/1.1 200")
        );
    }

    // A gRPC-Web stream writes its heartbeats, so it outlives the limit while nothing happens.
    let mut games = server.games().await;
    let (id, first, _) = started(&mut games, "standard").await;
    let mut body = watch_game_web(server.addr, &id).await;
    let (mut buffer, mut frames) = (Vec::new(), Frames::default());
    read_frames(&mut body, &mut buffer, &mut frames, |frames| {
        !frames.messages.is_empty()
    })
    .await;
    tokio::time::sleep(limit * 3).await;
    games
        .resign(authed(pb::ResignRequest { game_id: id }, &first))
        .await
        .unwrap();
    read_frames(&mut body, &mut buffer, &mut frames, |frames| {
        frames.trailers.contains_key("grpc-status")
    })
    .await;
    assert_eq!(frames.trailers["grpc-status"], "0", "{frames:?}");
    let over = game_events(&frames)
        .iter()
        .any(|kind| matches!(kind, pb::game_event::Kind::GameOver(_)));
    assert!(over, "the stream ended without the game's end");
}

/// What arrives on `stream` within `wait` (or until it closes), as text.
async fn read_for(stream: &mut tokio::net::TcpStream, wait: Duration) -> String {
    use tokio::io::AsyncReadExt as _;
    let mut got = Vec::new();
    let mut buffer = [0; 4096];
    let until = tokio::time::Instant::now() + wait;
    while let Ok(Ok(n)) = tokio::time::timeout_at(until, stream.read(&mut buffer)).await {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buffer[..n]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// A gRPC-Web call whose message never finishes arriving is cut at the request timeout
/// (DEADLINE_EXCEEDED), and answered as gRPC-Web (a browser's client reads the status, not a protocol error); a body
/// that is not HTTP/1.1 at all is the client's doing: CANCELLED, saying so, not INTERNAL with
/// hyper's error text.
#[tokio::test]
async fn grpc_web_calls_with_broken_bodies_get_a_grpc_web_answer_that_blames_no_server() {
    use tokio::io::AsyncWriteExt as _;
    let mut settings = common::config();
    settings.transport.request_timeout = Duration::from_millis(500);
    let server = common::start(settings).await;
    let post = |framing: &str| {
        format!(
            "POST /oanquan.v1.RulesService/ListPresets HTTP/1.1\r\nHost: localhost\r\n\
             Content-Type: application/grpc-web+proto\r\n{framing}\r\n\r\n"
        )
    };

    // Ten bytes announced, three sent: the 5-byte prefix never ends.
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let started = std::time::Instant::now();
    stream
        .write_all(format!("{}\0\0\0", post("Content-Length: 10")).as_bytes())
        .await
        .unwrap();
    let answer = read_for(&mut stream, Duration::from_secs(3)).await;
    assert!(started.elapsed() >= Duration::from_millis(450), "{answer}");
    let lower = answer.to_ascii_lowercase();
    assert!(lower.starts_with("http/1.1 200"), "{answer}");
    assert!(
        lower.contains("content-type: application/grpc-web"),
        "{answer}"
    );
    assert!(lower.contains("grpc-status: 4\r\n"), "{answer}");
    assert!(lower.contains("request%20timeout"), "{answer}");

    // A chunk size that is not a number.
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    stream
        .write_all(
            format!(
                "{}ZZ\r\nnot a chunk\r\n",
                post("Transfer-Encoding: chunked")
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let answer = read_for(&mut stream, Duration::from_secs(2)).await;
    let lower = answer.to_ascii_lowercase();
    assert!(lower.contains("grpc-status: 1\r\n"), "{answer}");
    assert!(lower.contains("could%20not%20be%20read"), "{answer}");
    assert!(!lower.contains("hyper"), "{answer}");
}

/// A rules client on `addr` whose calls name `rebind.example` in `:authority`.
async fn rebound_rules(
    addr: SocketAddr,
) -> pb::rules_service_client::RulesServiceClient<tonic::transport::Channel> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .origin(http::Uri::from_static("http://rebind.example:50051"))
        .connect()
        .await
        .unwrap();
    pb::rules_service_client::RulesServiceClient::new(channel)
}

/// DNS rebinding: a page of another site has its name resolve to 127.0.0.1 and calls the
/// server as that site. Its requests name the site, and are refused unless `--allowed-host`
/// names it, with a reason that says so: the page, gRPC-Web and gRPC over HTTP/2.
#[tokio::test]
async fn a_page_elsewhere_that_rebinds_its_name_here_is_refused() {
    let server = common::start(common::config()).await;
    let rebound = |request: &mut Request<Full<Bytes>>| {
        request.headers_mut().insert(
            header::HOST,
            http::HeaderValue::from_static("rebind.example:50051"),
        );
    };
    let mut page = Request::get("/").body(Full::default()).unwrap();
    rebound(&mut page);
    let response = send(server.addr, page).await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let body = String::from_utf8_lossy(&body);
    assert!(body.contains("--allowed-host rebind.example"), "{body}");

    let message = pb::ListPresetsRequest::default();
    let mut call = grpc_web_request(server.addr, "GetGame", frame(&message));
    *call.uri_mut() = http::Uri::from_static("/oanquan.v1.RulesService/ListPresets");
    rebound(&mut call);
    let response = send(server.addr, call).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["grpc-status"], "7", "{response:?}");
    let reason = response.headers()["grpc-message"].to_str().unwrap();
    assert!(reason.contains("rebind.example"), "{reason}");

    // Native gRPC names the host in `:authority`.
    let refused = rebound_rules(server.addr)
        .await
        .list_presets(message)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    assert!(
        refused.message().contains("--allowed-host rebind.example"),
        "{refused:?}"
    );
    // By address, as every test here: answered.
    let (index, _) = get(server.addr, "/", &[]).await;
    assert_eq!(index.status(), StatusCode::OK);

    let mut config = common::config();
    config.web.allowed_hosts =
        vec![oanquan_server::web::parse_allowed_host("rebind.example").unwrap()];
    let server = common::start(config).await;
    let mut page = Request::get("/").body(Full::default()).unwrap();
    rebound(&mut page);
    assert_eq!(send(server.addr, page).await.status(), StatusCode::OK);
    rebound_rules(server.addr)
        .await
        .list_presets(message)
        .await
        .unwrap();
}
