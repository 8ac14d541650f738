//! A `redis-server` of the test binary's own on a free loopback port, so a
//! test can stop, pause and restart it. `REDIS_URL` points the tests at an
//! existing server instead (then stop/pause/restart tests are skipped).

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Server {
    child: Option<Child>,
    port: u16,
    pub url: String,
}

impl Server {
    /// A fresh server, or the one `REDIS_URL` names.
    pub fn start() -> Server {
        if let Ok(url) = std::env::var("REDIS_URL") {
            return Server {
                child: None,
                port: 0,
                url,
            };
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let mut server = Server {
            child: None,
            port,
            url: format!("redis://127.0.0.1:{port}/"),
        };
        server.spawn();
        server
    }

    /// Whether this server belongs to the test (so it may be stopped).
    pub fn owned(&self) -> bool {
        self.port != 0
    }

    fn spawn(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server on PATH (Debian package redis-server)");
        self.child = Some(child);
        self.wait_ready();
    }

    /// Polls PING until the server answers, with a deadline.
    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let client = redis::Client::open(self.url.as_str()).expect("url");
        loop {
            if let Ok(mut c) = client.get_connection()
                && redis::cmd("PING").query::<String>(&mut c).is_ok()
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not start on {}",
                self.url
            );
            std::thread::sleep(Duration::from_millis(10));
        }
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

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .status();
        }
        self.stop();
    }
}
