//! The real-time runtime on tokio: each node is one task that owns its protocol state machine and
//! handles one input at a time. [`LocalCluster`] runs every node of a cluster in one process and
//! carries messages through an in-process network that delays each one by the placement's
//! one-way latency; the TCP runtime reuses the same node loop with sockets underneath.

use crate::clock::RealClock;
use crate::wal::{self, LogConfig, NodeLog};
use crate::workers::WorkerPool;
use crate::{Held, HeldOutput};
use augur_client::{Transport, TransportError};
use augur_contract::forms::Procedures;
use augur_contract::{Ctx, Effects, NodeEnv, Protocol, ProtocolOptions, deliver_client};
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
use tracing::error;

/// Delays shorter than this are delivered at once: tokio's timers tick in milliseconds, so a
/// sub-millisecond delay could only be rounded up to a whole one, which would overstate LAN
/// latency five-fold. Over TCP, the real network supplies the delay.
pub const MIN_EMULATED_DELAY: Duration = Duration::from_millis(1);

/// The node loop reports its inbox depth every this many inputs (a gauge update is cheap, but
/// not free on every message).
const INBOX_SAMPLE: u64 = 256;

/// Where a node's replies to one client go.
pub type ReplySender = mpsc::UnboundedSender<ClientResponse>;

/// One input to a node task.
pub enum Input<P: Protocol> {
    Client(ClientRequest, ReplySender),
    /// The client will send no more requests (its connection closed): forget it.
    ClientGone(ClientId),
    Peer(NodeId, P::Msg),
    Stop,
}

/// The most inputs a node handles while holding back the peer messages they produced
/// ([`PeerNet::flush`]), so that a node kept busy still sends at least this often.
const FLUSH_EVERY: u32 = 16;

/// How a node's outgoing peer messages leave it.
pub trait PeerNet<M>: Send + Sync + 'static {
    fn send(&self, from: NodeId, to: NodeId, msg: M);

    /// Hand over what [`send`](PeerNet::send) may have held back. The node loop calls this
    /// whenever its inbox runs dry (and at least every `FLUSH_EVERY`, 16, inputs), so that a
    /// network that batches (TCP: one write for many messages) sees every message of a burst
    /// at once. A network that sends at once needs nothing here.
    fn flush(&self) {}
}

/// Run one node until it receives [`Input::Stop`] or its inbox closes. `protocol` is the node's
/// state as rebuilt from `log` ([`wal::open`]); what handlers persist is appended to `log`, and
/// their sends and replies are held until the log is durable up to those records.
pub async fn run_node<P: Protocol>(
    env: NodeEnv,
    seed: u64,
    clock: RealClock,
    protocol: P,
    log: NodeLog,
    mut inbox: mpsc::UnboundedReceiver<Input<P>>,
    net: Arc<dyn PeerNet<P::Msg>>,
) {
    let id = env.id;
    let (done_tx, mut done) = mpsc::unbounded_channel();
    let mut node = NodeLoop {
        id,
        protocol,
        log,
        held: HeldOutput::default(),
        timers: DelayQueue::new(),
        workers: match env.options.worker_threads() {
            Some(size) => WorkerPool::new(format!("augur-worker-n{}", id.0), size),
            None => WorkerPool::per_core(format!("augur-worker-n{}", id.0)),
        },
        done_tx,
        clients: FxHashMap::default(),
        net,
    };
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ ((id.0 as u64) << 32));
    let mut effects = Effects::<P>::default();
    let mut inputs = 0u64;
    // Inputs handled since the peer messages were last flushed.
    let mut unflushed = 0u32;
    {
        let mut ctx = Ctx::new(id, clock.now(), &mut rng, &mut effects);
        node.protocol.on_start(&mut ctx);
    }
    loop {
        node.after_handler(&mut effects);
        if let Err(e) = node.release_synced() {
            error!(node = %id, "stopping: {e}");
            // What was released before the failure is durable: let it leave.
            node.net.flush();
            return;
        }
        unflushed += 1;
        if unflushed >= FLUSH_EVERY || inbox.is_empty() {
            node.net.flush();
            unflushed = 0;
        }
        tokio::select! {
            biased;
            _ = node.log.progress() => {}
            // Finished work before new inputs: it may release what waiting inputs need (a
            // transaction's locks). The sender is the node's own (`done_tx`): this arm never
            // ends the loop.
            Some(result) = done.recv() => {
                let mut ctx = Ctx::new(id, clock.now(), &mut rng, &mut effects);
                node.protocol.on_timer(&mut ctx, result);
            }
            input = inbox.recv() => {
                inputs += 1;
                if inputs.is_multiple_of(INBOX_SAMPLE) {
                    crate::telemetry::inbox_depth(inbox.len());
                }
                let mut ctx = Ctx::new(id, clock.now(), &mut rng, &mut effects);
                match input {
                    None | Some(Input::Stop) => break,
                    Some(Input::Client(request, reply_to)) => {
                        node.clients.entry(request.client).or_insert(reply_to);
                        deliver_client(&mut node.protocol, &mut ctx, request);
                    }
                    Some(Input::ClientGone(client)) => {
                        node.clients.remove(&client);
                        node.protocol.on_client_gone(&mut ctx, client);
                    }
                    Some(Input::Peer(from, msg)) => node.protocol.on_message(&mut ctx, from, msg),
                }
            }
            Some(expired) = node.timers.next(), if !node.timers.is_empty() => {
                let mut ctx = Ctx::new(id, clock.now(), &mut rng, &mut effects);
                node.protocol.on_timer(&mut ctx, expired.into_inner());
            }
        }
    }
    // Stopping: the writer syncs what it was given when the log is dropped; what waited for
    // that sync may then leave.
    let NodeLoop {
        log,
        mut held,
        net,
        clients,
        ..
    } = node;
    drop(log);
    for h in held.take_all() {
        send_out(id, &net, &clients, h);
    }
    net.flush();
}

/// The state of one node task besides its protocol's inputs.
struct NodeLoop<P: Protocol> {
    id: NodeId,
    protocol: P,
    log: NodeLog,
    held: HeldOutput<P>,
    timers: DelayQueue<P::Timer>,
    /// Runs what handlers hand off ([`Ctx::offload`]); each result comes back on `done_tx`.
    workers: WorkerPool,
    done_tx: mpsc::UnboundedSender<P::Timer>,
    clients: FxHashMap<ClientId, ReplySender>,
    net: Arc<dyn PeerNet<P::Msg>>,
}

impl<P: Protocol> NodeLoop<P> {
    /// Carry out what a handler asked for: persist, set timers, and send or hold the rest.
    fn after_handler(&mut self, effects: &mut Effects<P>) {
        // Reported work is for the simulator's CPU model; here it took the time it took.
        effects.work = Default::default();
        for (after, timer) in effects.timers.drain(..) {
            self.timers.insert(timer, after);
        }
        for job in effects.offloads.drain(..) {
            let done = self.done_tx.clone();
            self.workers.submit(Box::new(move || {
                let (result, _work) = job();
                // The node may have stopped meanwhile: its results go with it.
                let _ = done.send(result);
            }));
        }
        if !effects.persist.is_empty() {
            self.log.append(&effects.persist);
            effects.persist.clear();
            if self.log.checkpoint_due() {
                self.log.checkpoint(&self.protocol);
            }
        }
        let sends = std::mem::take(&mut effects.sends);
        let replies = std::mem::take(&mut effects.replies);
        if sends.is_empty() && replies.is_empty() {
            return;
        }
        let waits = self.log.policy().waits();
        let synced = self.log.synced().unwrap_or(0);
        let end = self.log.end();
        if let Some(now) = self.held.admit(waits, synced, end, sends, replies) {
            send_out(self.id, &self.net, &self.clients, now);
        }
    }

    /// Send what waited for records that are now durable; an error if the log failed.
    fn release_synced(&mut self) -> Result<(), wal::LogError> {
        if self.held.is_empty() {
            return Ok(());
        }
        let synced = self.log.synced()?;
        for h in self.held.release(synced) {
            send_out(self.id, &self.net, &self.clients, h);
        }
        Ok(())
    }
}

fn send_out<P: Protocol>(
    id: NodeId,
    net: &Arc<dyn PeerNet<P::Msg>>,
    clients: &FxHashMap<ClientId, ReplySender>,
    held: Held<P>,
) {
    for (to, msg) in held.sends {
        net.send(id, to, msg);
    }
    for (client, response) in held.replies {
        // A client that went away has nobody to tell; its transaction state is the protocol's.
        if let Some(tx) = clients.get(&client) {
            let _ = tx.send(response);
        }
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
    /// Where every session's clock starts, so that the times recorded in one history by
    /// different sessions are comparable.
    origin: Instant,
}

impl<P: Protocol> LocalCluster<P> {
    /// Start every node of `placement` on the current tokio runtime, each with a log as `log`
    /// describes (a data directory becomes one subdirectory per node, `node-ID`; nodes recover
    /// from what is already there).
    pub fn start(
        placement: Arc<Placement>,
        options: Arc<ProtocolOptions>,
        seed: u64,
        request_timeout: Duration,
        log: &LogConfig,
        procedures: Procedures,
    ) -> Result<Self, wal::LogError> {
        let clock = RealClock::new();
        let n = placement.node_count();
        let mut recovered = Vec::with_capacity(n);
        for id in placement.nodes() {
            let env = NodeEnv {
                id,
                placement: placement.clone(),
                options: options.clone(),
                procedures: procedures.clone(),
            };
            let mut config = log.clone();
            if let wal::LogStorage::Dir(dir) = &log.storage {
                config.storage = wal::LogStorage::Dir(dir.join(format!("node-{}", id.0)));
            }
            let (protocol, node_log) = wal::open::<P>(&env, &config)?;
            recovered.push((env, protocol, node_log));
        }
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
            .zip(recovered)
            .map(|(rx, (env, protocol, log))| {
                tokio::spawn(run_node::<P>(
                    env,
                    seed,
                    clock,
                    protocol,
                    log,
                    rx,
                    net.clone(),
                ))
            })
            .collect();
        Ok(LocalCluster {
            placement,
            inboxes,
            nodes,
            lines,
            next_client: AtomicU64::new(0),
            request_timeout,
            origin: Instant::now(),
        })
    }

    pub fn placement(&self) -> &Arc<Placement> {
        &self.placement
    }

    /// A new client session coordinated by `home`.
    pub fn connect(&self, home: NodeId) -> LocalTransport<P> {
        let client = ClientId(self.next_client.fetch_add(1, Ordering::Relaxed));
        LocalTransport::new(
            client,
            self.inboxes[home.0 as usize].clone(),
            self.request_timeout,
            self.origin,
        )
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

impl<P: Protocol> LocalTransport<P> {
    /// A session of client `client` talking to the node whose inbox is `inbox`, its clock
    /// counting from `origin`.
    pub(crate) fn new(
        client: ClientId,
        inbox: mpsc::UnboundedSender<Input<P>>,
        request_timeout: Duration,
        origin: Instant,
    ) -> Self {
        let (reply_tx, reply_rx) = mpsc::unbounded_channel();
        LocalTransport {
            client,
            inbox,
            reply_tx,
            replies: tokio::sync::Mutex::new(reply_rx),
            next_request: AtomicU64::new(0),
            timeout: request_timeout,
            origin,
        }
    }

    /// The inbox of the node this session talks to.
    pub(crate) fn inbox(&self) -> &mpsc::UnboundedSender<Input<P>> {
        &self.inbox
    }
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
