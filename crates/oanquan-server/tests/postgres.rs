//! The real server binary on PostgreSQL: a game created and played, the server stopped and
//! started again, the game found as it was and played on.
//!
//! Needs a PostgreSQL server: `OANQUAN_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test
//! cargo test -p oanquan-server --test postgres`. Without the variable the test says so and
//! passes without doing anything; with it, a server that cannot be reached fails it.

mod common;

use common::nodes::{Node, Schema};
use common::*;
use oanquan_proto::v1 as pb;

#[tokio::test]
async fn a_game_played_on_postgres_is_there_after_a_restart() {
    let Some(schema) = Schema::new("postgres").await else {
        return;
    };
    let database = schema.database.clone();
    let dir = tempfile::tempdir().unwrap();

    // First run: the URL from the environment, as an operator would keep a password out of
    // the process list.
    let server = Node::spawn(dir.path(), |command| {
        command.env("OANQUAN_DATABASE_URL", &database);
    });
    let mut client = server.games().await;
    let (id, first, second) = started(&mut client, "standard").await;
    for _ in 0..3 {
        play_one(&mut client, &id, (&first, &second)).await;
    }
    let before = get_game(&mut client, &id).await;
    assert_eq!(before.move_count, 3);
    server.stop();

    // The rows are in PostgreSQL, and no SQLite file was made on the side.
    assert_eq!(schema.count("games").await, 1);
    assert_eq!(schema.count("moves").await, 3);
    assert!(schema.count("game_events").await >= 5);
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing written to the working directory"
    );

    // Second run: the same database through --database.
    let server = Node::spawn(dir.path(), |command| {
        command.args(["--database", &database]);
    });
    let mut client = server.games().await;
    // The same game, its turn resumed at the start (its start moved later by the outage).
    let after = get_game(&mut client, &id).await;
    assert!(
        after.turn_start_time.as_ref().map(|t| (t.seconds, t.nanos))
            >= before
                .turn_start_time
                .as_ref()
                .map(|t| (t.seconds, t.nanos))
    );
    assert_eq!(
        pb::Game {
            turn_start_time: before.turn_start_time,
            ..after
        },
        before
    );
    let listed = client
        .list_games(pb::ListGamesRequest {
            filter: pb::GameFilter::Active.into(),
            page_size: 0,
            page_token: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .games;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, id);
    // The tokens still work: the game goes on.
    let after = play_one(&mut client, &id, (&first, &second)).await;
    assert_eq!(after.move_count, 4);
    server.stop();
    assert_eq!(schema.count("moves").await, 4);
    schema.drop().await;
}
