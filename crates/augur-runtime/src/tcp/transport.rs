//! The client side: a session's connection to its coordinator node.

use super::handshake::ClusterIdentity;
use super::tls::ClientTls;
use super::wire::{FrameReader, FrameWriter, framed, next_body, send_body};
use super::{Body, decode_frame, dial, encode_frame};
use augur_client::{Transport, TransportError};
use augur_types::{ClientId, ClientOp, ClientReply, ClientRequest, NodeId, RequestId};
use bytes::{Bytes, BytesMut};
use futures::future::BoxFuture;
use futures::{SinkExt, StreamExt};
use std::io;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How a client reaches a cluster: which cluster it means (its id and the fingerprint of its
/// configuration, checked by the node), with what token, over TLS or not.
#[derive(Clone)]
pub struct ClientConfig {
    pub cluster_id: String,
    pub fingerprint: String,
    /// The cluster's client token, if it requires one.
    pub token: Option<String>,
    /// TLS towards the nodes; `None` on a plaintext cluster.
    pub tls: Option<ClientTls>,
    /// How long connecting, and then each request, may take.
    pub request_timeout: Duration,
    /// Where every connection made with this configuration counts its clock
    /// ([`Transport::now`]) from: one origin, so that the times recorded in one history by
    /// sessions on different connections are comparable (real-time order).
    pub origin: Instant,
}

impl ClientConfig {
    /// A client of the plaintext cluster whose nodes run `identity`.
    pub fn plaintext(identity: &ClusterIdentity, request_timeout: Duration) -> ClientConfig {
        ClientConfig {
            cluster_id: identity.cluster_id.clone(),
            fingerprint: identity.fingerprint(),
            token: None,
            tls: None,
            request_timeout,
            origin: Instant::now(),
        }
    }
}

/// A client session's connection to its coordinator node.
///
/// One request is in flight at a time: concurrent [`Transport::call`]s on one transport are
/// serialised, and a call that times out leaves its late reply to be skipped by the next one.
/// Once the connection breaks, every call fails with [`TransportError::Disconnected`]; connect a
/// new transport to go on (as a new client: the node assigns each connection its id).
pub struct TcpTransport {
    client: ClientId,
    node: SocketAddr,
    out: tokio::sync::Mutex<FrameWriter>,
    input: tokio::sync::Mutex<FrameReader>,
    /// Why the connection is unusable, once it is.
    broken: Mutex<Option<String>>,
    next_request: AtomicU64,
    timeout: Duration,
    origin: Instant,
}

impl TcpTransport {
    /// Connect to node `node_id` listening at `node` and introduce the client; the node
    /// answers with the id this client has from then on ([`Transport::client_id`]). A node
    /// that refuses the client (another cluster, another configuration, a missing or wrong
    /// token) fails this with its reason, as an error of kind `PermissionDenied`.
    pub async fn connect(
        node: SocketAddr,
        node_id: NodeId,
        config: &ClientConfig,
    ) -> io::Result<TcpTransport> {
        let tls = config
            .tls
            .as_ref()
            .map(|tls| (&tls.connector, tls.server_name(node_id)));
        let conn = dial(node, tls, config.request_timeout).await?;
        let (mut input, mut out) = framed(conn);
        let hello = Body::<()>::ClientHello {
            cluster_id: config.cluster_id.clone(),
            fingerprint: config.fingerprint.clone(),
            token: config.token.clone(),
        };
        send_body(&mut out, &hello).await?;
        let client = match next_body::<(), _>(&mut input, config.request_timeout).await {
            Ok(Body::Welcome { client }) => client,
            Ok(Body::Refused(why)) => {
                return Err(io::Error::new(io::ErrorKind::PermissionDenied, why));
            }
            Ok(other) => {
                return Err(io::Error::other(format!(
                    "node {node_id} at {node} answered the hello with a {} frame",
                    other.kind()
                )));
            }
            Err(why) => {
                return Err(io::Error::other(format!(
                    "node {node_id} at {node}: no answer to the hello: {why}"
                )));
            }
        };
        Ok(TcpTransport {
            client,
            node,
            out: tokio::sync::Mutex::new(out),
            input: tokio::sync::Mutex::new(input),
            broken: Mutex::new(None),
            next_request: AtomicU64::new(0),
            timeout: config.request_timeout,
            origin: config.origin,
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
