//! Readiness on PostgreSQL, through the real binary: with a TCP proxy between the server and
//! the database, cutting the proxy turns gRPC health NOT_SERVING within seconds (and writes
//! UNAVAILABLE), restoring it turns health SERVING again by itself, and a move made then is
//! played.
//!
//! Needs a PostgreSQL server: `OANQUAN_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test
//! cargo test -p oanquan-server --test nodes_health`. Without the variable the test says so and
//! passes without doing anything.

mod common;

use std::net::{SocketAddr, ToSocketAddrs as _};
use std::time::{Duration, Instant};

use common::nodes::{Node, Schema, with_schema};
use common::*;
use oanquan_proto::v1 as pb;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_stream::StreamExt as _;
use tonic::Code;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// What the proxy does with connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    /// Forwards them.
    Up,
    /// Drops every open connection and closes each new one at once, as a database that went
    /// away.
    Cut,
    /// Keeps every connection open and forwards nothing, as a database behind a network that
    /// drops packets.
    Silent,
}

/// Forwards connections to `upstream` as its [`Link`] says.
struct Proxy {
    addr: SocketAddr,
    link: watch::Sender<Link>,
    task: JoinHandle<()>,
}

impl Proxy {
    async fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (link, _) = watch::channel(Link::Up);
        let state = link.subscribe();
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let mut state = state.clone();
                let now = *state.borrow_and_update();
                tokio::spawn(async move {
                    match now {
                        Link::Cut => return, // Dropped: closed.
                        Link::Silent => {
                            let _ = state.wait_for(|link| *link == Link::Cut).await;
                            return;
                        }
                        Link::Up => {}
                    }
                    let Ok(mut outbound) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let silent = tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => false,
                        link = state.wait_for(|link| *link != Link::Up) => {
                            link.is_ok_and(|link| *link == Link::Silent)
                        }
                    };
                    if silent {
                        // Both ends stay open until the link is cut.
                        let _ = state.wait_for(|link| *link == Link::Cut).await;
                    }
                    drop((inbound, outbound));
                });
            }
        });
        Proxy { addr, link, task }
    }

    fn set(&self, link: Link) {
        self.link.send_replace(link);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.link.send_replace(Link::Cut);
        self.task.abort();
    }
}

/// The database's address, from the test URL.
fn upstream(url: &str) -> SocketAddr {
    let config: tokio_postgres::Config = url.parse().unwrap();
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
        other => panic!("the test needs PostgreSQL over TCP, not {other:?}"),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    (host.as_str(), port)
        .to_socket_addrs()
        .unwrap()
        .next()
        .unwrap_or_else(|| panic!("cannot resolve {host}"))
}

/// The test URL's user, password and database at `proxy`, on `schema`.
fn through(url: &str, proxy: SocketAddr, schema: &str) -> String {
    let config: tokio_postgres::Config = url.parse().unwrap();
    let user = config.get_user().unwrap_or("postgres");
    let password = config
        .get_password()
        .map(|p| format!(":{}", String::from_utf8_lossy(p)))
        .unwrap_or_default();
    let database = config.get_dbname().unwrap_or(user);
    with_schema(
        &format!("postgres://{user}{password}@{proxy}/{database}"),
        schema,
    )
}

/// Waits (at most `within`) for `wanted` on the health stream; returns how long it took.
async fn health_becomes(
    statuses: &mut tonic::Streaming<tonic_health::pb::HealthCheckResponse>,
    wanted: ServingStatus,
    within: Duration,
) -> Duration {
    let started = Instant::now();
    let seen = tokio::time::timeout(within, async {
        while let Some(response) = statuses.next().await {
            if response.unwrap().status() == wanted {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(
        seen,
        Ok(true),
        "health never turned {wanted:?} in {within:?}"
    );
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_follows_whether_the_database_can_be_reached() {
    let Some(schema) = Schema::new("nodes_health").await else {
        return;
    };
    let proxy = Proxy::start(upstream(&schema.url)).await;
    let database = through(&schema.url, proxy.addr, &schema.name);
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start(&database, dir.path(), &["--database-pool-wait", "1s"]);
    let channel = node.channel().await;
    let mut client = Games::new(channel.clone());
    let mut statuses = HealthClient::new(channel)
        .watch(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    health_becomes(
        &mut statuses,
        ServingStatus::Serving,
        Duration::from_secs(5),
    )
    .await;
    let (id, first, second) = started(&mut client, "standard").await;
    play_one(&mut client, &id, (&first, &second)).await;

    proxy.set(Link::Cut);
    let down = health_becomes(
        &mut statuses,
        ServingStatus::NotServing,
        Duration::from_secs(10),
    )
    .await;
    let refused = client
        .create_game(lan_creates("standard"))
        .await
        .expect_err("no database, no new game");
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");

    proxy.set(Link::Up);
    let up = health_becomes(
        &mut statuses,
        ServingStatus::Serving,
        Duration::from_secs(10),
    )
    .await;
    let after = play_one(&mut client, &id, (&first, &second)).await;
    assert_eq!(after.move_count, 2);
    eprintln!("nodes_health: NOT_SERVING {down:?} after the cut, SERVING {up:?} after the restore");
    drop(node);
    schema.drop().await;
}

/// A node told to stop while its database answers nothing stops all the same, within its
/// drain timeout (2 s here) for the calls and as long again for handing its work over: an
/// outside probe's node waited as long as the database stayed silent, a minute and more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_stops_while_its_database_is_silent() {
    let Some(schema) = Schema::new("nodes_silent").await else {
        return;
    };
    let proxy = Proxy::start(upstream(&schema.url)).await;
    let database = through(&schema.url, proxy.addr, &schema.name);
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start(&database, dir.path(), &[]);
    let mut client = node.games().await;
    let (id, first, second) = started(&mut client, "standard").await;
    play_one(&mut client, &id, (&first, &second)).await;
    // A seek of this node's, to withdraw at the stop.
    let mut seek = client.clone();
    let _seeking = tokio::spawn(async move {
        seek.seek(pb::SeekRequest {
            rules: preset("standard"),
            display_name: "Lan".into(),
            ..Default::default()
        })
        .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;

    proxy.set(Link::Silent);
    // A move in flight when the signal comes.
    let mut mover = client.clone();
    let (game, tokens) = (id.clone(), (first.clone(), second.clone()));
    let _moving =
        tokio::spawn(async move { play_one(&mut mover, &game, (&tokens.0, &tokens.1)).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let asked = Instant::now();
    // Exits 0 within 10 s (`Node::stop`).
    tokio::task::spawn_blocking(move || node.stop())
        .await
        .unwrap();
    eprintln!(
        "nodes_health: stopped {:?} after SIGTERM with the database silent",
        asked.elapsed()
    );
    proxy.set(Link::Cut);
    schema.drop().await;
}
