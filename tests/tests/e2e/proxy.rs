//! A TCP proxy on loopback that delays what it forwards: in front of PostgreSQL or a REST
//! server, it makes a slow network whose delay the test changes while the hosts run.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// A running proxy; stops accepting when dropped (connections already made run on until
/// either side closes).
pub(crate) struct DelayProxy {
    addr: SocketAddr,
    /// The most a chunk waits before it is forwarded, in ms; each chunk waits a pseudo-random
    /// part of it.
    max_delay_ms: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl DelayProxy {
    /// Forwards a new loopback port to `upstream`.
    pub(crate) fn start(upstream: SocketAddr) -> DelayProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let addr = listener.local_addr().expect("its address");
        let max_delay_ms = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (max_delay_ms, stop) = (Arc::clone(&max_delay_ms), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut seeds = Rng::new(0x5eed);
                for client in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(client) = client else { continue };
                    let Ok(server) = TcpStream::connect(upstream) else {
                        continue;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    for (from, to) in [(&client, &server), (&server, &client)] {
                        let (Ok(from), Ok(to)) = (from.try_clone(), to.try_clone()) else {
                            continue;
                        };
                        let max_delay_ms = Arc::clone(&max_delay_ms);
                        let rng = Rng::new(seeds.next());
                        std::thread::spawn(move || pump(from, to, &max_delay_ms, rng));
                    }
                }
            })
        };
        DelayProxy {
            addr,
            max_delay_ms,
            stop,
            thread: Some(thread),
        }
    }

    /// The proxy's address.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// From now on each chunk waits up to `max` before it is forwarded.
    pub(crate) fn set_max_delay(&self, max: Duration) {
        let ms = u64::try_from(max.as_millis()).unwrap_or(u64::MAX);
        self.max_delay_ms.store(ms, Ordering::SeqCst);
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Copies `from` to `to` chunk by chunk, each after its delay (in order: a chunk never passes
/// the one before it), until either side closes.
fn pump(mut from: TcpStream, mut to: TcpStream, max_delay_ms: &AtomicU64, mut rng: Rng) {
    let mut buffer = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let max = max_delay_ms.load(Ordering::SeqCst);
        if max > 0 {
            std::thread::sleep(Duration::from_millis(rng.below(max + 1)));
        }
        if to.write_all(&buffer[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
}

/// SplitMix64: plenty for delays and choices in a test, and the same run again from its seed.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `[0, n)` (`n > 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}
