//! `dlqctl exporter` as the tests run it on a workspace: listening on a free port of
//! 127.0.0.1 (read from the banner it prints), scraped by hand (reqwest), killed on drop. One
//! copy, so that every test reads the exporter the same way.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::block;
use super::workspace::Workspace;

pub struct Exporter {
    child: Child,
    /// `host:port` it listens on.
    pub addr: String,
}

impl Exporter {
    /// `dlqctl exporter channel.yaml --listen 127.0.0.1:0 EXTRA` in the workspace.
    pub fn start(ws: &Workspace, extra: &[&str]) -> Self {
        let mut args = vec!["exporter", "channel.yaml", "--listen", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let mut child = ws
            .command(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("exporter starts");
        let stderr = child.stderr.take().expect("stderr");
        // The banner, after any lint warnings the specs have (20 lines at most).
        let mut reader = std::io::BufReader::new(stderr);
        let mut line = String::new();
        for _ in 0..20 {
            line.clear();
            std::io::BufRead::read_line(&mut reader, &mut line).expect("banner");
            if line.contains("http://") || line.is_empty() {
                break;
            }
        }
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|s| s.split('/').next())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_owned();
        Exporter { child, addr }
    }

    /// One scrape of `/metrics`, which must answer 200.
    pub fn scrape(&self) -> String {
        block(async {
            let r = reqwest::get(format!("http://{}/metrics", self.addr))
                .await
                .expect("scrape");
            assert_eq!(r.status(), 200);
            r.text().await.expect("body")
        })
    }

    /// Scrapes until `done` holds (every 100 ms, `limit` at most); the last scrape.
    pub fn until(&self, limit: Duration, done: impl Fn(&str) -> bool) -> String {
        let waited = Instant::now();
        loop {
            let body = self.scrape();
            if done(&body) || waited.elapsed() > limit {
                return body;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The scrape once the first reading is served (`dlq_exporter_reads_total 1`, 60 s at
    /// most, which must come).
    pub fn first_reading(&self) -> String {
        let body = self.until(Duration::from_secs(60), |b| {
            b.contains("dlq_exporter_reads_total 1\n")
        });
        assert!(body.contains("dlq_exporter_reads_total 1\n"), "{body}");
        body
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
