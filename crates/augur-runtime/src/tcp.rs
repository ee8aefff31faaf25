//! The TCP runtime: one node per process, talking to its peers and to its clients over TCP.
//!
//! # Wire format
//!
//! Every connection carries a stream of frames. A frame is a 4-byte big-endian length followed by
//! that many bytes ([`LengthDelimitedCodec`], at most [`MAX_FRAME_LEN`] bytes). The bytes are a
//! postcard-encoded [`Envelope`]: the wire version ([`WIRE_VERSION`], a varint `u16`) and then a
//! [`Body`]. The version is decoded first; a frame of any other version is refused before its body
//! is looked at, so later versions may change the body freely.
//!
//! A connection is a *peer connection* if its first frame is [`Body::Hello`] (then only
//! [`Body::Peer`] frames from that same node follow), or a *client connection* if its first frame
//! is a [`Body::Request`] (then only requests follow, and the node answers with
//! [`Body::Response`] frames on the same connection). A frame that is too long, fails to decode,
//! has another version, or does not fit the connection's kind gets the connection dropped with a
//! logged reason; the node keeps serving everybody else.
//!
//! # Nodes
//!
//! [`serve`] runs the same node loop as the in-process runtime ([`run_node`]) behind a listening
//! socket. Each node keeps one outgoing connection per peer, dialled lazily by a writer task when
//! the first message for that peer is sent, and redialled with exponential backoff after a
//! failure. Messages for a peer that cannot be reached are dropped (so are messages beyond a
//! bounded per-peer buffer): protocols already bound every wait with their own timeouts. Messages
//! between two nodes arrive in the order they were sent as long as the connection lasts.
//!
//! When [`TcpNodeConfig::emulate_latency`] is set, a message is held back by the placement's
//! one-way delay between the two nodes' data centres before it is written, exactly as the
//! in-process runtime does (delays under [`MIN_EMULATED_DELAY`] are not emulated). This lets a
//! cluster of processes on one machine or one LAN behave like a geo-distributed one; a cluster
//! that really spans data centres should turn it off and let the network supply the delay.
//!
//! # Clients
//!
//! [`TcpTransport`] is the client side: one connection to one coordinator node, one request in
//! flight at a time. A client chooses its own [`ClientId`]; ids must be unique within the
//! cluster. A client that reconnects with the same id gets the replies to its later requests on
//! the new connection.

use crate::clock::RealClock;
use crate::inbound::{CheckMessage, Inbound, check_request};
use crate::local::{Input, MIN_EMULATED_DELAY, PeerNet, ReplySender, run_node};
use crate::wal::{self, LogConfig};
use crate::{NodeEnv, Protocol};
use augur_client::{Transport, TransportError};
use augur_types::{ClientId, ClientOp, ClientReply, ClientRequest, ClientResponse, NodeId};
use augur_types::{Placement, RequestError, RequestId};
use bytes::{Bytes, BytesMut};
use futures::future::BoxFuture;
use futures::{SinkExt, StreamExt};
use rustc_hash::FxHashMap;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::codec::{FramedRead, FramedWrite, LengthDelimitedCodec};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// The version of the envelope this build speaks. Frames of any other version are refused.
pub const WIRE_VERSION: u16 = 5;

/// The largest frame (length prefix excluded) accepted or sent: 16 MiB.
pub const MAX_FRAME_LEN: usize = 16 * 1024 * 1024;

/// How many messages may wait for one peer's connection before further ones are dropped.
pub const PEER_BUFFER: usize = 16 * 1024;

/// How long dialling a peer may take before the attempt counts as failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// First and longest wait before redialling a peer that could not be reached.
const MIN_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// What every frame carries: the wire version, then the body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Envelope<M> {
    pub version: u16,
    pub body: Body<M>,
}

/// The body of a frame. `M` is the protocol's peer message type; client frames do not depend on
/// it. The order of the variants is part of the wire format (postcard encodes the index).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Body<M> {
    /// First frame of a peer connection: who is dialling.
    Hello { from: NodeId },
    /// A protocol message from node `from` (which must be the node that said Hello).
    Peer { from: NodeId, msg: M },
    /// A client request; the first one makes the connection a client connection.
    Request(ClientRequest),
    /// A node's answer to a request received on the same connection.
    Response(ClientResponse),
}

impl<M> Body<M> {
    /// A short name for log messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Body::Hello { .. } => "hello",
            Body::Peer { .. } => "peer",
            Body::Request(_) => "request",
            Body::Response(_) => "response",
        }
    }
}

/// Why a frame could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("wire version {found}, expected {expected}", expected = WIRE_VERSION)]
    Version { found: u16 },
    #[error("undecodable frame: {0}")]
    Decode(#[from] postcard::Error),
    #[error("{0} trailing bytes after the envelope")]
    Trailing(usize),
    #[error("frame of {0} bytes exceeds the limit of {limit} bytes", limit = MAX_FRAME_LEN)]
    TooLarge(usize),
}

/// The envelope as it is encoded, borrowing the body.
#[derive(Serialize)]
struct EnvelopeRef<'a, M> {
    version: u16,
    body: &'a Body<M>,
}

/// Encode `body` in an envelope of the current version (without the length prefix).
pub fn encode_frame<M: Serialize>(body: &Body<M>) -> Result<Bytes, FrameError> {
    let bytes = postcard::to_stdvec(&EnvelopeRef {
        version: WIRE_VERSION,
        body,
    })?;
    if bytes.len() > MAX_FRAME_LEN {
        return Err(FrameError::TooLarge(bytes.len()));
    }
    Ok(Bytes::from(bytes))
}

/// Decode one frame (without its length prefix): the version first, then the body, which must
/// use up the frame exactly.
pub fn decode_frame<M: DeserializeOwned>(frame: &[u8]) -> Result<Body<M>, FrameError> {
    let (version, rest) = postcard::take_from_bytes::<u16>(frame)?;
    if version != WIRE_VERSION {
        return Err(FrameError::Version { found: version });
    }
    let (body, rest) = postcard::take_from_bytes::<Body<M>>(rest)?;
    if !rest.is_empty() {
        return Err(FrameError::Trailing(rest.len()));
    }
    Ok(body)
}

/// The length-delimited framing used on every connection.
pub fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .length_field_length(4)
        .max_frame_length(MAX_FRAME_LEN)
        .new_codec()
}

/// Flush a frame sink (the item type has to be named for the sink to be found).
async fn flush(out: &mut FramedWrite<OwnedWriteHalf, LengthDelimitedCodec>) -> io::Result<()> {
    SinkExt::<Bytes>::flush(out).await
}

/// How a TCP node reaches its cluster.
#[derive(Clone, Debug)]
pub struct TcpNodeConfig {
    /// The address of every node of the placement (this node's own entry, if present, is
    /// ignored). Messages for a node without an address are dropped.
    pub peers: Vec<(NodeId, SocketAddr)>,
    /// Seeds the node's random number generator (mixed with its id).
    pub seed: u64,
    /// Hold each peer message back by the placement's one-way delay (see the module docs).
    pub emulate_latency: bool,
    /// The node's write-ahead log (a data directory, or memory).
    pub log: LogConfig,
}

/// A running TCP node. Dropping the handle stops the node too, without waiting for it.
pub struct TcpNodeHandle {
    id: NodeId,
    local_addr: SocketAddr,
    stop: CancellationToken,
    node: Option<JoinHandle<()>>,
    /// The task owning the listening socket.
    accept: Option<JoinHandle<()>>,
}

impl TcpNodeHandle {
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The address the node listens on (useful after binding port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Wait until the node loop ends by itself, which only happens if the protocol panicked (or
    /// the node was shut down). Returns a description of the panic, if any.
    pub async fn join(&mut self) -> Result<(), String> {
        match self.node.take() {
            Some(node) => node.await.map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }

    /// Stop the node: close the listening socket and every connection, let the node loop handle
    /// the inputs already queued, and wait for it to end.
    pub async fn shutdown(mut self) {
        self.stop.cancel();
        // The listening socket is closed once the accept task has ended: wait for it, so the
        // address can be bound again as soon as this returns (a restarted node does).
        if let Some(accept) = self.accept.take() {
            let _ = accept.await;
        }
        if let Some(node) = self.node.take() {
            let _ = node.await;
        }
    }
}

impl Drop for TcpNodeHandle {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Recover node `env.id` of protocol `P` from its log, bind `listen` and serve it there (see
/// the module docs).
pub async fn serve<P: Protocol>(
    env: NodeEnv,
    listen: SocketAddr,
    config: TcpNodeConfig,
) -> io::Result<TcpNodeHandle> {
    let listener = TcpListener::bind(listen).await?;
    serve_on::<P>(env, listener, config)
}

/// Recover node `env.id` of protocol `P` from its log and serve it on an already bound
/// listener. Must be called within a tokio runtime. A log that cannot be read is an error
/// (of kind `InvalidData`, naming the file): the node does not start.
pub fn serve_on<P: Protocol>(
    env: NodeEnv,
    listener: TcpListener,
    config: TcpNodeConfig,
) -> io::Result<TcpNodeHandle> {
    let me = env.id;
    let placement = env.placement.clone();
    let n = placement.node_count();
    let invalid = |msg: String| io::Error::new(io::ErrorKind::InvalidInput, msg);
    if me.0 as usize >= n {
        return Err(invalid(format!("node {me} is not in a {n}-node placement")));
    }
    let mut addrs: Vec<Option<SocketAddr>> = vec![None; n];
    for (id, addr) in &config.peers {
        match addrs.get_mut(id.0 as usize) {
            Some(slot) => *slot = Some(*addr),
            None => return Err(invalid(format!("peer {id} is not in a {n}-node placement"))),
        }
    }
    let local_addr = listener.local_addr()?;
    let (protocol, log) = wal::open::<P>(&env, &config.log)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    let stop = CancellationToken::new();
    let (inbox, inbox_rx) = mpsc::unbounded_channel::<Input<P>>();

    let mut links = Vec::with_capacity(n);
    for to in placement.nodes() {
        let addr = match addrs[to.0 as usize] {
            Some(addr) if to != me => addr,
            _ => {
                if to != me {
                    warn!(node = %me, "no address for node {to}: messages to it will be dropped");
                }
                links.push(None);
                continue;
            }
        };
        let one_way = placement.one_way(me, to);
        let delay = if config.emulate_latency && one_way >= MIN_EMULATED_DELAY {
            one_way
        } else {
            Duration::ZERO
        };
        let (tx, rx) = mpsc::channel(PEER_BUFFER);
        let dropped = Arc::new(AtomicU64::new(0));
        spawn_until(
            &stop,
            peer_writer::<P::Msg>(me, to, addr, rx, dropped.clone()),
        );
        links.push(Some(Link { tx, delay, dropped }));
    }
    let net: Arc<dyn PeerNet<P::Msg>> = Arc::new(TcpNet::<P> {
        me,
        inbox: inbox.clone(),
        links,
    });

    let node_stop = stop.clone();
    let node_inbox = inbox.clone();
    let node = tokio::spawn(async move {
        let run = run_node::<P>(
            env,
            config.seed,
            RealClock::new(),
            protocol,
            log,
            inbox_rx,
            net,
        );
        tokio::pin!(run);
        tokio::select! {
            _ = &mut run => {}
            _ = node_stop.cancelled() => {
                let _ = node_inbox.send(Input::Stop);
                run.await;
            }
        }
    });

    let shared = Arc::new(Shared::<P> {
        me,
        nodes: n,
        placement: placement.clone(),
        inbox,
        router: Arc::new(ClientRouter::default()),
        stop: stop.clone(),
    });
    let accept = spawn_until(&stop, accept_loop(listener, shared));
    info!(node = %me, addr = %local_addr, "listening");
    Ok(TcpNodeHandle {
        id: me,
        local_addr,
        stop,
        node: Some(node),
        accept: Some(accept),
    })
}

/// Run `fut` on the current runtime until it ends or `stop` is cancelled.
fn spawn_until<F>(stop: &CancellationToken, fut: F) -> JoinHandle<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    let stop = stop.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = stop.cancelled() => {}
            _ = fut => {}
        }
    })
}

/// One outgoing link: the queue to its writer task and the delay to emulate.
struct Link<M> {
    tx: mpsc::Sender<(Instant, M)>,
    delay: Duration,
    /// Messages dropped because the queue was full; reported by the writer.
    dropped: Arc<AtomicU64>,
}

/// The network of a TCP node: its own inbox for messages to itself, a writer per peer otherwise.
struct TcpNet<P: Protocol> {
    me: NodeId,
    inbox: mpsc::UnboundedSender<Input<P>>,
    /// Indexed by node id; `None` for this node and for nodes without an address.
    links: Vec<Option<Link<P::Msg>>>,
}

impl<P: Protocol> PeerNet<P::Msg> for TcpNet<P> {
    fn send(&self, from: NodeId, to: NodeId, msg: P::Msg) {
        if to == self.me {
            let _ = self.inbox.send(Input::Peer(from, msg));
            return;
        }
        match self.links.get(to.0 as usize) {
            Some(Some(link)) => {
                let at = Instant::now() + link.delay;
                if let Err(mpsc::error::TrySendError::Full(_)) = link.tx.try_send((at, msg)) {
                    link.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
            _ => debug!(node = %from, "dropping a message for {to}, which has no address"),
        }
    }
}

/// An outgoing connection to a peer. The peer never writes on it, so anything read means the
/// connection is over.
struct PeerConn {
    out: FramedWrite<OwnedWriteHalf, LengthDelimitedCodec>,
    input: OwnedReadHalf,
}

impl PeerConn {
    async fn connect(me: NodeId, addr: SocketAddr) -> io::Result<PeerConn> {
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))??;
        stream.set_nodelay(true)?;
        let (input, output) = stream.into_split();
        let mut out = FramedWrite::new(output, codec());
        out.send(encode_frame(&Body::<()>::Hello { from: me }).map_err(io::Error::other)?)
            .await?;
        Ok(PeerConn { out, input })
    }

    /// Resolves when the peer closes the connection (or breaks its side of the protocol).
    async fn closed(&mut self) -> String {
        let mut buf = [0u8; 64];
        match self.input.read(&mut buf).await {
            Ok(0) => "closed by the peer".to_string(),
            Ok(_) => "the peer wrote on an outgoing connection".to_string(),
            Err(e) => e.to_string(),
        }
    }

    /// Write `frame` once `at` has come; flush unless more frames are about to follow.
    async fn write(&mut self, frame: Bytes, at: Instant, more: bool) -> io::Result<()> {
        if at > Instant::now() {
            flush(&mut self.out).await?;
            tokio::time::sleep_until(at.into()).await;
        }
        self.out.feed(frame).await?;
        if !more {
            flush(&mut self.out).await?;
        }
        Ok(())
    }
}

/// Carry the messages queued for peer `to` to it, dialling and redialling as needed.
async fn peer_writer<M: Serialize + Send + 'static>(
    me: NodeId,
    to: NodeId,
    addr: SocketAddr,
    mut rx: mpsc::Receiver<(Instant, M)>,
    dropped: Arc<AtomicU64>,
) {
    let mut conn: Option<PeerConn> = None;
    let mut retry_at = Instant::now();
    let mut backoff = MIN_BACKOFF;
    let mut failures = 0u32;
    loop {
        let next = match conn.as_mut() {
            None => rx.recv().await,
            Some(c) => tokio::select! {
                next = rx.recv() => next,
                why = c.closed() => {
                    warn!(node = %me, peer = %to, %addr, "connection to peer lost: {why}");
                    conn = None;
                    continue;
                }
            },
        };
        let Some((at, msg)) = next else { return };
        if conn.is_none() {
            if Instant::now() < retry_at {
                dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            match PeerConn::connect(me, addr).await {
                Ok(c) => {
                    let lost = dropped.swap(0, Ordering::Relaxed);
                    if failures > 0 || lost > 0 {
                        info!(node = %me, peer = %to, %addr, "connected to peer after {failures} failed attempts; {lost} messages for it were dropped");
                    } else {
                        debug!(node = %me, peer = %to, %addr, "connected to peer");
                    }
                    conn = Some(c);
                    failures = 0;
                    backoff = MIN_BACKOFF;
                }
                Err(e) => {
                    if failures == 0 {
                        warn!(node = %me, peer = %to, %addr, "cannot reach peer, dropping its messages until it is back: {e}");
                    } else {
                        debug!(node = %me, peer = %to, %addr, "cannot reach peer: {e}");
                    }
                    failures += 1;
                    retry_at = Instant::now() + backoff;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    dropped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
            }
        }
        let frame = match encode_frame(&Body::Peer { from: me, msg }) {
            Ok(frame) => frame,
            Err(e) => {
                warn!(node = %me, peer = %to, "dropping a message that cannot be sent: {e}");
                continue;
            }
        };
        let c = conn.as_mut().expect("connected above");
        if let Err(e) = c.write(frame, at, !rx.is_empty()).await {
            warn!(node = %me, peer = %to, %addr, "connection to peer lost: {e}");
            dropped.fetch_add(1, Ordering::Relaxed);
            conn = None;
        }
    }
}

/// What every connection task of a node shares.
struct Shared<P: Protocol> {
    me: NodeId,
    nodes: usize,
    placement: Arc<Placement>,
    inbox: mpsc::UnboundedSender<Input<P>>,
    router: Arc<ClientRouter>,
    stop: CancellationToken,
}

async fn accept_loop<P: Protocol>(listener: TcpListener, shared: Arc<Shared<P>>) {
    let mut next_conn = 0u64;
    loop {
        match listener.accept().await {
            Ok((stream, remote)) => {
                let _ = stream.set_nodelay(true);
                next_conn += 1;
                let conn = next_conn;
                let shared2 = shared.clone();
                spawn_until(&shared.stop, async move {
                    let me = shared2.me;
                    if let Err(reason) = serve_connection(stream, conn, shared2).await {
                        warn!(node = %me, %remote, "dropping connection: {reason}");
                    }
                });
            }
            Err(e) => {
                // Typically out of file descriptors: wait for some to be released.
                warn!(node = %shared.me, "accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Serve one inbound connection, a peer's or a client's as its first frame says. `Err` is the
/// reason the connection was dropped.
async fn serve_connection<P: Protocol>(
    stream: TcpStream,
    conn: u64,
    shared: Arc<Shared<P>>,
) -> Result<(), String> {
    let (input, output) = stream.into_split();
    let mut frames = FramedRead::new(input, codec());
    let first = match frames.next().await {
        None => return Ok(()),
        Some(frame) => frame.map_err(|e| e.to_string())?,
    };
    match decode_frame::<P::Msg>(&first).map_err(|e| e.to_string())? {
        Body::Hello { from } => {
            if from.0 as usize >= shared.nodes || from == shared.me {
                return Err(format!(
                    "hello from {from}, which is not a peer of this node"
                ));
            }
            debug!(node = %shared.me, peer = %from, "peer connected");
            serve_peer(frames, from, &shared).await
        }
        Body::Request(request) => serve_client(frames, output, request, conn, &shared).await,
        other => Err(format!("{} frame before hello or request", other.kind())),
    }
}

async fn serve_peer<P: Protocol>(
    mut frames: FramedRead<OwnedReadHalf, LengthDelimitedCodec>,
    from: NodeId,
    shared: &Shared<P>,
) -> Result<(), String> {
    while let Some(frame) = frames.next().await {
        let frame = frame.map_err(|e| format!("from peer {from}: {e}"))?;
        match decode_frame::<P::Msg>(&frame).map_err(|e| format!("from peer {from}: {e}"))? {
            Body::Peer { from: sender, msg } if sender == from => {
                let inbound = Inbound {
                    me: shared.me,
                    from,
                    placement: &shared.placement,
                };
                if let Err(e) = msg.check(&inbound) {
                    warn!(node = %shared.me, peer = %from, "dropping a message that fails its check: {e}");
                    continue;
                }
                if shared.inbox.send(Input::Peer(from, msg)).is_err() {
                    return Ok(()); // the node stopped
                }
            }
            Body::Peer { from: sender, .. } => {
                return Err(format!("peer {from} sent a message as {sender}"));
            }
            other => return Err(format!("{} frame from peer {from}", other.kind())),
        }
    }
    debug!(node = %shared.me, peer = %from, "peer disconnected");
    Ok(())
}

async fn serve_client<P: Protocol>(
    mut frames: FramedRead<OwnedReadHalf, LengthDelimitedCodec>,
    output: OwnedWriteHalf,
    first: ClientRequest,
    conn: u64,
    shared: &Shared<P>,
) -> Result<(), String> {
    let mut out = FramedWrite::new(output, codec());
    let (reply_tx, mut replies) = mpsc::unbounded_channel::<ClientResponse>();
    // The reply sender handed to the node for each client id seen on this connection.
    let mut senders: FxHashMap<ClientId, ReplySender> = FxHashMap::default();
    let mut pending = Some(first);
    loop {
        if let Some(request) = pending.take() {
            if let Err(e) = check_request(&request.op) {
                let response = ClientResponse {
                    id: request.id,
                    reply: ClientReply::Rejected(RequestError::Invalid(e.to_string())),
                };
                let _ = reply_tx.send(response);
                continue;
            }
            let sender = senders
                .entry(request.client)
                .or_insert_with(|| shared.router.register(request.client, conn, &reply_tx))
                .clone();
            if shared.inbox.send(Input::Client(request, sender)).is_err() {
                return Ok(()); // the node stopped
            }
        }
        tokio::select! {
            frame = frames.next() => {
                let Some(frame) = frame else { return Ok(()) };
                let frame = frame.map_err(|e| e.to_string())?;
                match decode_frame::<P::Msg>(&frame).map_err(|e| e.to_string())? {
                    Body::Request(request) => pending = Some(request),
                    other => return Err(format!("{} frame on a client connection", other.kind())),
                }
            }
            Some(response) = replies.recv() => {
                let mut batch = vec![response];
                while let Ok(more) = replies.try_recv() {
                    batch.push(more);
                }
                for response in batch {
                    let frame = encode_frame(&Body::<()>::Response(response))
                        .map_err(|e| format!("cannot encode a response: {e}"))?;
                    out.feed(frame).await.map_err(|e| e.to_string())?;
                }
                flush(&mut out).await.map_err(|e| e.to_string())?;
            }
        }
    }
}

/// Routes a node's replies to the connection each client currently uses.
///
/// The node loop remembers one reply sender per client id for good, while a client may reconnect
/// with the same id. So the node is handed, per client id, the sender of a small forwarding task
/// that looks up the client's latest connection for each reply.
#[derive(Default)]
struct ClientRouter {
    routes: Mutex<FxHashMap<ClientId, Route>>,
}

struct Route {
    forward: ReplySender,
    current: ReplySender,
}

impl ClientRouter {
    /// Make connection `conn` (whose replies go to `out`) the one serving `client`, and return
    /// the sender to hand the node with the client's requests.
    fn register(self: &Arc<Self>, client: ClientId, conn: u64, out: &ReplySender) -> ReplySender {
        let mut routes = self.routes.lock().expect("router lock");
        if let Some(route) = routes.get_mut(&client) {
            debug!(client = client.0, conn, "client moved to a new connection");
            route.current = out.clone();
            return route.forward.clone();
        }
        let (forward, mut rx) = mpsc::unbounded_channel::<ClientResponse>();
        let router: Weak<ClientRouter> = Arc::downgrade(self);
        tokio::spawn(async move {
            while let Some(response) = rx.recv().await {
                let Some(router) = router.upgrade() else {
                    return;
                };
                let current = router
                    .routes
                    .lock()
                    .expect("router lock")
                    .get(&client)
                    .map(|r| r.current.clone());
                if let Some(current) = current {
                    let _ = current.send(response);
                }
            }
        });
        routes.insert(
            client,
            Route {
                forward: forward.clone(),
                current: out.clone(),
            },
        );
        forward
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Ctx, ProtocolOptions};
    use augur_client::{Session, TxnError};
    use augur_types::{
        AbortReason, Key, LatencyProfile, Placement, RequestError, Timestamp, TxnId,
    };
    use std::io::{Read, Write};

    /// A test protocol: `Begin` at node `i` pings node `i + 1` (mod n) and is answered when the
    /// pong comes back, with the ponging node's id as snapshot; reads echo the key.
    struct Relay {
        id: NodeId,
        nodes: u32,
        seq: u64,
    }

    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    enum RelayMsg {
        Ping {
            client: ClientId,
            request: RequestId,
        },
        Pong {
            client: ClientId,
            request: RequestId,
            node: u32,
        },
    }

    impl crate::inbound::CheckMessage for RelayMsg {
        fn check(&self, _: &crate::inbound::Inbound<'_>) -> Result<(), crate::inbound::BadMessage> {
            Ok(())
        }
    }

    impl Protocol for Relay {
        type Msg = RelayMsg;
        type Timer = ();
        type Record = ();

        fn new(env: &NodeEnv) -> Self {
            Relay {
                id: env.id,
                nodes: env.placement.node_count() as u32,
                seq: 0,
            }
        }

        fn on_client(&mut self, ctx: &mut Ctx<'_, Self>, request: ClientRequest) {
            let reply = match request.op {
                ClientOp::Begin { .. } => {
                    let to = NodeId((self.id.0 + 1) % self.nodes);
                    let msg = RelayMsg::Ping {
                        client: request.client,
                        request: request.id,
                    };
                    ctx.send(to, msg);
                    return;
                }
                ClientOp::Read { key, .. } => {
                    ClientReply::Value(Some(Bytes::copy_from_slice(key.as_bytes())))
                }
                ClientOp::Commit { .. } => ClientReply::Committed {
                    commit_ts: ctx.now(),
                },
                ClientOp::Abort { .. } => ClientReply::Aborted(AbortReason::UserRollback),
                ClientOp::AwaitOutcome { txn } => {
                    ClientReply::Rejected(RequestError::UnknownTransaction(txn))
                }
                ClientOp::NodeStats | ClientOp::Execute { .. } => return,
            };
            let response = ClientResponse {
                id: request.id,
                reply,
            };
            ctx.reply(request.client, response);
        }

        fn on_message(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, msg: RelayMsg) {
            match msg {
                RelayMsg::Ping { client, request } => {
                    let node = self.id.0;
                    ctx.send(
                        from,
                        RelayMsg::Pong {
                            client,
                            request,
                            node,
                        },
                    );
                }
                RelayMsg::Pong {
                    client,
                    request,
                    node,
                } => {
                    self.seq += 1;
                    let reply = ClientReply::Begun {
                        txn: TxnId::new(self.id, self.seq),
                        snapshot: Timestamp(node as u64),
                    };
                    ctx.reply(client, ClientResponse { id: request, reply });
                }
            }
        }

        fn on_timer(&mut self, _ctx: &mut Ctx<'_, Self>, _timer: ()) {}
    }

    fn env(id: u32, nodes: usize, profile: &str) -> NodeEnv {
        let profile = LatencyProfile::named(profile).unwrap();
        let dcs = profile.dcs.len().min(nodes);
        let profile = profile.truncated(dcs).unwrap();
        NodeEnv {
            id: NodeId(id),
            placement: Arc::new(Placement::ring(profile, nodes, 1).unwrap()),
            options: Arc::new(ProtocolOptions::default()),
            procedures: Default::default(),
        }
    }

    fn config(peers: &[SocketAddr]) -> TcpNodeConfig {
        TcpNodeConfig {
            peers: peers
                .iter()
                .enumerate()
                .map(|(i, a)| (NodeId(i as u32), *a))
                .collect(),
            seed: 7,
            emulate_latency: true,
            log: LogConfig::memory("relay", crate::wal::LogPolicy::Off),
        }
    }

    async fn listeners(n: usize) -> (Vec<TcpListener>, Vec<SocketAddr>) {
        let mut ls = Vec::new();
        let mut addrs = Vec::new();
        for _ in 0..n {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            addrs.push(l.local_addr().unwrap());
            ls.push(l);
        }
        (ls, addrs)
    }

    /// Start an `n`-node cluster of [`Relay`] nodes on loopback.
    async fn cluster(n: usize, profile: &str, emulate: bool) -> Vec<TcpNodeHandle> {
        let (ls, addrs) = listeners(n).await;
        ls.into_iter()
            .enumerate()
            .map(|(i, l)| {
                let mut cfg = config(&addrs);
                cfg.emulate_latency = emulate;
                serve_on::<Relay>(env(i as u32, n, profile), l, cfg).unwrap()
            })
            .collect()
    }

    async fn session(addr: SocketAddr, client: u64) -> Session<TcpTransport> {
        let t = TcpTransport::connect(addr, ClientId(client), Duration::from_secs(5))
            .await
            .unwrap();
        Session::new(t)
    }

    /// Send `bytes` on a fresh connection to `addr` and check that the node closes it.
    fn assert_dropped(addr: SocketAddr, bytes: &[u8]) {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(bytes).unwrap();
        // Whatever the node answered before dropping the connection is skipped.
        let mut buf = [0u8; 256];
        loop {
            match s.read(&mut buf) {
                Ok(0) => return,
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return,
                Err(e) => panic!("connection not dropped after {bytes:?}: {e}"),
            }
        }
    }

    fn framed(payload: &[u8]) -> Vec<u8> {
        let mut v = (payload.len() as u32).to_be_bytes().to_vec();
        v.extend_from_slice(payload);
        v
    }

    fn request(client: u64, id: u64) -> ClientRequest {
        ClientRequest {
            client: ClientId(client),
            id: RequestId(id),
            op: ClientOp::Begin {
                read_only: false,
                speculative: false,
            },
        }
    }

    #[test]
    fn envelopes_round_trip_and_check_their_version() {
        let bodies = vec![
            Body::Hello { from: NodeId(3) },
            Body::Peer {
                from: NodeId(1),
                msg: RelayMsg::Pong {
                    client: ClientId(9),
                    request: RequestId(4),
                    node: 2,
                },
            },
            Body::Request(ClientRequest {
                client: ClientId(5),
                id: RequestId(6),
                op: ClientOp::Commit {
                    txn: TxnId::new(NodeId(2), 8),
                    writes: vec![(Key::numbered(1, 2), Some(Bytes::from_static(b"v")))],
                    speculative: true,
                },
            }),
            Body::Response(ClientResponse {
                id: RequestId(6),
                reply: ClientReply::Aborted(AbortReason::WriteWriteConflict),
            }),
            Body::Request(ClientRequest {
                client: ClientId(4),
                id: RequestId(7),
                op: ClientOp::NodeStats,
            }),
            Body::Response(ClientResponse {
                id: RequestId(7),
                reply: ClientReply::NodeStats([("parked_reads".to_string(), 3)].into()),
            }),
        ];
        for body in bodies {
            let frame = encode_frame(&body).unwrap();
            assert_eq!(frame[0], WIRE_VERSION as u8);
            assert_eq!(decode_frame::<RelayMsg>(&frame).unwrap(), body);
            // The borrowed encoding is the encoding of an owned envelope.
            let owned = Envelope {
                version: WIRE_VERSION,
                body: body.clone(),
            };
            assert_eq!(postcard::to_stdvec(&owned).unwrap(), frame.to_vec());
        }
        // The examples of docs/cluster-config.md.
        let hello = encode_frame(&Body::<()>::Hello { from: NodeId(2) }).unwrap();
        assert_eq!(hello.to_vec(), [5, 0, 2]);
        let begin = encode_frame(&Body::<()>::Request(request(7, 0))).unwrap();
        assert_eq!(begin.to_vec(), [5, 2, 7, 0, 0, 0, 0]);
        // Client frames do not depend on the peer message type.
        let frame = encode_frame(&Body::<RelayMsg>::Request(request(1, 2))).unwrap();
        assert_eq!(
            decode_frame::<()>(&frame).unwrap(),
            Body::Request(request(1, 2))
        );

        let other = Envelope::<()> {
            version: WIRE_VERSION + 1,
            body: Body::Hello { from: NodeId(0) },
        };
        let frame = postcard::to_stdvec(&other).unwrap();
        assert!(matches!(
            decode_frame::<()>(&frame),
            Err(FrameError::Version { found }) if found == WIRE_VERSION + 1
        ));
        let mut long = encode_frame(&Body::<()>::Hello { from: NodeId(0) })
            .unwrap()
            .to_vec();
        long.push(0);
        assert!(matches!(
            decode_frame::<()>(&long),
            Err(FrameError::Trailing(1))
        ));
        assert!(matches!(
            decode_frame::<()>(&[WIRE_VERSION as u8, 0xff]),
            Err(FrameError::Decode(_))
        ));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_round_trips_through_one_node() {
        let nodes = cluster(1, "lan", true).await;
        let s = session(nodes[0].local_addr(), 1).await;
        let mut txn = s.begin(false).await.unwrap();
        assert_eq!(txn.snapshot(), Timestamp(0), "pinged itself");
        let key = Key::numbered(3, 4);
        let v = txn.read(&key).await.unwrap().unwrap();
        assert_eq!(&v[..], key.as_bytes());
        txn.commit().await.unwrap();
        for n in nodes {
            n.shutdown().await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn peers_exchange_messages_over_tcp() {
        let nodes = cluster(3, "lan", true).await;
        for (i, node) in nodes.iter().enumerate() {
            let s = session(node.local_addr(), 10 + i as u64).await;
            for _ in 0..3 {
                let txn = s.begin(false).await.unwrap();
                assert_eq!(txn.snapshot(), Timestamp((i as u64 + 1) % 3));
                assert_eq!(txn.id().coordinator(), NodeId(i as u32));
                txn.abort().await;
            }
        }
        for n in nodes {
            n.shutdown().await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn malformed_frames_drop_the_connection_not_the_node() {
        let nodes = cluster(1, "lan", true).await;
        let addr = nodes[0].local_addr();
        // A length prefix beyond the frame limit.
        let mut huge = vec![0xff, 0xff, 0xff, 0xff];
        huge.extend_from_slice(b"garbage");
        // Frames that do not decode, of the wrong version, or out of place.
        let bad_version = postcard::to_stdvec(&Envelope::<()> {
            version: WIRE_VERSION + 1,
            body: Body::Request(request(1, 0)),
        })
        .unwrap();
        let peer_first = encode_frame(&Body::Peer {
            from: NodeId(0),
            msg: RelayMsg::Ping {
                client: ClientId(1),
                request: RequestId(0),
            },
        })
        .unwrap();
        let response = encode_frame(&Body::<()>::Response(ClientResponse {
            id: RequestId(0),
            reply: ClientReply::Value(None),
        }))
        .unwrap();
        let request_then_hello = [
            framed(&encode_frame(&Body::<()>::Request(request(2, 0))).unwrap()),
            framed(&encode_frame(&Body::<()>::Hello { from: NodeId(0) }).unwrap()),
        ]
        .concat();
        let tasks = tokio::task::spawn_blocking(move || {
            assert_dropped(addr, &huge);
            assert_dropped(addr, &framed(&[0xff, 0xff, 0xff, 0xff, 0xff]));
            assert_dropped(addr, &framed(b"\x02\x07hello"));
            assert_dropped(addr, &framed(&bad_version));
            assert_dropped(addr, &framed(&peer_first));
            assert_dropped(addr, &framed(&response));
            assert_dropped(
                addr,
                &framed(&encode_frame(&Body::<()>::Hello { from: NodeId(5) }).unwrap()),
            );
            assert_dropped(addr, &request_then_hello);
        });
        tasks.await.unwrap();
        // The node still serves a well-formed client.
        let s = session(addr, 3).await;
        let txn = s.begin(false).await.unwrap();
        txn.commit().await.unwrap();
        for n in nodes {
            n.shutdown().await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_may_reconnect_with_the_same_id() {
        let nodes = cluster(2, "lan", true).await;
        let addr = nodes[0].local_addr();
        for _ in 0..3 {
            let s = session(addr, 42).await;
            let txn = s.begin(false).await.unwrap();
            txn.commit().await.unwrap();
        }
        for n in nodes {
            n.shutdown().await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn peers_are_redialled_when_they_come_back() {
        let (mut ls, addrs) = listeners(2).await;
        let l1 = ls.pop().unwrap();
        let l0 = ls.pop().unwrap();
        drop(l1); // node 1 is down
        let n0 = serve_on::<Relay>(env(0, 2, "lan"), l0, config(&addrs)).unwrap();
        let t = TcpTransport::connect(n0.local_addr(), ClientId(1), Duration::from_millis(300))
            .await
            .unwrap();
        let s = Session::new(t);
        assert!(matches!(
            s.begin(false).await,
            Err(TxnError::Unavailable(TransportError::Timeout(_)))
        ));

        let begin_eventually = async |s: &Session<TcpTransport>| {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                match s.begin(false).await {
                    Ok(txn) => return txn.snapshot(),
                    Err(e) => assert!(Instant::now() < deadline, "still failing: {e}"),
                }
            }
        };
        let n1 = serve::<Relay>(env(1, 2, "lan"), addrs[1], config(&addrs))
            .await
            .unwrap();
        assert_eq!(begin_eventually(&s).await, Timestamp(1));

        // Node 1 restarts: node 0 notices the closed connection and dials again.
        n1.shutdown().await;
        let n1 = serve::<Relay>(env(1, 2, "lan"), addrs[1], config(&addrs))
            .await
            .unwrap();
        assert_eq!(begin_eventually(&s).await, Timestamp(1));
        n0.shutdown().await;
        n1.shutdown().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn latency_is_emulated_between_data_centres() {
        // 3dc: VA and OR are 67 ms apart, so a ping-pong between nodes 0 and 1 takes a round trip.
        for emulate in [true, false] {
            let nodes = cluster(3, "3dc", emulate).await;
            let s = session(nodes[0].local_addr(), 1).await;
            s.begin(false).await.unwrap().abort().await;
            let start = Instant::now();
            s.begin(false).await.unwrap().abort().await;
            let took = start.elapsed();
            if emulate {
                assert!(took >= Duration::from_millis(60), "took {took:?}");
            } else {
                assert!(took < Duration::from_millis(60), "took {took:?}");
            }
            for n in nodes {
                n.shutdown().await;
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stopped_node_disconnects_its_clients() {
        let nodes = cluster(1, "lan", true).await;
        let s = session(nodes[0].local_addr(), 1).await;
        s.begin(false).await.unwrap().abort().await;
        for n in nodes {
            n.shutdown().await;
        }
        assert!(matches!(
            s.begin(false).await,
            Err(TxnError::Unavailable(TransportError::Disconnected(_)))
        ));
    }
}
