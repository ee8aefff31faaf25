//! `GET /metrics`: a node's metrics ([`augur_runtime::telemetry`]) in the Prometheus text
//! format, on the address its cluster file entry names as `metrics`.
//!
//! The endpoint answers one request per connection and nothing else: a plain HTTP/1.1 responder
//! on a socket of its own is all Prometheus needs, so no web framework is pulled in for it.

use anyhow::Context;
use augur_runtime::telemetry::LATENCY_BUCKETS;
use augur_types::NodeId;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::debug;

/// The longest request head the endpoint reads.
const MAX_REQUEST: usize = 8 * 1024;
/// How long a scraper has to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Install the process's Prometheus recorder, every metric labelled with the node's id and
/// described ([`augur_runtime::telemetry::describe`]) for a node running `protocol`.
pub fn install(node: NodeId, protocol: &str) -> anyhow::Result<PrometheusHandle> {
    let handle = PrometheusBuilder::new()
        .add_global_label("node", node.to_string())
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)
        .context("metrics buckets")?
        .install_recorder()
        .context("cannot install the metrics recorder")?;
    augur_runtime::telemetry::describe(protocol);
    Ok(handle)
}

/// Bind the metrics address. A node whose metrics address is taken should not start
/// unobserved, so this fails loudly.
pub async fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot bind the metrics address {addr}"))
}

/// Serve `handle` on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, handle: PrometheusHandle) {
    let upkeep = handle.clone();
    tokio::spawn(async move {
        // Histograms are drained into their buckets by upkeep, when nothing scrapes for a while.
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            upkeep.run_upkeep();
        }
    });
    run(listener, handle).await;
}

async fn run(listener: TcpListener, handle: PrometheusHandle) {
    loop {
        let Ok((stream, remote)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let handle = handle.clone();
        tokio::spawn(async move {
            if let Err(e) = answer(stream, &handle).await {
                debug!(%remote, "metrics request: {e}");
            }
        });
    }
}

/// Read one request head and answer it.
async fn answer(mut stream: TcpStream, handle: &PrometheusHandle) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let read = async {
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        Ok::<_, std::io::Error>(())
    };
    tokio::time::timeout(REQUEST_TIMEOUT, read)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "request too slow"))??;
    let line = String::from_utf8_lossy(head.split(|b| *b == b'\r').next().unwrap_or_default());
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (status, content_type, body) = match (method, path) {
        ("GET", "/metrics") => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            handle.render(),
        ),
        ("GET", _) => ("404 Not Found", "text/plain", "try /metrics\n".to_string()),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            "only GET\n".to_string(),
        ),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}
