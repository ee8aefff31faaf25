//! The client side: a session's connection to its coordinator node.

use super::{Body, codec, decode_frame, encode_frame};
use augur_client::{Transport, TransportError};
use augur_types::RequestId;
use augur_types::{ClientId, ClientOp, ClientReply, ClientRequest};
use bytes::{Bytes, BytesMut};
use futures::future::BoxFuture;
use futures::{SinkExt, StreamExt};
use std::io;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio_util::codec::{FramedRead, FramedWrite, LengthDelimitedCodec};

/// A client session's connection to its coordinator node.
///
/// One request is in flight at a time: concurrent [`Transport::call`]s on one transport are
/// serialised, and a call that times out leaves its late reply to be skipped by the next one.
/// Once the connection breaks, every call fails with [`TransportError::Disconnected`]; connect a
/// new transport (the same client id may be reused) to go on.
pub struct TcpTransport {
    client: ClientId,
    node: SocketAddr,
    out: tokio::sync::Mutex<FramedWrite<OwnedWriteHalf, LengthDelimitedCodec>>,
    input: tokio::sync::Mutex<FramedRead<OwnedReadHalf, LengthDelimitedCodec>>,
    /// Why the connection is unusable, once it is.
    broken: Mutex<Option<String>>,
    next_request: AtomicU64,
    timeout: Duration,
    origin: Instant,
}

impl TcpTransport {
    /// Connect to the node listening at `node` as client `client`; each call then waits at most
    /// `request_timeout` for its reply (connecting too).
    pub async fn connect(
        node: SocketAddr,
        client: ClientId,
        request_timeout: Duration,
    ) -> io::Result<TcpTransport> {
        let stream = tokio::time::timeout(request_timeout, TcpStream::connect(node))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))??;
        stream.set_nodelay(true)?;
        let (input, output) = stream.into_split();
        Ok(TcpTransport {
            client,
            node,
            out: tokio::sync::Mutex::new(FramedWrite::new(output, codec())),
            input: tokio::sync::Mutex::new(FramedRead::new(input, codec())),
            broken: Mutex::new(None),
            next_request: AtomicU64::new(0),
            timeout: request_timeout,
            origin: Instant::now(),
        })
    }

    /// The address of the coordinator node.
    pub fn node_addr(&self) -> SocketAddr {
        self.node
    }

    /// Mark the connection unusable and say why.
    fn fail(&self, why: String) -> TransportError {
        *self.broken.lock().expect("transport lock") = Some(why.clone());
        TransportError::Disconnected(why)
    }

    async fn exchange(&self, id: RequestId, frame: Bytes) -> Result<ClientReply, TransportError> {
        self.out
            .lock()
            .await
            .send(frame)
            .await
            .map_err(|e| self.fail(format!("sending to {}: {e}", self.node)))?;
        let mut input = self.input.lock().await;
        loop {
            let frame: BytesMut = match input.next().await {
                None => return Err(self.fail(format!("{} closed the connection", self.node))),
                Some(Err(e)) => return Err(self.fail(format!("reading from {}: {e}", self.node))),
                Some(Ok(frame)) => frame,
            };
            match decode_frame::<()>(&frame) {
                Ok(Body::Response(response)) if response.id == id => return Ok(response.reply),
                // The late reply to a request that timed out.
                Ok(Body::Response(_)) => continue,
                Ok(other) => {
                    return Err(self.fail(format!("{} sent a {} frame", self.node, other.kind())));
                }
                Err(e) => return Err(self.fail(format!("from {}: {e}", self.node))),
            }
        }
    }
}

impl Transport for TcpTransport {
    fn client_id(&self) -> ClientId {
        self.client
    }

    fn call(&self, op: ClientOp) -> BoxFuture<'_, Result<ClientReply, TransportError>> {
        Box::pin(async move {
            if let Some(why) = self.broken.lock().expect("transport lock").clone() {
                return Err(TransportError::Disconnected(why));
            }
            let id = RequestId(self.next_request.fetch_add(1, Ordering::Relaxed));
            let request = ClientRequest {
                client: self.client,
                id,
                op,
            };
            let frame = encode_frame(&Body::<()>::Request(request))
                .map_err(|e| TransportError::Disconnected(format!("request not sent: {e}")))?;
            tokio::time::timeout(self.timeout, self.exchange(id, frame))
                .await
                .unwrap_or(Err(TransportError::Timeout(self.timeout)))
        })
    }

    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn sleep(&self, d: Duration) -> BoxFuture<'_, ()> {
        Box::pin(tokio::time::sleep(d))
    }
}
