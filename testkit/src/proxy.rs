//! A TCP proxy on loopback that holds the bytes going each way for a given
//! time before passing them on: a client talking to a server through it
//! sees every round trip at least twice that time longer, as between two
//! zones, while the server still runs on the test's own machine.
//!
//! It listens on a free `127.0.0.1` port and forwards each connection to
//! one target, which must be on loopback (a test never sends its traffic
//! anywhere else). Bytes keep their order, and the delay does not limit
//! the throughput: what was read is queued with the time it may go, so a
//! burst goes out as it came in, one delay later. The end of a stream (a
//! half-close) is passed on the same way. Its own thread runs a tokio
//! runtime of its own, so it serves tests with or without one.
//!
//! The delays are kept by a thread of their own rather than tokio's timer,
//! which rounds every wait up to whole milliseconds (a 1 ms delay would
//! hold the bytes about 2 ms): a wait ends within tens of microseconds of
//! its time on an idle machine.
//!
//! The [`Proxy`] is a guard: dropped, it stops listening and closes every
//! connection it holds.
//!
//! ```no_run
//! use keyed_backoff_testkit::proxy::Proxy;
//! use std::time::Duration;
//! let target = "127.0.0.1:6379".parse().unwrap();
//! let proxy = Proxy::start(target, Duration::from_millis(1));
//! let url = format!("redis://127.0.0.1:{}/", proxy.port());
//! # let _ = url;
//! ```

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener as StdListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self as std_mpsc, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

/// The most bytes read at once from one side.
const CHUNK: usize = 64 * 1024;

/// A running proxy; stopped when dropped.
pub struct Proxy {
    addr: SocketAddr,
    delay: Duration,
    connections: Arc<AtomicUsize>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Proxy {
    /// A proxy on a free loopback port to `target`, holding each
    /// direction's bytes `delay` (at least). Panics if `target` is not a
    /// loopback address.
    pub fn start(target: SocketAddr, delay: Duration) -> Proxy {
        assert!(
            target.ip().is_loopback(),
            "a proxy forwards to loopback only, not to {target}"
        );
        let listener = StdListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("a free loopback port");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let addr = listener.local_addr().expect("the listener's address");
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&connections);
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("proxy-{}", addr.port()))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("the proxy's runtime");
                let (timer, ticking) = Timer::start();
                runtime.block_on(async move {
                    let listener = TcpListener::from_std(listener).expect("the listener");
                    tokio::select! {
                        _ = stopped => {}
                        () = serve(listener, target, delay, counted, timer) => {}
                    }
                });
                // The runtime dropped drops every connection's task, and
                // with them their sockets and their hold on the timer.
                drop(runtime);
                let _ = ticking.join();
            })
            .expect("the proxy's thread");
        Proxy {
            addr,
            delay,
            connections,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// The address it listens on (`127.0.0.1`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// How long each direction's bytes are held.
    pub fn delay(&self) -> Duration {
        self.delay
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::Relaxed)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Ends waits at their time, to tens of microseconds: a thread that
/// sleeps until the earliest wait asked of it ends, and wakes its task.
#[derive(Clone)]
struct Timer(std_mpsc::Sender<(Instant, oneshot::Sender<()>)>);

impl Timer {
    /// The timer and its thread, which ends once every clone is dropped.
    fn start() -> (Timer, JoinHandle<()>) {
        let (asks, asked) = std_mpsc::channel::<(Instant, oneshot::Sender<()>)>();
        let thread = std::thread::Builder::new()
            .name("proxy-timer".into())
            .spawn(move || {
                // By time, then in the order asked.
                let mut waits: BTreeMap<(Instant, u64), oneshot::Sender<()>> = BTreeMap::new();
                let mut asked_so_far = 0u64;
                loop {
                    let now = Instant::now();
                    while let Some(entry) = waits.first_entry() {
                        if entry.key().0 > now {
                            break;
                        }
                        // A task that gave up waiting dropped its receiver.
                        let _ = entry.remove().send(());
                    }
                    let next = match waits.first_key_value() {
                        Some((&(due, _), _)) => asked.recv_timeout(due - now),
                        None => asked.recv().map_err(|_| RecvTimeoutError::Disconnected),
                    };
                    match next {
                        Ok((due, wake)) => {
                            waits.insert((due, asked_so_far), wake);
                            asked_so_far += 1;
                        }
                        Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
            })
            .expect("the proxy's timer thread");
        (Timer(asks), thread)
    }

    /// Waits until `due`.
    async fn until(&self, due: Instant) {
        if due <= Instant::now() {
            return;
        }
        let (wake, woken) = oneshot::channel();
        if self.0.send((due, wake)).is_ok() {
            let _ = woken.await;
        }
    }
}

/// Accepts connections until the proxy stops, each forwarded to `target`.
async fn serve(
    listener: TcpListener,
    target: SocketAddr,
    delay: Duration,
    n: Arc<AtomicUsize>,
    timer: Timer,
) {
    loop {
        let inbound = match listener.accept().await {
            Ok((inbound, _)) => inbound,
            // Out of descriptors, or a connection reset before it was
            // taken: try again shortly.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        n.fetch_add(1, Ordering::Relaxed);
        let timer = timer.clone();
        tokio::spawn(async move {
            // A target that refuses: the client's connection is closed.
            let Ok(outbound) = TcpStream::connect(target).await else {
                return;
            };
            let _ = inbound.set_nodelay(true);
            let _ = outbound.set_nodelay(true);
            let (from_client, to_client) = inbound.into_split();
            let (from_server, to_server) = outbound.into_split();
            tokio::spawn(pipe(from_client, to_server, delay, timer.clone()));
            tokio::spawn(pipe(from_server, to_client, delay, timer));
        });
    }
}

/// Copies `from` to `to`, each chunk sent `delay` after it was read, in
/// order; the end of `from` ends `to` (a half-close) after the same delay.
/// When `to` cannot be written any more, reading stops too.
async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, delay: Duration, timer: Timer) {
    // An empty chunk marks the end of the stream.
    let (queue, mut queued) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let writer = async move {
        while let Some((due, bytes)) = queued.recv().await {
            timer.until(due).await;
            if bytes.is_empty() {
                let _ = to.shutdown().await;
                return;
            }
            if to.write_all(&bytes).await.is_err() {
                return;
            }
        }
    };
    let reader = async move {
        let mut buf = vec![0; CHUNK];
        loop {
            let n = from.read(&mut buf).await.unwrap_or(0);
            let due = Instant::now() + delay;
            if queue.send((due, buf[..n].to_vec())).is_err() || n == 0 {
                return;
            }
        }
    };
    tokio::pin!(writer);
    tokio::select! {
        () = &mut writer => {}
        () = reader => writer.await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{ErrorKind, Read, Write};
    use std::net::{TcpListener, TcpStream};

    /// A server on loopback that echoes every byte of each connection.
    fn echo() -> SocketAddr {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                std::thread::spawn(move || {
                    let mut back = stream.try_clone().unwrap();
                    let _ = std::io::copy(&mut stream, &mut back);
                });
            }
        });
        addr
    }

    fn client(proxy: &Proxy) -> TcpStream {
        let stream = TcpStream::connect(proxy.addr()).unwrap();
        stream.set_nodelay(true).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream
    }

    #[test]
    fn a_round_trip_takes_twice_the_delay_and_bytes_keep_their_order() {
        let delay = Duration::from_millis(25);
        let proxy = Proxy::start(echo(), delay);
        let mut stream = client(&proxy);
        // One round trip: at least the delay each way.
        let mut rtts = Vec::new();
        for _ in 0..5 {
            let sent = Instant::now();
            stream.write_all(b"ping").unwrap();
            let mut back = [0; 4];
            stream.read_exact(&mut back).unwrap();
            rtts.push(sent.elapsed());
            assert_eq!(&back, b"ping");
        }
        let least = *rtts.iter().min().unwrap();
        assert!(least >= 2 * delay, "a round trip of {least:?}");
        assert!(least < 2 * delay + Duration::from_secs(1), "{rtts:?}");
        // 200 writes back to back: all back in order, the whole within a
        // few delays (queued, not one delay per write).
        let writes: Vec<Vec<u8>> = (0..200u32)
            .map(|i| format!("{i:05}-").repeat(1 + i as usize % 50).into_bytes())
            .collect();
        let sent: Vec<u8> = writes.concat();
        let mut writer = stream.try_clone().unwrap();
        let started = Instant::now();
        let writing = std::thread::spawn(move || {
            for w in &writes {
                writer.write_all(w).unwrap();
            }
        });
        let mut got = vec![0; sent.len()];
        stream.read_exact(&mut got).unwrap();
        let took = started.elapsed();
        writing.join().unwrap();
        assert!(got == sent, "the bytes came back out of order");
        assert!(took < 20 * delay, "200 writes took {took:?}");
        assert_eq!(proxy.connections(), 1);
    }

    #[test]
    fn the_end_of_a_stream_is_passed_on() {
        let proxy = Proxy::start(echo(), Duration::from_millis(1));
        let mut stream = client(&proxy);
        stream.write_all(b"last words").unwrap();
        stream.shutdown(std::net::Shutdown::Write).unwrap();
        let mut got = Vec::new();
        stream.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"last words");
    }

    #[test]
    fn dropped_it_stops_listening_and_closes_its_connections() {
        let proxy = Proxy::start(echo(), Duration::from_millis(1));
        let addr = proxy.addr();
        let mut stream = client(&proxy);
        stream.write_all(b"x").unwrap();
        let mut one = [0; 1];
        stream.read_exact(&mut one).unwrap();
        drop(proxy);
        let refused = TcpStream::connect(addr).unwrap_err();
        assert_eq!(refused.kind(), ErrorKind::ConnectionRefused);
        // The open connection ends (closed or reset) rather than hangs.
        match stream.read(&mut one) {
            Ok(0) => {}
            Err(e) if !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            other => panic!("the connection outlived the proxy: {other:?}"),
        }
    }

    #[test]
    #[should_panic(expected = "loopback only")]
    fn a_target_off_loopback_is_refused() {
        let _ = Proxy::start("192.0.2.1:6379".parse().unwrap(), Duration::from_millis(1));
    }
}
