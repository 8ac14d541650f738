//! The test kit's redis-server harness itself: a server that cannot start
//! says why, with its log, and every server gets a port that would also
//! serve a cluster node (its bus port, + 10000, valid and free).

use keyed_backoff_testkit::panic_message;
use keyed_backoff_testkit::redis_server::Server;

#[test]
fn a_server_that_cannot_start_reports_its_log() {
    if std::env::var("REDIS_URL").is_ok() {
        eprintln!("REDIS_URL is set: this harness test needs servers of its own; skipped");
        return;
    }
    let failed = std::panic::catch_unwind(|| {
        Server::with_args(vec!["--no-such-directive".into(), "1".into()])
    })
    .err()
    .expect("redis-server refuses an unknown directive");
    let message = panic_message(&*failed);
    assert!(message.contains("exited"), "{message}");
    // redis-server's own words, from its log.
    assert!(message.contains("no-such-directive"), "{message}");
}

#[test]
fn every_server_can_be_a_cluster_node() {
    if std::env::var("REDIS_URL").is_ok() {
        eprintln!("REDIS_URL is set: this harness test needs servers of its own; skipped");
        return;
    }
    let servers: Vec<Server> = (0..16)
        .map(|_| Server::with_args(vec!["--cluster-enabled".into(), "yes".into()]))
        .collect();
    for server in &servers {
        // redis-server refuses a cluster port above 55535.
        assert!(server.port() <= 55535, "{}", server.port());
        assert!(server.reports(&["INFO", "cluster"], "cluster_enabled:1"));
    }
}
