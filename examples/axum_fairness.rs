//! An axum server with fair admission in one `.layer(..)`: a request that
//! finds its priority level full is answered `429 Too Many Requests` with
//! `Retry-After`, and a request holds its seat until its response body has
//! been sent.
//!
//! `cargo run -p keyed-backoff-examples --features axum --example axum_fairness`
//!
//! The server has one seat. The example sends a request that holds it (its
//! handler waits), then a second one, which is refused with a 429, then
//! lets the first finish and sends a third, which is served. Requests are
//! plain HTTP/1.1 over a TCP socket, as `curl` would send them.

use std::error::Error;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::routing::get;
use fair_admission::{Apf, Class, FairnessLayer, LevelSpec, LimitResponse};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// The user a request is from: its `x-user` header, or "anonymous".
fn user(req: &Request) -> String {
    req.headers()
        .get("x-user")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("anonymous")
        .to_owned()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let apf = Apf::builder(1)
        .level("api", LevelSpec::limited(1, LimitResponse::Reject))
        .build()?;
    let level = apf.level_id("api").expect("the level just built");
    let started = Arc::new(Notify::new());
    let finish = Arc::new(Notify::new());
    let handler = {
        let (started, finish) = (Arc::clone(&started), Arc::clone(&finish));
        move || async move {
            started.notify_one();
            finish.notified().await;
            "done\n"
        }
    };
    // The one line: the router keeps its `Infallible` error type.
    let app = Router::new()
        .route("/work", get(handler))
        .layer(FairnessLayer::new(apf, move |req: &Request| Class::new(level, user(req))).http());

    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });

    let first = tokio::spawn(request(addr, "alice"));
    started.notified().await;
    let second = request(addr, "bob").await?;
    println!("bob, while alice holds the only seat: {}", second.status);
    println!(
        "  retry-after: {}",
        second.retry_after.as_deref().unwrap_or("(none)")
    );
    finish.notify_one();
    let first = first.await??;
    println!("alice: {}", first.status);
    let third = tokio::spawn(request(addr, "carol"));
    started.notified().await;
    finish.notify_one();
    println!(
        "carol, after alice's body was sent: {}",
        third.await??.status
    );
    assert!(second.status.contains("429") && second.retry_after.is_some());
    assert!(first.status.contains("200"));
    Ok(())
}

/// The status line and `Retry-After` of one response.
struct Answer {
    status: String,
    retry_after: Option<String>,
}

/// One `GET /work` as `user`, on its own connection.
async fn request(addr: SocketAddr, user: &str) -> Result<Answer, std::io::Error> {
    let mut stream = TcpStream::connect(addr).await?;
    let head = format!(
        "GET /work HTTP/1.1\r\nhost: {addr}\r\nx-user: {user}\r\nconnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let mut lines = response.lines();
    let status = lines.next().unwrap_or_default().to_owned();
    let retry_after = lines
        .take_while(|l| !l.is_empty())
        .find_map(|l| l.strip_prefix("retry-after: ").map(str::to_owned));
    Ok(Answer {
        status,
        retry_after,
    })
}
