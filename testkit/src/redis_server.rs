//! A `redis-server` of the test binary's own on a free loopback port, so a
//! test can stop, pause and restart it. `REDIS_URL` points the tests at an
//! existing server instead (then stop/pause/restart tests are skipped).
//!
//! Each server works in a temporary directory of its own (`--dir`), kept
//! across restarts and removed when it is dropped: whatever it writes (a
//! replica's snapshot, a cluster's configuration) never lands in the
//! directory the tests run in.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Server {
    child: Option<Child>,
    port: u16,
    pub url: String,
    /// Extra `redis-server` arguments, kept for restarts.
    args: Vec<String>,
    /// Its working directory (`None` for `REDIS_URL`'s server).
    dir: Option<PathBuf>,
}

impl Server {
    /// A fresh server, or the one `REDIS_URL` names.
    pub fn start() -> Server {
        if let Ok(url) = std::env::var("REDIS_URL") {
            return Server {
                child: None,
                port: 0,
                url,
                args: Vec::new(),
                dir: None,
            };
        }
        Server::with_args(Vec::new())
    }

    /// A fresh server of the test's own (never `REDIS_URL`'s), started with
    /// `args` added to the command line.
    pub fn with_args(args: Vec<String>) -> Server {
        Server::with_port_and_args(free_port(), args)
    }

    /// A fresh server of the test's own on `port`, with `args` added.
    pub fn with_port_and_args(port: u16, args: Vec<String>) -> Server {
        let mut server = Server {
            child: None,
            port,
            url: format!("redis://127.0.0.1:{port}/"),
            args,
            dir: Some(temp_dir(port)),
        };
        server.spawn();
        server
    }

    /// A replica of `master` (which must be the test's own), in sync with
    /// it when this returns.
    pub fn replica_of(master: &Server) -> Server {
        assert!(master.owned(), "a replica of REDIS_URL's server");
        let replica = Server::with_args(vec![
            "--replicaof".into(),
            "127.0.0.1".into(),
            master.port.to_string(),
        ]);
        replica.wait_for("master_link_status:up");
        replica
    }

    /// The loopback port it listens on (0 for `REDIS_URL`'s server).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Runs one command on a fresh connection and returns its answer.
    pub fn command<T: redis::FromRedisValue>(&self, args: &[&str]) -> redis::RedisResult<T> {
        let client = redis::Client::open(self.url.as_str())?;
        let mut conn = client.get_connection_with_timeout(Duration::from_secs(5))?;
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        cmd.query(&mut conn)
    }

    /// Whether `args` (an `INFO` or `CLUSTER INFO` command) answers with
    /// `line` among its lines now.
    pub fn reports(&self, args: &[&str], line: &str) -> bool {
        self.command::<String>(args)
            .is_ok_and(|text| text.lines().any(|l| l.trim() == line))
    }

    /// Polls `INFO` until it holds `line`, with a deadline.
    pub fn wait_for(&self, line: &str) {
        poll_until(
            &format!("{} to report {line}", self.url),
            Duration::from_secs(30),
            || self.reports(&["INFO"], line),
        );
    }

    /// Makes a replica a master (`REPLICAOF NO ONE`), as a failover does.
    pub fn promote(&self) {
        let _: String = self
            .command(&["REPLICAOF", "NO", "ONE"])
            .expect("REPLICAOF NO ONE");
        self.wait_for("role:master");
    }

    /// The directory it works in (`None` for `REDIS_URL`'s server).
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Whether the test's own process runs (not stopped).
    pub fn running(&self) -> bool {
        self.child.is_some()
    }

    /// Whether this server belongs to the test (so it may be stopped).
    pub fn owned(&self) -> bool {
        self.port != 0
    }

    fn spawn(&mut self) {
        let dir = self.dir.as_ref().expect("an owned server");
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir)
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server on PATH (Debian package redis-server)");
        self.child = Some(child);
        self.wait_ready();
    }

    /// Polls PING until the server answers, with a deadline.
    fn wait_ready(&self) {
        let client = redis::Client::open(self.url.as_str()).expect("url");
        poll_until(
            &format!("redis-server to start on {}", self.url),
            Duration::from_secs(10),
            || {
                client
                    .get_connection()
                    .is_ok_and(|mut c| redis::cmd("PING").query::<String>(&mut c).is_ok())
            },
        );
    }

    /// Kills the server (its data is gone: it keeps nothing on disk).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port, empty.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// Freezes the process (SIGSTOP): connections stay open, nothing answers.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Thaws it (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, sig: &str) {
        let pid = self.child.as_ref().expect("an owned server").id();
        let ok = Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill {sig} {pid}");
    }
}

/// Calls `done` every 10 ms until it holds; panics, naming `what`, after
/// `limit`.
pub fn poll_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A fresh, empty directory for the server on `port`.
fn temp_dir(port: u16) -> PathBuf {
    use std::hash::{BuildHasher, RandomState};
    let unique = RandomState::new().hash_one(Instant::now()) as u32;
    let dir = std::env::temp_dir().join(format!(
        "keyed-backoff-redis-{}-{port}-{unique:x}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    dir
}

/// A port no one listens on now, on loopback.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .status();
        }
        self.stop();
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
