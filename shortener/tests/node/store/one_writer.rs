//! The embedded store's one writer: a second node (or tool) on a data directory in use is
//! refused, and starts once the first has stopped.

use crate::helpers::{Backend, Node, Stack};

/// The embedded store has one writer: a second node on the same data directory is refused
/// with a clear error while the first runs (so it cannot write beside it, past what the first
/// knows of its file), and starts once the first has stopped, with the first one's links.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_node_on_the_same_data_directory_is_refused_while_the_first_runs() {
    let stack = Stack::new(Backend::Sqlite).await;
    let first = stack.node("one").await;
    let code = first.create_url("https://example.com/one-writer").await;
    let refused = match shortener::App::build(stack.config("one")).await {
        Ok(_) => panic!("a second node started on the same data directory"),
        Err(error) => format!("{error:#}"),
    };
    assert!(refused.contains("another process"), "{refused}");
    // The first node went on serving.
    let (status, _) = first.location(&code).await;
    assert_eq!(status, reqwest::StatusCode::FOUND);
    first.stop().await;
    let second = Node::start(stack.config("one")).await;
    let (status, location) = second.location(&code).await;
    assert_eq!(status, reqwest::StatusCode::FOUND);
    assert_eq!(location.as_deref(), Some("https://example.com/one-writer"));
}
