//! The TCP runtime: one node per process, talking to its peers and to its clients over TCP.
//!
//! # Wire format
//!
//! Every connection carries a stream of frames. A frame is a 4-byte big-endian length followed by
//! that many bytes ([`LengthDelimitedCodec`](tokio_util::codec::LengthDelimitedCodec), at most [`MAX_FRAME_LEN`] bytes). The bytes are a
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
//! flight at a time. A client chooses its own [`ClientId`](augur_types::ClientId); ids must be unique within the
//! cluster. A client that reconnects with the same id gets the replies to its later requests on
//! the new connection.

use crate::clock::RealClock;
use crate::local::{Input, MIN_EMULATED_DELAY, PeerNet, run_node};
use crate::wal::{self, LogConfig};
use crate::{NodeEnv, Protocol};
use augur_types::NodeId;
use augur_types::Placement;
use futures::StreamExt;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

mod clients;
mod peer;
mod transport;
mod wire;

use clients::{ClientRouter, serve_client};
pub use peer::PEER_BUFFER;
use peer::{Link, TcpNet, peer_writer, serve_peer};
pub use transport::TcpTransport;
pub use wire::{
    Body, Envelope, FrameError, MAX_FRAME_LEN, WIRE_VERSION, codec, decode_frame, encode_frame,
};

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
pub(super) fn spawn_until<F>(stop: &CancellationToken, fut: F) -> JoinHandle<()>
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

/// What every connection task of a node shares.
pub(super) struct Shared<P: Protocol> {
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

#[cfg(test)]
mod tests;
