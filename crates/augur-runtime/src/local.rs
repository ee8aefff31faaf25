//! The real-time runtime on tokio: each node is one task that owns its protocol state machine and
//! handles one input at a time. [`LocalCluster`] runs every node of a cluster in one process and
//! carries messages through an in-process network that delays each one by the placement's
//! one-way latency; the TCP runtime reuses the same node loop with sockets underneath.

use crate::clock::RealClock;
use crate::{Ctx, Effects, NodeEnv, Protocol, ProtocolOptions, deliver_client};
use augur_client::{Transport, TransportError};
use augur_types::{ClientId, ClientOp, ClientReply, ClientRequest, ClientResponse, NodeId};
use augur_types::{Placement, RequestId};
use futures::StreamExt;
use futures::future::BoxFuture;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rustc_hash::FxHashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::time::DelayQueue;

/// Delays shorter than this are delivered at once: tokio's timers tick in milliseconds, so a
/// sub-millisecond delay could only be rounded up to a whole one, which would overstate LAN
/// latency five-fold. Over TCP, the real network supplies the delay.
pub const MIN_EMULATED_DELAY: Duration = Duration::from_millis(1);

/// Where a node's replies to one client go.
pub type ReplySender = mpsc::UnboundedSender<ClientResponse>;

/// One input to a node task.
pub enum Input<P: Protocol> {
    Client(ClientRequest, ReplySender),
    Peer(NodeId, P::Msg),
    Stop,
}

/// How a node's outgoing peer messages leave it.
pub trait PeerNet<M>: Send + Sync + 'static {
    fn send(&self, from: NodeId, to: NodeId, msg: M);
}

/// Run one node until it receives [`Input::Stop`] or its inbox closes.
pub async fn run_node<P: Protocol>(
    env: NodeEnv,
    seed: u64,
    clock: RealClock,
    mut inbox: mpsc::UnboundedReceiver<Input<P>>,
    net: Arc<dyn PeerNet<P::Msg>>,
) {
    let id = env.id;
    let mut protocol = P::new(&env);
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ ((id.0 as u64) << 32));
    let mut timers: DelayQueue<P::Timer> = DelayQueue::new();
    let mut clients: FxHashMap<ClientId, ReplySender> = FxHashMap::default();
    let mut effects = Effects::<P>::default();
    {
        let mut ctx = Ctx::new(id, clock.now(), &mut rng, &mut effects);
        protocol.on_start(&mut ctx);
    }
    loop {
        flush(id, &mut effects, &net, &clients, &mut timers);
        tokio::select! {
            biased;
            input = inbox.recv() => {
                let mut ctx = Ctx::new(id, clock.now(), &mut rng, &mut effects);
                match input {
                    None | Some(Input::Stop) => break,
                    Some(Input::Client(request, reply_to)) => {
                        clients.entry(request.client).or_insert(reply_to);
                        deliver_client(&mut protocol, &mut ctx, request);
                    }
                    Some(Input::Peer(from, msg)) => protocol.on_message(&mut ctx, from, msg),
                }
            }
            Some(expired) = timers.next(), if !timers.is_empty() => {
                let mut ctx = Ctx::new(id, clock.now(), &mut rng, &mut effects);
                protocol.on_timer(&mut ctx, expired.into_inner());
            }
        }
    }
}

fn flush<P: Protocol>(
    id: NodeId,
    effects: &mut Effects<P>,
    net: &Arc<dyn PeerNet<P::Msg>>,
    clients: &FxHashMap<ClientId, ReplySender>,
    timers: &mut DelayQueue<P::Timer>,
) {
    for (to, msg) in effects.sends.drain(..) {
        net.send(id, to, msg);
    }
    for (client, response) in effects.replies.drain(..) {
        // A client that went away has nobody to tell; its transaction state is the protocol's.
        if let Some(tx) = clients.get(&client) {
            let _ = tx.send(response);
        }
    }
    for (after, timer) in effects.timers.drain(..) {
        timers.insert(timer, after);
    }
}

/// The in-process network: direct delivery for short delays, a FIFO delay line per link otherwise.
struct InProcessNet<P: Protocol> {
    inboxes: Vec<mpsc::UnboundedSender<Input<P>>>,
    /// `links[from][to]`: the delay line of a link whose latency is emulated.
    links: Vec<Vec<Option<DelayLine<P::Msg>>>>,
}

impl<P: Protocol> PeerNet<P::Msg> for InProcessNet<P> {
    fn send(&self, from: NodeId, to: NodeId, msg: P::Msg) {
        match &self.links[from.0 as usize][to.0 as usize] {
            Some((line, delay)) => {
                let _ = line.send((Instant::now() + *delay, from, msg));
            }
            None => {
                let _ = self.inboxes[to.0 as usize].send(Input::Peer(from, msg));
            }
        }
    }
}

/// A cluster whose nodes are tasks of this process.
pub struct LocalCluster<P: Protocol> {
    placement: Arc<Placement>,
    inboxes: Vec<mpsc::UnboundedSender<Input<P>>>,
    nodes: Vec<JoinHandle<()>>,
    lines: Vec<JoinHandle<()>>,
    next_client: AtomicU64,
    request_timeout: Duration,
}

impl<P: Protocol> LocalCluster<P> {
    /// Start every node of `placement` on the current tokio runtime.
    pub fn start(
        placement: Arc<Placement>,
        options: Arc<ProtocolOptions>,
        seed: u64,
        request_timeout: Duration,
    ) -> Self {
        let clock = RealClock::new();
        let n = placement.node_count();
        let (inboxes, receivers): (Vec<_>, Vec<_>) = (0..n)
            .map(|_| mpsc::unbounded_channel::<Input<P>>())
            .unzip();
        let mut lines = Vec::new();
        let mut links = Vec::with_capacity(n);
        for from in placement.nodes() {
            let mut row = Vec::with_capacity(n);
            for to in placement.nodes() {
                let delay = placement.one_way(from, to);
                if delay < MIN_EMULATED_DELAY {
                    row.push(None);
                    continue;
                }
                let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, NodeId, P::Msg)>();
                let inbox = inboxes[to.0 as usize].clone();
                lines.push(tokio::spawn(async move {
                    while let Some((at, from, msg)) = rx.recv().await {
                        tokio::time::sleep_until(at.into()).await;
                        if inbox.send(Input::Peer(from, msg)).is_err() {
                            break;
                        }
                    }
                }));
                row.push(Some((tx, delay)));
            }
            links.push(row);
        }
        let net: Arc<dyn PeerNet<P::Msg>> = Arc::new(InProcessNet::<P> {
            inboxes: inboxes.clone(),
            links,
        });
        let nodes = receivers
            .into_iter()
            .enumerate()
            .map(|(i, rx)| {
                let env = NodeEnv {
                    id: NodeId(i as u32),
                    placement: placement.clone(),
                    options: options.clone(),
                };
                tokio::spawn(run_node::<P>(env, seed, clock, rx, net.clone()))
            })
            .collect();
        LocalCluster {
            placement,
            inboxes,
            nodes,
            lines,
            next_client: AtomicU64::new(0),
            request_timeout,
        }
    }

    pub fn placement(&self) -> &Arc<Placement> {
        &self.placement
    }

    /// A new client session coordinated by `home`.
    pub fn connect(&self, home: NodeId) -> LocalTransport<P> {
        let client = ClientId(self.next_client.fetch_add(1, Ordering::Relaxed));
        let (reply_tx, reply_rx) = mpsc::unbounded_channel();
        LocalTransport {
            client,
            inbox: self.inboxes[home.0 as usize].clone(),
            reply_tx,
            replies: tokio::sync::Mutex::new(reply_rx),
            next_request: AtomicU64::new(0),
            timeout: self.request_timeout,
            origin: Instant::now(),
        }
    }

    /// Stop every node and wait for the tasks to end.
    pub async fn shutdown(self) {
        for inbox in &self.inboxes {
            let _ = inbox.send(Input::Stop);
        }
        for node in self.nodes {
            let _ = node.await;
        }
        for line in self.lines {
            line.abort();
        }
    }
}

/// A client session talking to a node of a [`LocalCluster`] (or of any runtime built on
/// [`run_node`]) through its inbox.
pub struct LocalTransport<P: Protocol> {
    client: ClientId,
    inbox: mpsc::UnboundedSender<Input<P>>,
    reply_tx: ReplySender,
    replies: tokio::sync::Mutex<mpsc::UnboundedReceiver<ClientResponse>>,
    next_request: AtomicU64,
    timeout: Duration,
    origin: Instant,
}

impl<P: Protocol> Transport for LocalTransport<P> {
    fn client_id(&self) -> ClientId {
        self.client
    }

    fn call(&self, op: ClientOp) -> BoxFuture<'_, Result<ClientReply, TransportError>> {
        Box::pin(async move {
            let id = RequestId(self.next_request.fetch_add(1, Ordering::Relaxed));
            let request = ClientRequest {
                client: self.client,
                id,
                op,
            };
            self.inbox
                .send(Input::Client(request, self.reply_tx.clone()))
                .map_err(|_| TransportError::Disconnected("node stopped".into()))?;
            let mut replies = self.replies.lock().await;
            let wait = async {
                // Replies to requests that timed out earlier may still arrive; skip them.
                while let Some(response) = replies.recv().await {
                    if response.id == id {
                        return Ok(response.reply);
                    }
                }
                Err(TransportError::Disconnected("node stopped".into()))
            };
            tokio::time::timeout(self.timeout, wait)
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

/// The sending end of one link's delay line and the link's one-way delay.
type DelayLine<M> = (mpsc::UnboundedSender<(Instant, NodeId, M)>, Duration);
