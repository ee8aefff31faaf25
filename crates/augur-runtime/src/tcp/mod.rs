//! The TCP runtime: one node per process, talking to its peers and to its clients over TCP,
//! with TLS ([`tls`]) when the cluster is configured for it. The format and the behaviour are
//! specified for operators in docs/cluster-config.md.
//!
//! # Wire format
//!
//! Every connection carries a stream of frames. A frame is a 4-byte big-endian length followed by
//! that many bytes ([`LengthDelimitedCodec`](tokio_util::codec::LengthDelimitedCodec), at most
//! [`MAX_FRAME_LEN`] bytes). The bytes are a postcard-encoded [`Envelope`]: the wire version
//! ([`WIRE_VERSION`], a varint `u16`) and then a [`Body`]. The version is decoded first; a frame
//! of any other version is refused before its body is looked at, so later versions may change
//! the body freely.
//!
//! A connection opens with a hello ([`handshake`]): a *peer connection* with [`Body::Hello`]
//! (then only [`Body::Peer`] frames from that same node follow), a *client connection* with
//! [`Body::ClientHello`] (then only requests follow, and the node answers with
//! [`Body::Response`] frames on the same connection). A frame that is too long, fails to decode,
//! has another version, or does not fit the connection's kind gets the connection dropped with a
//! logged reason; the node keeps serving everybody else. A peer message that decodes is checked
//! (`augur_contract::inbound`) before the protocol sees it.
//!
//! # Nodes
//!
//! [`serve`] runs the same node loop as the in-process runtime ([`run_node`]) behind a listening
//! socket. Each node keeps one outgoing connection per peer, dialled by a writer task as soon as
//! the node starts, and redialled with exponential backoff after a failure. Messages for a peer whose link is down (not up yet, or lost) wait for it, and the
//! writer dials every 50 ms while any do; those that have waited longer than the peer timeout
//! are dropped (so are messages beyond a bounded per-peer buffer): protocols already bound
//! every wait with their own timeouts. Waiting rather than dropping at once is what keeps the
//! messages sent while a cluster's links are still coming up. Messages between two nodes arrive
//! in the order they were sent as long as the connection lasts.
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
//! flight at a time. The node assigns the connection its [`ClientId`](augur_types::ClientId) and
//! takes every request on it as that client's; a transaction can be used only from the
//! connection that began it (the node remembers [`MAX_OPEN_TXNS`] per connection), and when
//! the connection closes the node forgets the client ([`Protocol::on_client_gone`]).

use crate::clock::RealClock;
use crate::local::{Input, MIN_EMULATED_DELAY, PeerNet, run_node};
use crate::wal::{self, LogConfig};
use augur_contract::{NodeEnv, Protocol};
use augur_types::NodeId;
use augur_types::Placement;
use rustls::pki_types::CertificateDer;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

mod clients;
pub mod handshake;
mod limits;
mod peer;
pub mod tls;
mod transport;
mod wire;

pub use clients::{MAX_OPEN_TXNS, NodeClients};
use clients::{check_token, serve_client};
use handshake::ClientIds;
pub use handshake::{ClusterIdentity, HANDSHAKE_TIMEOUT};
use limits::warn_limited;
pub use limits::{HELLO_FRAME_LEN, Limits, RateLimitedWarning};
pub use peer::PEER_BUFFER;
use peer::{Dialler, Link, TcpNet, peer_writer, serve_peer};
pub use tls::{ClientTls, GeneratedPki, NodeCertificate, NodeTls, generate_pki, node_server_name};
pub use transport::{ClientConfig, TcpTransport};
pub use wire::{
    Body, Envelope, FrameError, MAX_FRAME_LEN, WIRE_VERSION, codec, decode_frame, encode_frame,
};
use wire::{Conn, InboundReader, framed_inbound, next_body, send_body};

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
    /// The cluster this node belongs to and the configuration its peers must share.
    pub identity: ClusterIdentity,
    /// TLS for every connection, peers' and clients'; `None` runs in plaintext, with no
    /// authentication at all (for benchmarks on loopback).
    pub tls: Option<Arc<NodeTls>>,
    /// The token clients must present in their hello; `None` admits any client.
    pub client_token: Option<String>,
    /// What bounds the node's resources against its connections.
    pub limits: Limits,
    /// How far this node's clock reads ahead of the system clock, in microseconds (negative:
    /// behind). Zero but for fault injection.
    pub clock_offset_us: i64,
}

/// A running TCP node. Dropping the handle stops the node too, without waiting for it.
pub struct TcpNodeHandle {
    id: NodeId,
    local_addr: SocketAddr,
    stop: CancellationToken,
    node: Option<JoinHandle<()>>,
    /// The task owning the listening socket.
    accept: Option<JoinHandle<()>>,
    clients: NodeClients,
}

impl TcpNodeHandle {
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// Opens client sessions on this node from within its process.
    pub fn clients(&self) -> NodeClients {
        self.clients.clone()
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

    let dialler = Arc::new(Dialler {
        me,
        peer_timeout: config.limits.peer_timeout,
        tls: config.tls.clone(),
        identity: config.identity.clone(),
    });
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
        let (tx, rx) = mpsc::unbounded_channel();
        let queued = Arc::new(AtomicUsize::new(0));
        let dropped = Arc::new(AtomicU64::new(0));
        spawn_until(
            &stop,
            peer_writer::<P::Msg>(
                dialler.clone(),
                to,
                addr,
                rx,
                queued.clone(),
                dropped.clone(),
            ),
        );
        links.push(Some(Link {
            tx,
            queued,
            delay,
            dropped,
        }));
    }
    let net: Arc<dyn PeerNet<P::Msg>> = Arc::new(TcpNet::<P> {
        me,
        inbox: inbox.clone(),
        pending: std::sync::Mutex::new((0..n).map(|_| Vec::new()).collect()),
        links,
    });

    let node_stop = stop.clone();
    let node_inbox = inbox.clone();
    let node = tokio::spawn(async move {
        let run = run_node::<P>(
            env,
            config.seed,
            RealClock::offset_by(config.clock_offset_us),
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
        fingerprint: config.identity.fingerprint(),
        identity: config.identity,
        tls: config.tls,
        client_token: config.client_token,
        client_ids: ClientIds::new(me),
        handshakes: Arc::new(Semaphore::new(config.limits.max_handshakes)),
        clients: Arc::new(Semaphore::new(config.limits.max_clients)),
        limits: config.limits,
        warnings: Warnings::default(),
        stop: stop.clone(),
    });
    let clients = NodeClients::new(shared.clone());
    let accept = spawn_until(&stop, accept_loop(listener, shared));
    info!(node = %me, addr = %local_addr, "listening");
    Ok(TcpNodeHandle {
        id: me,
        local_addr,
        stop,
        node: Some(node),
        accept: Some(accept),
        clients,
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

/// What every connection task of a node shares.
struct Shared<P: Protocol> {
    me: NodeId,
    nodes: usize,
    placement: Arc<Placement>,
    inbox: mpsc::UnboundedSender<Input<P>>,
    identity: ClusterIdentity,
    /// `identity`'s fingerprint, which clients present.
    fingerprint: String,
    tls: Option<Arc<NodeTls>>,
    client_token: Option<String>,
    client_ids: ClientIds,
    /// Connections between accept and an accepted hello ([`Limits::max_handshakes`]).
    handshakes: Arc<Semaphore>,
    /// Client connections open ([`Limits::max_clients`]).
    clients: Arc<Semaphore>,
    limits: Limits,
    warnings: Warnings,
    stop: CancellationToken,
}

/// The node's rate-limited warnings, one per kind of trouble.
#[derive(Default)]
struct Warnings {
    dropped_connection: RateLimitedWarning,
    refused_peer: RateLimitedWarning,
    refused_client: RateLimitedWarning,
    over_handshake_limit: RateLimitedWarning,
    bad_message: RateLimitedWarning,
}

impl<P: Protocol> Shared<P> {
    /// Whether a connection that says it is node `from`, of cluster `theirs`, and showed
    /// `cert`, may serve as that peer. `Err` is the reason, in words.
    fn admit_peer(
        &self,
        from: NodeId,
        theirs: &ClusterIdentity,
        cert: Option<&CertificateDer<'static>>,
    ) -> Result<(), String> {
        if from.0 as usize >= self.nodes || from == self.me {
            return Err(format!("{from} is not a peer of this node"));
        }
        if self.tls.is_some() {
            tls::check_peer_identity(cert, from)?;
        }
        let differences = self.identity.differences(theirs);
        if !differences.is_empty() {
            return Err(format!(
                "{from} runs another cluster configuration (fingerprint {} here, {} there): {}",
                self.fingerprint,
                theirs.fingerprint(),
                differences.join("; ")
            ));
        }
        Ok(())
    }

    /// Whether a client of cluster `cluster_id`, whose configuration has `fingerprint`, and
    /// which presented `token`, may use this node.
    fn admit_client(
        &self,
        cluster_id: &str,
        fingerprint: &str,
        token: Option<&str>,
    ) -> Result<(), String> {
        if cluster_id != self.identity.cluster_id {
            return Err(format!(
                "this node belongs to cluster '{}', not '{cluster_id}'",
                self.identity.cluster_id
            ));
        }
        if fingerprint != self.fingerprint {
            return Err(format!(
                "the client's cluster file differs from this node's (fingerprint {fingerprint} there, {} here)",
                self.fingerprint
            ));
        }
        check_token(self.client_token.as_deref(), token)
    }
}

async fn accept_loop<P: Protocol>(listener: TcpListener, shared: Arc<Shared<P>>) {
    loop {
        match listener.accept().await {
            Ok((stream, remote)) => {
                let Ok(handshake) = shared.handshakes.clone().try_acquire_owned() else {
                    warn_limited!(
                        shared.warnings.over_handshake_limit,
                        node = %shared.me,
                        %remote,
                        "closing a new connection: {} connections are already handshaking (limits.max_handshakes)",
                        shared.limits.max_handshakes
                    );
                    continue;
                };
                let shared2 = shared.clone();
                spawn_until(&shared.stop, async move {
                    let me = shared2.me;
                    if let Err(reason) = serve_connection(stream, remote, handshake, &shared2).await
                    {
                        warn_limited!(
                            shared2.warnings.dropped_connection,
                            node = %me,
                            %remote,
                            "dropping connection: {reason}"
                        );
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

/// Serve one inbound connection: the TLS handshake if the cluster uses TLS, then a peer's or
/// a client's hello, then its frames. `Err` is the reason the connection was dropped.
async fn serve_connection<P: Protocol>(
    stream: TcpStream,
    remote: SocketAddr,
    handshake: OwnedSemaphorePermit,
    shared: &Arc<Shared<P>>,
) -> Result<(), String> {
    let _ = stream.set_nodelay(true);
    let (conn, cert): (Conn, Option<CertificateDer<'static>>) = match &shared.tls {
        None => (Box::new(stream), None),
        Some(tls) => {
            let stream = tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.acceptor.accept(stream))
                .await
                .map_err(|_| format!("no TLS handshake within {HANDSHAKE_TIMEOUT:?}"))?
                .map_err(|e| format!("TLS handshake failed: {e}"))?;
            let cert = stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|certs| certs.first().cloned());
            (Box::new(stream), cert)
        }
    };
    let (mut input, mut out) = framed_inbound(conn);
    // A refused hello is logged under its own limiter: a node refusing a misconfigured peer
    // must say so even while strangers' dropped connections are being suppressed.
    let refuse = async |out: &mut wire::FrameWriter, limiter: &RateLimitedWarning, why: String| {
        warn_limited!(limiter, node = %shared.me, %remote, "{why}");
        let _ = send_body(out, &Body::<()>::Refused(why)).await;
        Ok(())
    };
    match next_body::<P::Msg, _>(&mut input, HANDSHAKE_TIMEOUT).await? {
        Body::Hello { from, cluster } => {
            if let Err(why) = shared.admit_peer(from, &cluster, cert.as_ref()) {
                let why = format!("refused a peer: {why}");
                return refuse(&mut out, &shared.warnings.refused_peer, why).await;
            }
            send_body(&mut out, &Body::<()>::Accepted)
                .await
                .map_err(|e| e.to_string())?;
            drop(handshake);
            debug!(node = %shared.me, peer = %from, "peer connected");
            input.decoder_mut().set_max_frame_len(MAX_FRAME_LEN);
            serve_peer(input, out, from, shared).await
        }
        Body::ClientHello {
            cluster_id,
            fingerprint,
            token,
        } => {
            if let Err(why) = shared.admit_client(&cluster_id, &fingerprint, token.as_deref()) {
                let why = format!("refused a client: {why}");
                return refuse(&mut out, &shared.warnings.refused_client, why).await;
            }
            let Ok(_slot) = shared.clients.clone().try_acquire_owned() else {
                let why = format!(
                    "refused a client: {} clients are connected already (limits.max_clients)",
                    shared.limits.max_clients
                );
                return refuse(&mut out, &shared.warnings.refused_client, why).await;
            };
            drop(handshake);
            let client = shared.client_ids.assign();
            send_body(&mut out, &Body::<()>::Welcome { client })
                .await
                .map_err(|e| e.to_string())?;
            input
                .decoder_mut()
                .set_max_frame_len(shared.limits.max_frame_len);
            serve_client(input, out, client, shared).await
        }
        other => {
            let why = format!(
                "dropping connection: a {} frame before any hello",
                other.kind()
            );
            refuse(&mut out, &shared.warnings.dropped_connection, why).await
        }
    }
}

/// Open a connection to `addr`: TCP with `TCP_NODELAY`, then TLS if `tls` gives a connector
/// and the name the node's certificate must carry. Both steps must finish within `timeout`.
async fn dial(
    addr: SocketAddr,
    tls: Option<(
        &tokio_rustls::TlsConnector,
        rustls::pki_types::ServerName<'static>,
    )>,
    timeout: Duration,
) -> io::Result<Conn> {
    let timed_out = || {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!("connecting to {addr} timed out"),
        )
    };
    let connect = async {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let conn: Conn = match tls {
            None => Box::new(stream),
            Some((connector, name)) => Box::new(connector.connect(name, stream).await?),
        };
        Ok(conn)
    };
    tokio::time::timeout(timeout, connect)
        .await
        .map_err(|_| timed_out())?
}

#[cfg(test)]
mod tests;

/// How often connection tasks look at their deadlines (a frame too slow to arrive, an idle
/// client): a deadline is enforced within this much of its due time.
const DEADLINE_TICK: Duration = Duration::from_millis(250);

/// Whether the frame now arriving on `input` has taken longer than the node allows.
fn frame_overdue(input: &InboundReader, limits: &Limits) -> Result<(), String> {
    match input.decoder().arriving_for() {
        Some(took) if took > limits.frame_timeout => Err(format!(
            "a frame has been arriving for {took:.1?}, longer than limits.frame_timeout ({:?})",
            limits.frame_timeout
        )),
        _ => Ok(()),
    }
}
