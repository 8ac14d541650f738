//! A `redis-server` of the test binary's own on a free loopback port, so a
//! test can stop, pause and restart it. `REDIS_URL` points the tests at an
//! existing server instead (then stop/pause/restart tests are skipped).
//!
//! Each server works in a temporary directory of its own (`--dir`), kept
//! across restarts and removed when it is dropped: whatever it writes (a
//! replica's snapshot, a cluster's configuration, its log) never lands in
//! the directory the tests run in.
//!
//! A server never outlives its test binary: beside each one runs a
//! watchdog (`sh`) reading a pipe whose only writer is the test process.
//! When the process ends, however it ends (its last test done, a panic in
//! a `static`'s server, a kill), the kernel closes the pipe and the
//! watchdog kills the server and removes its directory. A server dropped
//! or stopped first tells its watchdog so, which then exits.
//!
//! Ports are taken below Linux's ephemeral range (32768-60999), where no
//! outgoing connection can take them between a stop and a restart, and at
//! most 22767, so that a cluster node's bus port (its port + 10000) is
//! valid, also below that range, and checked free too.

use std::collections::HashSet;
use std::fs::File;
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The ports servers are started on: a node's port and its bus port (+
/// 10000) both below the ephemeral range.
const PORTS: std::ops::RangeInclusive<u16> = 10000..=22767;

/// Ports this process's servers hold, so two of its servers never pick the
/// same one (a stopped server keeps its port for its restart).
static TAKEN: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// A running `redis-server` and its watchdog.
struct Process {
    child: Child,
    /// The watchdog's stdin: a line on it says the server was stopped
    /// here; the pipe closing without one says the test process ended.
    watchdog_pipe: Option<ChildStdin>,
    watchdog: Child,
}

pub struct Server {
    process: Option<Process>,
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
                process: None,
                port: 0,
                url,
                args: Vec::new(),
                dir: None,
            };
        }
        Server::with_args(Vec::new())
    }

    /// A fresh server of the test's own (never `REDIS_URL`'s), started with
    /// `args` added to the command line, on a port whose bus port is free
    /// too (so `args` may make it a cluster node). A port someone else
    /// took between the check and the start is replaced by another.
    pub fn with_args(args: Vec<String>) -> Server {
        let mut tries = 0;
        loop {
            let port = take_port();
            let mut server = Server {
                process: None,
                port,
                url: format!("redis://127.0.0.1:{port}/"),
                args: args.clone(),
                dir: Some(temp_dir(port)),
            };
            match server.try_spawn() {
                Ok(()) => return server,
                Err(why) if why.contains("Address already in use") && tries < 5 => tries += 1,
                Err(why) => panic!("{why}"),
            }
        }
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
        self.process.is_some()
    }

    /// Whether this server belongs to the test (so it may be stopped).
    pub fn owned(&self) -> bool {
        self.port != 0
    }

    /// Starts the process, or panics with why it did not start.
    fn spawn(&mut self) {
        if let Err(why) = self.try_spawn() {
            panic!("{why}");
        }
    }

    /// Starts the process and its watchdog and waits for it to answer;
    /// if it exits or stays silent, says so with its log.
    fn try_spawn(&mut self) -> Result<(), String> {
        let dir = self.dir.clone().expect("an owned server");
        let log_path = dir.join("redis.log");
        let log = File::options()
            .create(true)
            .append(true)
            .open(&log_path)
            .expect("the server's log file");
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the server's log file"))
            .stderr(log)
            .spawn()
            .expect("redis-server on PATH (Debian package redis-server)");
        let mut watchdog = Command::new("sh")
            .arg("-c")
            .arg(r#"read -r _ || { kill -9 "$1"; rm -rf "$2"; }"#)
            .arg("redis-server-watchdog")
            .arg(child.id().to_string())
            .arg(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sh on PATH");
        self.process = Some(Process {
            child,
            watchdog_pipe: watchdog.stdin.take(),
            watchdog,
        });
        let ready = self.wait_ready();
        if let Err(why) = &ready {
            self.stop();
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return Err(format!(
                "redis-server on {} {why}; the end of its log ({}):\n{}",
                self.url,
                log_path.display(),
                tail.join("\n")
            ));
        }
        ready
    }

    /// Polls PING until the server answers, for at most 10 s; an error
    /// says whether it exited or stayed silent.
    fn wait_ready(&mut self) -> Result<(), String> {
        let client = redis::Client::open(self.url.as_str()).expect("url");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let child = &mut self.process.as_mut().expect("just started").child;
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("exited ({status}) before answering"));
            }
            let answers = client
                .get_connection()
                .is_ok_and(|mut c| redis::cmd("PING").query::<String>(&mut c).is_ok());
            if answers {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err("did not answer PING within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Kills the server (its data is gone: it keeps nothing on disk).
    pub fn stop(&mut self) {
        if let Some(mut process) = self.process.take() {
            let _ = process.child.kill();
            let _ = process.child.wait();
            // Reaped here: the watchdog must not kill that pid any more.
            if let Some(mut pipe) = process.watchdog_pipe.take() {
                let _ = pipe.write_all(b"stopped\n");
            }
            let _ = process.watchdog.wait();
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
        let pid = self.process.as_ref().expect("an owned server").child.id();
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

/// A port for a new server, from [`PORTS`]: free now on loopback, its bus
/// port too, and held by no other server of this process.
fn take_port() -> u16 {
    use std::hash::{BuildHasher, RandomState};
    let mut taken = TAKEN.lock().unwrap_or_else(|e| e.into_inner());
    let taken = taken.get_or_insert_with(HashSet::new);
    let span = u64::from(PORTS.end() - PORTS.start()) + 1;
    for attempt in 0u64..10_000 {
        let pick = RandomState::new().hash_one((Instant::now(), attempt)) % span;
        let port = PORTS.start() + u16::try_from(pick).expect("within the range");
        let free = |p: u16| TcpListener::bind(("127.0.0.1", p)).is_ok();
        if !taken.contains(&port) && free(port) && free(port + 10000) {
            taken.insert(port);
            return port;
        }
    }
    panic!("no free loopback port with a free bus port in {PORTS:?}");
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
        if let Some(process) = &self.process {
            let _ = Command::new("kill")
                .args(["-CONT", &process.child.id().to_string()])
                .status();
        }
        self.stop();
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
        if self.owned() {
            let mut taken = TAKEN.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(taken) = taken.as_mut() {
                taken.remove(&self.port);
            }
        }
    }
}
