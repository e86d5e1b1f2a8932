//! A TCP proxy on 127.0.0.1 that can stall: while stalled it accepts connections and holds
//! every byte in both directions (a hung server or a network partition, not a refused
//! connection); resumed, it forwards again, held bytes included. Bounded: it stops when the
//! test drops it, and after 10 minutes at most.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub struct Stall {
    /// `127.0.0.1:port`.
    pub addr: String,
    stalled: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Stall {
    /// Starts a proxy in front of `upstream` (`host:port`), stalled from the start or not.
    pub fn start(upstream: &str, stalled: bool) -> Stall {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr").to_string();
        let stalled = Arc::new(AtomicBool::new(stalled));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st, up) = (Arc::clone(&stalled), Arc::clone(&stop), upstream.to_owned());
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(serve(listener, up, s, st));
        });
        Stall {
            addr,
            stalled,
            stop,
            thread: Some(thread),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn stall(&self) {
        self.stalled.store(true, Ordering::SeqCst);
    }

    pub fn resume(&self) {
        self.stalled.store(false, Ordering::SeqCst);
    }
}

impl Drop for Stall {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn serve(
    listener: std::net::TcpListener,
    upstream: String,
    stalled: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
) {
    let listener = TcpListener::from_std(listener).expect("tokio listener");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    while !stop.load(Ordering::SeqCst) && tokio::time::Instant::now() < deadline {
        let Ok(Ok((client, _))) =
            tokio::time::timeout(Duration::from_millis(50), listener.accept()).await
        else {
            continue;
        };
        let (upstream, stalled, stop) = (upstream.clone(), Arc::clone(&stalled), Arc::clone(&stop));
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(&upstream).await else {
                return;
            };
            let (cr, cw) = client.into_split();
            let (sr, sw) = server.into_split();
            let a = pump(cr, sw, Arc::clone(&stalled), Arc::clone(&stop));
            let b = pump(sr, cw, stalled, stop);
            tokio::join!(a, b);
        });
    }
}

/// Copies `from` to `to`, reading nothing while stalled (the bytes wait in the kernel).
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    stalled: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    while !stop.load(Ordering::SeqCst) && tokio::time::Instant::now() < deadline {
        if stalled.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        match tokio::time::timeout(Duration::from_millis(50), from.read(&mut buf)).await {
            Err(_) => {}
            Ok(Ok(0)) | Ok(Err(_)) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(Ok(n)) => {
                if to.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}
