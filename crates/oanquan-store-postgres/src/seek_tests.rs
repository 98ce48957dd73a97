//! Seeks shared by several nodes (pools of their own on one schema): pairing exactly once
//! whatever the races, withdrawals, the computer fallback, and a silent node's seeks.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use oanquan_ai::Level;
use oanquan_game::seek::{SeekLimits, SeekOutcome, SeekPool, SeekRequest, SeekUpdate};
use oanquan_game::{
    GameId, GameManager, GameStore, Hub, ManagerLimits, PlayerKind, PlayerToken, Seated,
    TimeControl,
};
use oanquan_rules::{Player, Preset};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::tests::TestSchema;

/// One server node as far as seeks go: its store, manager, pool and board task.
struct Node {
    store: Arc<dyn GameStore>,
    pool: Arc<SeekPool>,
    seeks: Arc<crate::PostgresSeeks>,
    board: JoinHandle<()>,
    stop: watch::Sender<bool>,
}

impl Node {
    async fn start(schema: &TestSchema, max_seeks: usize) -> Node {
        let postgres = schema.store().await;
        let (stop, stop_rx) = watch::channel(false);
        let (board, task) = postgres.spawn_seeks(stop_rx).await.unwrap();
        let store: Arc<dyn GameStore> = Arc::new(postgres);
        let manager = Arc::new(GameManager::new(
            Arc::clone(&store),
            Hub::new(1024),
            ManagerLimits::default(),
        ));
        let limits = SeekLimits {
            max_seeks,
            ..SeekLimits::default()
        };
        Node {
            store,
            pool: SeekPool::shared(manager, limits, Arc::clone(&board) as _),
            seeks: board,
            board: task,
            stop,
        }
    }
}

fn request(name: &str) -> SeekRequest {
    SeekRequest {
        rules: Preset::Standard.rules(),
        preset: Some(Preset::Standard),
        time_control: TimeControl::Untimed,
        display_name: name.to_owned(),
        computer: None,
        client: None,
        account: None,
        rated: false,
        rating_range: None,
    }
}

/// Polls `check` every 50 ms until it holds, for up to `within`.
async fn eventually(within: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + within;
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within {within:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Seeks and waits for the game.
async fn seek_and_wait(pool: Arc<SeekPool>, request: SeekRequest) -> Seated {
    match pool.seek(request).await.unwrap() {
        SeekOutcome::Paired(seated) => seated,
        SeekOutcome::Waiting(mut ticket) => ticket.wait().await.unwrap(),
    }
}

/// Whose seat `token` opens in game `id`, as the store has it.
async fn seat_of(store: &Arc<dyn GameStore>, id: &GameId, token: &PlayerToken) -> Option<Player> {
    store.load(id).await.unwrap().seat_of(&token.hash())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_seekers_on_two_nodes_make_one_game_per_pair() {
    let Some(schema) = TestSchema::new() else {
        return;
    };
    let nodes = [
        Node::start(&schema, 10_000).await,
        Node::start(&schema, 10_000).await,
    ];
    let seekers: Vec<_> = (0..100)
        .map(|i| {
            let pool = Arc::clone(&nodes[i % 2].pool);
            tokio::spawn(seek_and_wait(pool, request(&format!("Seeker {i}"))))
        })
        .collect();
    let mut seated = Vec::new();
    for seeker in seekers {
        seated.push(
            tokio::time::timeout(Duration::from_secs(60), seeker)
                .await
                .expect("every seeker is paired")
                .unwrap(),
        );
    }
    let mut games: HashMap<GameId, Vec<(Player, String)>> = HashMap::new();
    for seat in &seated {
        // The token each seeker got opens the seat it was told, whichever node made the game.
        assert_eq!(
            seat_of(&nodes[0].store, &seat.game.id, &seat.token).await,
            Some(seat.seat)
        );
        let name = seat.game.seats[seat.seat]
            .as_ref()
            .unwrap()
            .display_name
            .clone();
        games
            .entry(seat.game.id.clone())
            .or_default()
            .push((seat.seat, name));
    }
    assert_eq!(games.len(), 50, "exactly one game per two seekers");
    let mut names: Vec<&String> = games.values().flatten().map(|(_, name)| name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 100, "nobody twice");
    for players in games.values() {
        let mut seats: Vec<Player> = players.iter().map(|(seat, _)| *seat).collect();
        seats.sort_by_key(|seat| seat.index());
        assert_eq!(seats, [Player::First, Player::Second]);
    }
    for node in &nodes {
        eventually(Duration::from_secs(5), "no seek left", || {
            node.pool.list().is_empty()
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_node_lists_a_seek_until_it_is_withdrawn() {
    let Some(schema) = TestSchema::new() else {
        return;
    };
    let a = Node::start(&schema, 10_000).await;
    let b = Node::start(&schema, 10_000).await;
    let (listed, mut updates) = b.pool.subscribe();
    assert!(listed.is_empty());
    let SeekOutcome::Waiting(ticket) = a.pool.seek(request("Lan")).await.unwrap() else {
        panic!("nobody else seeks");
    };
    let id = ticket.info().id.clone();
    // Listed at once on its own node, and announced on the other.
    assert_eq!(a.pool.list().len(), 1);
    let added = tokio::time::timeout(Duration::from_secs(5), updates.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(added, SeekUpdate::Added(ref info) if info.id == id && info.display_name == "Lan")
    );
    assert_eq!(b.pool.list().len(), 1);
    drop(ticket);
    let removed = tokio::time::timeout(Duration::from_secs(5), updates.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(removed, SeekUpdate::Removed { id, game_id: None });
    assert!(b.pool.list().is_empty());
    eventually(Duration::from_secs(5), "gone from its own node", || {
        a.pool.list().is_empty()
    })
    .await;
    // Withdrawn, so not paired: the next seeker waits.
    let SeekOutcome::Waiting(_minh) = b.pool.seek(request("Minh")).await.unwrap() else {
        panic!("the withdrawn seek was paired");
    };
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limit_counts_every_nodes_seeks() {
    let Some(schema) = TestSchema::new() else {
        return;
    };
    let a = Node::start(&schema, 2).await;
    let b = Node::start(&schema, 2).await;
    let timed = |name: &str| SeekRequest {
        time_control: TimeControl::RealTime {
            initial: Duration::from_secs(300),
            increment: Duration::ZERO,
        },
        ..request(name)
    };
    let _lan = a.pool.seek(request("Lan")).await.unwrap();
    let _minh = b.pool.seek(timed("Minh")).await.unwrap();
    let refused = a
        .pool
        .seek(SeekRequest {
            rated: false,
            time_control: TimeControl::Correspondence {
                per_move: Duration::from_secs(86_400),
            },
            ..request("Hoa")
        })
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("2 open seeks"), "{refused}");
    // A seek that pairs needs no room.
    let SeekOutcome::Paired(_) = b.pool.seek(request("Hoa")).await.unwrap() else {
        panic!("a compatible seek was open");
    };
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_computer_fallback_or_a_pairing_happens_once() {
    let Some(schema) = TestSchema::new() else {
        return;
    };
    let a = Node::start(&schema, 10_000).await;
    let b = Node::start(&schema, 10_000).await;
    // The second seeker comes around the moment the first one's wait for a human ends.
    for (round, lag) in [280u64, 300, 320, 340, 360].into_iter().enumerate() {
        let lan = tokio::spawn(seek_and_wait(
            Arc::clone(&a.pool),
            SeekRequest {
                computer: Some((Duration::from_millis(300), Level::from_number(1).unwrap())),
                ..request(&format!("Lan {round}"))
            },
        ));
        tokio::time::sleep(Duration::from_millis(lag)).await;
        let minh = match b
            .pool
            .seek(request(&format!("Minh {round}")))
            .await
            .unwrap()
        {
            SeekOutcome::Paired(seated) => Some(seated),
            SeekOutcome::Waiting(ticket) => {
                drop(ticket);
                None
            }
        };
        let lan = lan.await.unwrap();
        let against_computer = lan.game.seats[Player::Second]
            .as_ref()
            .is_some_and(|seat| matches!(seat.kind, PlayerKind::Computer { .. }));
        match minh {
            Some(minh) => {
                assert_eq!(minh.game.id, lan.game.id, "round {round}");
                assert!(!against_computer, "round {round}");
            }
            None => assert!(against_computer, "round {round}: Lan waits for nobody"),
        }
        // A dropped ticket withdraws its seek in the background: the next round's Lan must not
        // find this round's Minh still open.
        eventually(Duration::from_secs(5), "this round's seeks gone", || {
            a.pool.list().is_empty() && b.pool.list().is_empty()
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_nodes_seeks_go_within_seconds_and_are_never_paired() {
    let Some(schema) = TestSchema::new() else {
        return;
    };
    let a = Node::start(&schema, 10_000).await;
    let b = Node::start(&schema, 10_000).await;
    let SeekOutcome::Waiting(ticket) = a.pool.seek(request("Lan")).await.unwrap() else {
        panic!("nobody else seeks");
    };
    eventually(Duration::from_secs(5), "listed on the other node", || {
        b.pool.list().len() == 1
    })
    .await;
    // Node A dies: no more heartbeats, and nothing withdrawn.
    a.board.abort();
    drop(ticket);
    let died = tokio::time::Instant::now();
    eventually(
        Duration::from_secs(10),
        "a dead node's seek unlisted",
        || b.pool.list().is_empty(),
    )
    .await;
    assert!(
        died.elapsed() < Duration::from_secs(8),
        "{:?}",
        died.elapsed()
    );
    let SeekOutcome::Waiting(_minh) = b.pool.seek(request("Minh")).await.unwrap() else {
        panic!("paired with a dead node's seek");
    };
    let _ = b.stop.send(true);
}

/// The nodes' heartbeats say when the last node was last alive, for a restart after every
/// node stopped: unknown on a new schema, the last beat of a node that died, the stop of one
/// that stopped cleanly (which no longer counts as alive for its seeks).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nodes_heartbeats_say_when_the_last_node_was_alive() {
    let Some(schema) = TestSchema::new() else {
        return;
    };
    assert_eq!(schema.store().await.last_alive(), None, "a new schema");
    // A node that dies: its last beat.
    let a = Node::start(&schema, 100).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    a.board.abort();
    let died = std::time::SystemTime::now();
    let found = schema.store().await.last_alive().expect("a beat");
    assert!(
        found <= died + Duration::from_millis(500) && found + Duration::from_millis(1_500) >= died,
        "{found:?} against {died:?}"
    );
    // A node that stops: when it stopped.
    let b = Node::start(&schema, 100).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    b.stop.send_replace(true);
    b.board.await.unwrap();
    let stopped = std::time::SystemTime::now();
    let found = schema.store().await.last_alive().expect("a stop");
    assert!(
        found <= stopped + Duration::from_millis(500)
            && found + Duration::from_millis(500) >= stopped,
        "{found:?} against {stopped:?}"
    );
    drop((a.store, b.store));
}

/// Two nodes, and Lan's seek waiting on the first: the nodes, the seek's ticket and its id.
async fn two_nodes_and_a_waiting_seek(
    schema: &TestSchema,
) -> ([Node; 2], oanquan_game::seek::SeekTicket, String) {
    let nodes = [
        Node::start(schema, 10_000).await,
        Node::start(schema, 10_000).await,
    ];
    let SeekOutcome::Waiting(ticket) = nodes[0].pool.seek(request("Lan")).await.unwrap() else {
        panic!("nobody to pair with yet");
    };
    let id = ticket.info().id.clone();
    (nodes, ticket, id)
}

/// A seeker whose ticket is dropped after another node paired it, before it took the game
/// (its stream closed just then): nobody will hold its seat, so the game is aborted at once
/// instead of leaving the accepter to wait out the first-move limit (an outside probe's race
/// did, 3 times in 15).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seek_paired_on_another_node_and_then_dropped_aborts_its_game() {
    let Some(schema) = TestSchema::new() else {
        return;
    };
    let ([_a, b], ticket, id) = two_nodes_and_a_waiting_seek(&schema).await;
    let minh = b.pool.accept(&id, "Minh", None, None).await.unwrap();
    drop(ticket);
    let game = minh.game.id.clone();
    let mut status = None;
    for _ in 0..100 {
        status = Some(b.store.load(&game).await.unwrap().info().status);
        if status == Some(oanquan_game::GameStatus::Aborted) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, Some(oanquan_game::GameStatus::Aborted));
}

/// The other order: the seeker forgets its seek while another node, which took it, makes the
/// game. Posting the pairing then finds no seek, which tells that node to abort the game.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pairing_posted_for_a_forgotten_seek_says_so() {
    use oanquan_game::seek::{Claim, SeekBoard as _};
    let Some(schema) = TestSchema::new() else {
        return;
    };
    let ([a, b], ticket, id) = two_nodes_and_a_waiting_seek(&schema).await;
    let fits = |_: &oanquan_game::seek::SeekInfo| true;
    assert!(matches!(
        b.seeks.claim(&id, &fits).await.unwrap(),
        Claim::Took(_)
    ));
    // Taken, not paired: forgetting it names no game.
    assert_eq!(a.seeks.forget(&id).await.unwrap(), None);
    let game = GameId::generate();
    assert!(!b.seeks.paired(&id, &game, Player::First).await.unwrap());
    drop(ticket);
}
