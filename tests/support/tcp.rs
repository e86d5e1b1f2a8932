//! A TCP forwarder on 127.0.0.1 that a test can stall or cut, for protocols the HTTP proxy
//! (`proxy.rs`) does not speak: AMQP. Stalled, it stops moving bytes both ways but keeps the
//! sockets open (a broker that hangs); cut, it closes every connection at once (a broker
//! that restarts). Bounded: each connection's copy loop ends with its sockets or when the
//! forwarder is dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const PASS: u8 = 0;
const STALL: u8 = 1;
const CUT: u8 = 2;
const STOPPED: u8 = 3;

pub struct Forwarder {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    mode: Arc<AtomicU8>,
    _runtime: std::thread::JoinHandle<()>,
}

impl Forwarder {
    /// Forwards every connection to `upstream` (`host:port`).
    pub fn start(upstream: &str) -> Forwarder {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        std_listener.set_nonblocking(true).expect("nonblocking");
        let addr = std_listener.local_addr().expect("addr").to_string();
        let mode = Arc::new(AtomicU8::new(PASS));
        let upstream = upstream.to_owned();
        let m = Arc::clone(&mode);
        let runtime = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener = TcpListener::from_std(std_listener).expect("listener");
                while m.load(Ordering::SeqCst) != STOPPED {
                    let Ok(Ok((client, _))) =
                        tokio::time::timeout(Duration::from_millis(100), listener.accept()).await
                    else {
                        continue;
                    };
                    let Ok(server) = TcpStream::connect(&upstream).await else {
                        continue;
                    };
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    tokio::spawn(pipe(cr, sw, Arc::clone(&m)));
                    tokio::spawn(pipe(sr, cw, Arc::clone(&m)));
                }
            });
        });
        Forwarder {
            addr,
            mode,
            _runtime: runtime,
        }
    }

    /// Stops moving bytes; the connections stay open.
    pub fn stall(&self) {
        self.mode.store(STALL, Ordering::SeqCst);
    }

    /// Closes every connection (new ones are refused from then on).
    pub fn cut(&self) {
        self.mode.store(CUT, Ordering::SeqCst);
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.mode.store(STOPPED, Ordering::SeqCst);
    }
}

async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mode: Arc<AtomicU8>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match mode.load(Ordering::SeqCst) {
            PASS => {}
            STALL => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            _ => return,
        }
        let n = match tokio::time::timeout(Duration::from_millis(50), from.read(&mut buf)).await {
            Err(_) => continue,
            Ok(Ok(0) | Err(_)) => return,
            Ok(Ok(n)) => n,
        };
        // Bytes read just as the mode changed are held, like a hung broker would.
        while mode.load(Ordering::SeqCst) == STALL {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if mode.load(Ordering::SeqCst) != PASS || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
