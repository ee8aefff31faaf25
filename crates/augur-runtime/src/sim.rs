//! The deterministic simulator: every node of a cluster and every client in one thread, on virtual
//! time, with messages delayed by the placement's latency matrix.
//!
//! Determinism comes from three rules: events are ordered by (virtual time, insertion sequence);
//! client tasks are polled in FIFO wake-up order; every random choice (node RNGs, clock skews,
//! network jitter, client RNGs) is derived from the one seed. The same seed and the same protocol
//! code therefore replay the same history, byte for byte.
//!
//! # Traces
//!
//! A simulation can record what its nodes did, message by message: set [`SimConfig::trace`]
//! to record from the start (the nodes' first `on_start` included), or call
//! [`Simulation::record_trace`] to start later; read the result with [`Simulation::trace`] or
//! [`Simulation::take_trace`]. Recording is off by default and then costs one branch per
//! event: nothing is formatted.
//!
//! A [`Trace`] is a list of [`TraceEntry`]s: virtual time, node, and a [`TraceEvent`] whose
//! texts are the `Debug` renderings of the protocol's messages, timers and records, taken when
//! the event happened. [`Trace::render`] (or `Display`) prints one event per line:
//!
//! ```text
//!     33.760 n1  recv n0 Prepare { txn: T0.1, snapshot: ts(0.020), partitions: [...] }
//!     33.760 n1    persist Installed { txn: T0.1, snapshot: ts(0.020), ts: ts(0.021), ... }
//!     33.760 n1    send n0 Prepared { txn: T0.1, partition: PartitionId(1), ts: ts(0.021) }
//!     33.760 n1    hold 1 send until record 2 is synced
//!     33.860 n1  synced to record 2
//!     33.860 n1    release send n0 Prepared { txn: T0.1, partition: PartitionId(1), ts: ts(0.021) }
//! ```
//!
//! * The first column is virtual time since the start of the run in milliseconds, to the
//!   microsecond; the second the node.
//! * A handler's input starts at the left: `start` (first `on_start`), `restart` (after a
//!   crash), `recv FROM MSG`, `request cCLIENT#REQUEST OP`, `timer TIMER`. The effects it
//!   produced follow, indented, in this order: `persist RECORD` (appended to the node's log),
//!   `send TO MSG`, `reply cCLIENT#REQUEST REPLY`, `set-timer +MSms TIMER`, a `checkpoint` if
//!   the log took one, and `hold N sends and M replies until record R is synced` when they
//!   cannot leave yet: a handler's messages and replies wait until its records, and those of
//!   every earlier handler, are durable (see [`augur_contract::Effects`]). Without a `hold` line they
//!   left at once. Log records are numbered from the start of the node's log.
//! * `synced to record R` is a completed sync of a node's log; the `release send` and `release
//!   reply` lines after it are the held messages and replies that leave then, and at most one
//!   sync runs at a time, so records persisted meanwhile wait for the next (group commit).
//! * `crash: ...` says what a crash took (memory, unsynced records, held messages and
//!   replies) and how many durable records the node was rebuilt from; `lost FROM->TO MSG
//!   (CAUSE)` is a message lost to random loss (at the sender, indented, when it would have
//!   left), a partition, a down receiver or a crash of either end (at the receiver, when it
//!   would have arrived); `lost request ...` a client request that reached a down node; and
//!   `client cCLIENT#REQUEST timed out` a client that stopped waiting for a reply.
//! * In the texts, a `Timestamp(N)` near the simulator's clock epoch reads `ts(MS)`: that
//!   node-clock value in milliseconds since the start of the run (skew included), to the
//!   microsecond. Other timestamps (`Timestamp(0)`) are left as they are.
//!
//! [`Trace::without_idle_ticks`] leaves out periodic timers that fired only to set themselves
//! again (a garbage-collection tick with nothing to do), which otherwise fill long traces.
//!
//! ## Golden traces
//!
//! `augur-protocols` compares traces of short scripted scenarios with checked-in golden files
//! (`crates/augur-protocols/tests/golden_*.rs`, files under `tests/golden/`), so that a change
//! in the messages a protocol exchanges shows as a diff. When such a change is intended,
//! rewrite the golden files by running the test with `AUGUR_BLESS=1`, for instance
//! `AUGUR_BLESS=1 cargo test -p augur-protocols --test it golden_str::`, then review `git diff` of
//! the golden files like code before committing them.

mod cpu;
mod trace;

pub use cpu::{CPU_SETTINGS, CpuModel, CpuReport, InputKind, KindReport, WorkCosts};
pub use trace::{DropCause, Trace, TraceEntry, TraceEvent};

use crate::HeldOutput;
use crate::wal::{self, CheckpointSchedule, LogPolicy, MemoryLog};
use augur_client::{Transport, TransportError};
use augur_contract::forms::Procedures;
use augur_contract::inbound::{CheckMessage, Inbound, check_request};
use augur_contract::{Ctx, Effects, NodeEnv, Protocol, ProtocolOptions, deliver_client};
use augur_types::{ClientId, ClientOp, ClientReply, ClientRequest, ClientResponse, NodeId};
use augur_types::{Placement, RequestId, Timestamp};
use cpu::{CpuAccounts, NodeCpu};
use futures::future::BoxFuture;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rustc_hash::FxHashMap;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// Virtual time starts here rather than at zero so that timestamps look like real ones and a
/// negative clock skew never underflows.
const EPOCH_US: u64 = 1_000_000_000;

/// Settings of a simulation run.
#[derive(Clone, Debug)]
pub struct SimConfig {
    pub seed: u64,
    /// How long a client waits for a reply before giving up on the request.
    pub client_timeout: Duration,
    /// Each node's clock is offset by a fixed amount drawn uniformly from ±`max_clock_skew`.
    pub max_clock_skew: Duration,
    /// Extra delay drawn uniformly from `0..=jitter` for each message (per-link order is kept).
    pub jitter: Duration,
    /// One-way delay between a client and its coordinator. Never zero: a client retrying an
    /// instantly refused transaction must let virtual time advance, or it would spin forever
    /// at one instant.
    pub client_delay: Duration,
    /// How long one sync of a node's log takes (`log=always` and `log=batch`): what a handler
    /// persisted is lost if its node crashes sooner, and its messages wait that long.
    pub fsync_latency: Duration,
    /// A node checkpoints its log once this many bytes were appended since the last
    /// checkpoint (and twice the last checkpoint's size): small, so that runs exercise
    /// recovery from checkpoints.
    pub checkpoint_min_bytes: u64,
    /// Record a [`Trace`] from the start, the nodes' first `on_start` included (see
    /// [`Simulation::record_trace`] to start later).
    pub trace: bool,
    /// The procedures the nodes run one-shot transactions with.
    pub procedures: Procedures,
    /// The CPU model, if work takes virtual time (see [`CpuModel`]); without one, handlers take
    /// none.
    pub cpu: Option<CpuModel>,
}

impl SimConfig {
    pub fn new(seed: u64) -> SimConfig {
        SimConfig {
            seed,
            client_timeout: Duration::from_secs(5),
            max_clock_skew: Duration::ZERO,
            jitter: Duration::ZERO,
            client_delay: Duration::from_micros(20),
            fsync_latency: Duration::from_micros(100),
            checkpoint_min_bytes: 64 * 1024,
            trace: false,
            procedures: Procedures::none(),
            cpu: None,
        }
    }
}

/// One client request or reply, as seen at the client: the raw material of histories.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientEvent {
    /// Virtual time in microseconds since the start of the run.
    pub at_us: u64,
    pub client: ClientId,
    pub request: RequestId,
    pub kind: ClientEventKind,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ClientEventKind {
    Invoke(ClientOp),
    Complete(Result<ClientReply, TransportError>),
}

enum Event<P: Protocol> {
    Deliver {
        to: NodeId,
        from: NodeId,
        msg: P::Msg,
        /// The incarnations of both ends when the message was sent: a crash in between breaks
        /// the connection that carried it.
        incarnations: (u32, u32),
    },
    Request {
        to: NodeId,
        request: ClientRequest,
    },
    Timer {
        node: NodeId,
        timer: P::Timer,
        incarnation: u32,
    },
    Reply {
        client: ClientId,
        response: ClientResponse,
    },
    RequestTimeout {
        client: ClientId,
        request: RequestId,
    },
    Wake {
        waker: Waker,
    },
    /// Work a core of `node` started under the CPU model is over: its output leaves.
    WorkDone {
        node: NodeId,
        incarnation: u32,
        output: WorkOutput<P>,
    },
    /// A sync of `node`'s log, started by `incarnation`, reached log position `upto`.
    Synced {
        node: NodeId,
        incarnation: u32,
        upto: u64,
        /// How many records the log held up to `upto` (for traces).
        records: u64,
    },
}

/// What a node does once the CPU model's time for one piece of work is over.
enum WorkOutput<P: Protocol> {
    /// A handler's output, which waits for the log up to `upto` (`records` records).
    Handler {
        sends: Vec<(NodeId, P::Msg)>,
        replies: Vec<(ClientId, ClientResponse)>,
        timers: Vec<(Duration, P::Timer)>,
        offloads: Vec<augur_contract::Offload<P>>,
        upto: u64,
        records: u64,
    },
    /// A co-located client finished its work for a request, which now leaves for its node.
    ClientSend(ClientRequest),
}

/// An input waiting for a free core of its node, under the CPU model.
enum Job<P: Protocol> {
    Deliver {
        from: NodeId,
        msg: P::Msg,
    },
    Request(ClientRequest),
    Timer(P::Timer),
    ClientSend(ClientRequest),
    /// Work a handler handed off ([`Ctx::offload`]).
    Offloaded(augur_contract::Offload<P>),
}

impl<P: Protocol> Job<P> {
    fn kind(&self) -> InputKind {
        match self {
            Job::Deliver { .. } => InputKind::Message,
            Job::Request(_) => InputKind::Request,
            Job::Timer(_) => InputKind::Timer,
            Job::ClientSend(_) => InputKind::Client,
            Job::Offloaded(_) => InputKind::Worker,
        }
    }
}

struct Scheduled<E> {
    at: u64,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Scheduled<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<E> Eq for Scheduled<E> {}
impl<E> PartialOrd for Scheduled<E> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Scheduled<E> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

struct SimNode<P: Protocol> {
    protocol: P,
    rng: ChaCha8Rng,
    skew_us: i64,
    /// Bumped on restart so timers set by an earlier incarnation are ignored.
    incarnation: u32,
    up: bool,
    /// The node's disk: all that survives a crash.
    log: MemoryLog,
    policy: LogPolicy,
    checkpoints: CheckpointSchedule,
    /// Log position everything before which is synced.
    synced: u64,
    /// A sync is running (group commit: records appended meanwhile wait for the next one).
    syncing: bool,
    /// When the last sync started, for `batch`.
    last_sync_us: u64,
    /// Sends and replies waiting for the log to be synced up to a position, in handler order.
    held: HeldOutput<P>,
    /// Records appended to the log since it began (lost ones excepted), and how many of them
    /// are synced: traces name log positions by record count rather than by byte.
    records: u64,
    synced_records: u64,
    /// Under the CPU model: the node's cores, and the inputs waiting for one, in arrival order.
    cpu: NodeCpu,
    runnable: VecDeque<Job<P>>,
    /// While paused ([`Simulation::pause`]): everything addressed to the node, in order.
    stalled: Option<Vec<Event<P>>>,
}

/// The network faults in force.
struct NetworkFaults {
    /// Partition side of each node (`usize::MAX`: isolated); `None` when fully connected.
    side: Option<Vec<usize>>,
    loss: f64,
    spike_probability: f64,
    spike_max_us: u64,
    /// Extra delay on one direction of a link, µs ([`Simulation::slow_link`]).
    slow_links: BTreeMap<(NodeId, NodeId), u64>,
    fifo: bool,
    lost: u64,
    /// Probability that a message between nodes, or a client request, is altered in flight.
    forgery: f64,
    forged: ForgeryCounts,
}

/// How many alterations of one message [`Simulation::set_forgery`] tries before it lets the
/// original through.
const FORGERY_ATTEMPTS: usize = 8;

/// What altering messages in flight ([`Simulation::set_forgery`]) did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ForgeryCounts {
    /// Altered messages and requests that no longer decoded, or that the receiver's check
    /// refused: a real node drops these before any handler sees them.
    pub refused: u64,
    /// Altered ones that decoded and passed the checks, and were delivered.
    pub delivered: u64,
}

impl Default for NetworkFaults {
    fn default() -> Self {
        NetworkFaults {
            side: None,
            loss: 0.0,
            spike_probability: 0.0,
            spike_max_us: 0,
            slow_links: BTreeMap::new(),
            fifo: true,
            lost: 0,
            forgery: 0.0,
            forged: ForgeryCounts::default(),
        }
    }
}

/// State shared between the simulator and its client futures.
#[derive(Default)]
struct Shared {
    now_us: u64,
    outgoing: Vec<(NodeId, ClientRequest)>,
    sleeps: Vec<(u64, Waker)>,
    slots: FxHashMap<(ClientId, RequestId), Slot>,
    record: bool,
    events: Vec<ClientEvent>,
}

#[derive(Default)]
struct Slot {
    result: Option<Result<ClientReply, TransportError>>,
    waker: Option<Waker>,
}

type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

struct TaskWaker {
    id: usize,
    ready: Arc<Mutex<VecDeque<usize>>>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        let mut ready = self.ready.lock().expect("ready queue");
        if !ready.contains(&self.id) {
            ready.push_back(self.id);
        }
    }
}

/// A whole cluster and its clients under virtual time.
pub struct Simulation<P: Protocol> {
    config: SimConfig,
    env: Vec<NodeEnv>,
    placement: Arc<Placement>,
    nodes: Vec<SimNode<P>>,
    queue: BinaryHeap<Reverse<Scheduled<Event<P>>>>,
    seq: u64,
    now_us: u64,
    net_rng: ChaCha8Rng,
    seed_rng: ChaCha8Rng,
    /// Per directed link, the latest delivery time scheduled, to keep links FIFO under jitter.
    link_clock: FxHashMap<(NodeId, NodeId), u64>,
    shared: Arc<Mutex<Shared>>,
    tasks: Vec<Option<Task>>,
    wakers: Vec<Waker>,
    ready: Arc<Mutex<VecDeque<usize>>>,
    client_home: FxHashMap<ClientId, NodeId>,
    next_client: u64,
    messages_delivered: u64,
    network: NetworkFaults,
    /// Whether events are recorded in `trace`.
    tracing: bool,
    trace: Trace,
    /// What the CPU model charged, per kind of input.
    accounts: CpuAccounts,
}

impl<P: Protocol> Simulation<P> {
    pub fn new(
        placement: Arc<Placement>,
        options: Arc<ProtocolOptions>,
        config: SimConfig,
    ) -> Self {
        let mut seed_rng = ChaCha8Rng::seed_from_u64(config.seed);
        let max_skew = config.max_clock_skew.as_micros() as i64;
        let mut env = Vec::new();
        let mut nodes = Vec::new();
        for id in placement.nodes() {
            let e = NodeEnv {
                id,
                placement: placement.clone(),
                options: options.clone(),
                procedures: config.procedures.clone(),
            };
            let skew_us = if max_skew > 0 {
                seed_rng.random_range(-max_skew..=max_skew)
            } else {
                0
            };
            let policy = LogPolicy::from_options(&options, LogPolicy::Always)
                .unwrap_or_else(|e| panic!("simulation: {e}"));
            nodes.push(SimNode {
                protocol: P::new(&e),
                rng: ChaCha8Rng::seed_from_u64(seed_rng.random()),
                skew_us,
                incarnation: 0,
                up: true,
                log: MemoryLog::default(),
                policy,
                checkpoints: CheckpointSchedule::new(config.checkpoint_min_bytes),
                synced: 0,
                syncing: false,
                last_sync_us: 0,
                held: HeldOutput::default(),
                records: 0,
                synced_records: 0,
                cpu: NodeCpu::default(),
                runnable: VecDeque::new(),
                stalled: None,
            });
            env.push(e);
        }
        let net_rng = ChaCha8Rng::seed_from_u64(seed_rng.random());
        let tracing = config.trace;
        let mut sim = Simulation {
            config,
            env,
            placement,
            nodes,
            queue: BinaryHeap::new(),
            seq: 0,
            now_us: 0,
            net_rng,
            seed_rng,
            link_clock: FxHashMap::default(),
            shared: Arc::new(Mutex::new(Shared::default())),
            tasks: Vec::new(),
            wakers: Vec::new(),
            ready: Arc::new(Mutex::new(VecDeque::new())),
            client_home: FxHashMap::default(),
            next_client: 0,
            messages_delivered: 0,
            network: NetworkFaults::default(),
            tracing,
            trace: Trace::default(),
            accounts: CpuAccounts::default(),
        };
        for n in 0..sim.nodes.len() {
            sim.start_node(NodeId(n as u32), TraceEvent::Start);
        }
        sim
    }

    /// Keep every client request and reply (see [`Simulation::client_events`]).
    pub fn record_client_events(&mut self) {
        self.shared.lock().expect("shared").record = true;
    }

    pub fn client_events(&self) -> Vec<ClientEvent> {
        self.shared.lock().expect("shared").events.clone()
    }

    /// Record a node-level [`Trace`] from now on (see the module documentation). To include
    /// the nodes' first start, set [`SimConfig::trace`] instead.
    pub fn record_trace(&mut self) {
        self.tracing = true;
    }

    /// Whether a trace is being recorded.
    pub fn is_tracing(&self) -> bool {
        self.tracing
    }

    /// The trace recorded so far (empty when tracing is off).
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// Take the trace recorded so far, leaving an empty one; recording goes on.
    pub fn take_trace(&mut self) -> Trace {
        std::mem::take(&mut self.trace)
    }

    /// Record `event` at `node` now, if tracing; `event` is only built then.
    fn traced(&mut self, node: NodeId, event: impl FnOnce() -> TraceEvent) {
        if self.tracing {
            self.trace.entries.push(TraceEntry {
                at_us: self.now_us,
                node,
                event: event(),
            });
        }
    }

    pub fn placement(&self) -> &Arc<Placement> {
        &self.placement
    }

    /// Virtual time elapsed since the start of the run.
    pub fn elapsed(&self) -> Duration {
        Duration::from_micros(self.now_us)
    }

    pub fn messages_delivered(&self) -> u64 {
        self.messages_delivered
    }

    /// A fresh RNG for a client, derived from the run's seed.
    pub fn fork_rng(&mut self) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(self.seed_rng.random())
    }

    /// Read-only access to a node's protocol state (for tests and invariant checks).
    pub fn node(&self, id: NodeId) -> &P {
        &self.nodes[id.0 as usize].protocol
    }

    /// Start a client task whose coordinator is `home`. `body` receives the client's transport.
    pub fn spawn_client<F, Fut>(&mut self, home: NodeId, body: F) -> ClientId
    where
        F: FnOnce(SimTransport) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let client = ClientId(self.next_client);
        self.next_client += 1;
        self.client_home.insert(client, home);
        let transport = SimTransport {
            client,
            home,
            next_request: Arc::new(AtomicU64::new(0)),
            shared: self.shared.clone(),
        };
        let id = self.tasks.len();
        self.tasks.push(Some(Box::pin(body(transport))));
        let waker = Waker::from(Arc::new(TaskWaker {
            id,
            ready: self.ready.clone(),
        }));
        self.wakers.push(waker);
        self.ready.lock().expect("ready").push_back(id);
        client
    }

    /// Set `node`'s clock to run `offset_us` microseconds ahead (negative: behind) of virtual time.
    pub fn set_clock_offset(&mut self, node: NodeId, offset_us: i64) {
        self.nodes[node.0 as usize].skew_us = offset_us;
    }

    /// Crash `node`, as a power cut would: its memory is gone and so is whatever its log had
    /// not synced; messages and replies waiting for that sync never leave; its connections
    /// break (messages in flight to or from it are lost), and nothing reaches it until it is
    /// restarted. It comes back rebuilt from its durable log alone ([`Protocol::recover`]).
    pub fn crash(&mut self, node: NodeId) {
        let env = &self.env[node.0 as usize];
        let n = &mut self.nodes[node.0 as usize];
        if !n.up {
            return;
        }
        n.up = false;
        n.stalled = None;
        n.incarnation += 1;
        n.cpu.reset();
        n.runnable.clear();
        n.log.lose_pending();
        n.synced = n.log.end();
        n.syncing = false;
        let lost_records = n.records - n.synced_records;
        n.records = n.synced_records;
        let lost = n.held.take_all();
        let held_sends = lost.iter().map(|h| h.sends.len()).sum();
        let held_replies = lost.iter().map(|h| h.replies.len()).sum();
        // Rebuilt now rather than at restart: the node is down meanwhile, and this way nothing
        // of the old state can be reached even by mistake.
        let source = std::path::Path::new("simulated log");
        let (protocol, recovered_records) = wal::rebuild::<P>(env, n.log.durable_frames(), source)
            .unwrap_or_else(|e| panic!("node {node} cannot recover from its own log: {e}"));
        n.protocol = protocol;
        self.traced(node, || TraceEvent::Crash {
            lost_records,
            held_sends,
            held_replies,
            recovered_records,
        });
    }

    /// Freeze `node`, as a long garbage-collection pause or a suspended virtual machine would:
    /// it handles nothing — messages, client requests, timers, finished syncs and work — until
    /// [`Simulation::resume`], which hands it everything that waited, in arrival order. Its
    /// clock runs on; its connections stay up. A crash ends the pause (and loses what waited).
    pub fn pause(&mut self, node: NodeId) {
        let n = &mut self.nodes[node.0 as usize];
        if n.up && n.stalled.is_none() {
            n.stalled = Some(Vec::new());
            self.traced(node, || TraceEvent::Pause);
        }
    }

    /// Unfreeze a paused node: it handles what waited, oldest first, then goes on.
    pub fn resume(&mut self, node: NodeId) {
        let Some(stalled) = self.nodes[node.0 as usize].stalled.take() else {
            return;
        };
        self.traced(node, || TraceEvent::Resume {
            waited: stalled.len(),
        });
        for event in stalled {
            self.dispatch(event);
        }
    }

    /// Bring a crashed node back: it recovers from its durable state and starts again.
    pub fn restart(&mut self, node: NodeId) {
        let n = &mut self.nodes[node.0 as usize];
        if n.up {
            return;
        }
        n.up = true;
        self.start_node(node, TraceEvent::Restart);
    }

    pub fn is_up(&self, node: NodeId) -> bool {
        self.nodes[node.0 as usize].up
    }

    /// Cut the network into `groups`: a message between nodes of different groups is lost, as
    /// when a TCP connection breaks (messages already in flight across the cut are lost too).
    /// Nodes in no group are isolated. Clients keep reaching their coordinators.
    pub fn partition(&mut self, groups: &[Vec<NodeId>]) {
        let mut side = vec![usize::MAX; self.nodes.len()];
        for (g, nodes) in groups.iter().enumerate() {
            for n in nodes {
                side[n.0 as usize] = g;
            }
        }
        self.network.side = Some(side);
    }

    /// Remove any partition.
    pub fn heal(&mut self) {
        self.network.side = None;
    }

    /// Lose each message between nodes independently with `probability` (0 restores a reliable
    /// network). Only for protocols whose network model tolerates loss.
    pub fn set_message_loss(&mut self, probability: f64) {
        self.network.loss = probability.clamp(0.0, 1.0);
    }

    /// Give a `probability` fraction of messages an extra delay drawn uniformly from
    /// `0..=max_extra`: latency spikes. Links stay FIFO unless [`Simulation::set_fifo`] turns
    /// that off, so a spike also holds back what follows it on the link.
    pub fn set_delay_spikes(&mut self, probability: f64, max_extra: Duration) {
        self.network.spike_probability = probability.clamp(0.0, 1.0);
        self.network.spike_max_us = max_extra.as_micros() as u64;
    }

    /// Delay every message `from` sends `to` by `extra` on top of the link's latency, from now
    /// on (zero: back to normal), as a congested or rerouted path would; the other direction
    /// is unchanged. Links stay FIFO unless [`Simulation::set_fifo`] turns that off. A
    /// scenario uses it to hold back one message while the rest of the cluster moves on.
    pub fn slow_link(&mut self, from: NodeId, to: NodeId, extra: Duration) {
        if extra.is_zero() {
            self.network.slow_links.remove(&(from, to));
        } else {
            let extra = extra.as_micros() as u64;
            self.network.slow_links.insert((from, to), extra);
        }
    }

    /// Alter each message between two nodes, and each client request, with this probability:
    /// one or two of its encoded bytes are overwritten and it is decoded again. An alteration
    /// that no longer decodes or fails the receiver's check (`augur_contract::inbound`, and the request
    /// limits) is what a real node drops, so another is tried, and the first that passes is
    /// delivered. This is a lying peer, so nothing the protocol
    /// guarantees holds afterwards, except that no handler may panic: that is what it tests.
    pub fn set_forgery(&mut self, probability: f64) {
        self.network.forgery = probability;
    }

    /// What [`Simulation::set_forgery`] did so far.
    pub fn forgery_counts(&self) -> ForgeryCounts {
        self.network.forged
    }

    /// `original` with one or two of its encoded bytes overwritten: the first of up to
    /// [`FORGERY_ATTEMPTS`] such alterations that still decodes and that `accept` (the
    /// receiver's check) takes, or `original` itself when none does. Each alteration refused is
    /// counted, as a real node would have dropped it.
    fn forge<T: Serialize + DeserializeOwned>(
        &mut self,
        original: T,
        accept: impl Fn(&T) -> bool,
    ) -> T {
        let Ok(encoded) = postcard::to_stdvec(&original) else {
            return original;
        };
        if encoded.is_empty() {
            return original;
        }
        for _ in 0..FORGERY_ATTEMPTS {
            let mut bytes = encoded.clone();
            for _ in 0..self.net_rng.random_range(1..=2) {
                let at = self.net_rng.random_range(0..bytes.len());
                bytes[at] = self.net_rng.random();
            }
            match postcard::from_bytes::<T>(&bytes) {
                Ok(forged) if accept(&forged) => {
                    self.network.forged.delivered += 1;
                    return forged;
                }
                _ => self.network.forged.refused += 1,
            }
        }
        original
    }

    /// Whether each link delivers in send order (as TCP does). Off, messages overtake each other
    /// on a link when their delays differ.
    pub fn set_fifo(&mut self, fifo: bool) {
        self.network.fifo = fifo;
    }

    /// Messages lost to partitions, loss and crashes so far.
    pub fn messages_lost(&self) -> u64 {
        self.network.lost
    }

    fn connected(&self, a: NodeId, b: NodeId) -> bool {
        match &self.network.side {
            None => true,
            Some(side) => {
                side[a.0 as usize] == side[b.0 as usize] && side[a.0 as usize] != usize::MAX
            }
        }
    }

    fn start_node(&mut self, node: NodeId, input: TraceEvent) {
        let input = self.tracing.then_some(input);
        self.with_node(node, input, |p, ctx| p.on_start(ctx));
    }

    fn node_clock(&self, node: NodeId) -> Timestamp {
        let skew = self.nodes[node.0 as usize].skew_us;
        Timestamp((EPOCH_US + self.now_us).saturating_add_signed(skew))
    }

    fn schedule(&mut self, at: u64, event: Event<P>) {
        self.seq += 1;
        self.queue.push(Reverse(Scheduled {
            at,
            seq: self.seq,
            event,
        }));
    }

    /// Run a handler on `node` (if it is up) and carry out its effects; `input` is what the
    /// trace records as the handler's input (`None` when not tracing).
    fn with_node(
        &mut self,
        node: NodeId,
        input: Option<TraceEvent>,
        f: impl FnOnce(&mut P, &mut Ctx<'_, P>),
    ) {
        if let Some((incarnation, effects)) = self.handle(node, input, f) {
            self.apply(node, incarnation, effects);
        }
    }

    /// Run a handler on `node`, if it is up: the incarnation it ran in and its effects.
    fn handle(
        &mut self,
        node: NodeId,
        input: Option<TraceEvent>,
        f: impl FnOnce(&mut P, &mut Ctx<'_, P>),
    ) -> Option<(u32, Effects<P>)> {
        let now = self.node_clock(node);
        let mut effects = Effects::default();
        if !self.nodes[node.0 as usize].up {
            return None;
        }
        if let Some(input) = input {
            self.traced(node, || input);
        }
        let sim_ms = self.now_us / 1000;
        let n = &mut self.nodes[node.0 as usize];
        let incarnation = n.incarnation;
        let mut ctx = Ctx::new(node, now, &mut n.rng, &mut effects);
        // Every node's log lines in one stream: say whose they are, and when (simulated ms).
        let _span = tracing::info_span!("node", id = node.0, ms = sim_ms).entered();
        f(&mut n.protocol, &mut ctx);
        Some((incarnation, effects))
    }

    /// Hand `job` to `node`: at once without a CPU model, else when one of its cores is free
    /// (inputs wait their turn in arrival order).
    fn input(&mut self, node: NodeId, job: Job<P>) {
        if self.config.cpu.is_none() {
            return self.run_job(node, job);
        }
        self.nodes[node.0 as usize].runnable.push_back(job);
        self.run_waiting(node);
    }

    /// Under the CPU model: start the inputs waiting at `node`, oldest first, while it has a
    /// free core.
    fn run_waiting(&mut self, node: NodeId) {
        let cores = self.config.cpu.map_or(u32::MAX, |m| m.cores);
        loop {
            let n = &mut self.nodes[node.0 as usize];
            if n.cpu.busy >= cores {
                break;
            }
            let Some(job) = n.runnable.pop_front() else {
                break;
            };
            self.run_job(node, job);
        }
    }

    /// Handle `job` on `node` now; under the CPU model, on a core that is busy for its cost.
    fn run_job(&mut self, node: NodeId, job: Job<P>) {
        let kind = job.kind();
        let timing = self.config.cpu.map(|model| (model, Instant::now()));
        let tracing = self.tracing;
        let handled = match job {
            Job::Deliver { from, msg } => {
                let input = tracing.then(|| TraceEvent::Deliver {
                    from,
                    msg: format!("{msg:?}"),
                });
                self.handle(node, input, |p, ctx| p.on_message(ctx, from, msg))
            }
            Job::Request(request) => {
                let input = tracing.then(|| TraceEvent::Request {
                    client: request.client,
                    request: request.id,
                    op: format!("{:?}", request.op),
                });
                self.handle(node, input, |p, ctx| deliver_client(p, ctx, request))
            }
            Job::Timer(timer) => {
                let input = tracing.then(|| TraceEvent::Timer {
                    timer: format!("{timer:?}"),
                });
                self.handle(node, input, |p, ctx| p.on_timer(ctx, timer))
            }
            Job::ClientSend(request) => return self.client_work(node, request),
            Job::Offloaded(job) => return self.offloaded(node, job, timing),
        };
        let Some((incarnation, effects)) = handled else {
            return;
        };
        match timing {
            Some((model, started)) => {
                let measured = started.elapsed();
                self.start_work(node, incarnation, kind, effects, model, measured);
            }
            None => self.apply(node, incarnation, effects),
        }
    }

    /// Under the CPU model: put a handler's records in the log now, and its output on hold
    /// until a core of `node` has spent the handler's cost on it.
    fn start_work(
        &mut self,
        node: NodeId,
        incarnation: u32,
        kind: InputKind,
        effects: Effects<P>,
        model: CpuModel,
        measured: Duration,
    ) {
        let Effects {
            persist,
            sends,
            replies,
            timers,
            offloads,
            work,
        } = effects;
        if self.tracing {
            self.trace_effects(node, &persist, &sends, &replies, &timers);
        }
        self.append(node, persist);
        self.start_sync(node);
        let cost = model.cost(kind, work);
        self.accounts.record(kind, work, cost, measured);
        let n = &self.nodes[node.0 as usize];
        let output = WorkOutput::Handler {
            sends,
            replies,
            timers,
            offloads,
            upto: n.log.end(),
            records: n.records,
        };
        self.occupy_core(node, incarnation, cost, work.serial, output);
    }

    /// Take a core of `node` for `cost` (and `serial`, if any); `output` happens when it is
    /// over.
    fn occupy_core(
        &mut self,
        node: NodeId,
        incarnation: u32,
        cost: Duration,
        serial: Option<augur_contract::SerialResource>,
        output: WorkOutput<P>,
    ) {
        let end = self.nodes[node.0 as usize]
            .cpu
            .start(self.now_us, cost, serial);
        self.schedule(
            end,
            Event::WorkDone {
                node,
                incarnation,
                output,
            },
        );
    }

    /// Run work `node` handed off, and deliver its result as a timer: at once without a CPU
    /// model, else once a core has spent the work's cost on it. The job depends only on what it
    /// was handed and on the state its protocol shares with it, which nothing else touches
    /// while it runs here, so running it now keeps the simulation deterministic.
    fn offloaded(
        &mut self,
        node: NodeId,
        job: augur_contract::Offload<P>,
        timing: Option<(CpuModel, Instant)>,
    ) {
        let n = &self.nodes[node.0 as usize];
        if !n.up {
            return;
        }
        let (incarnation, upto, records) = (n.incarnation, n.log.end(), n.records);
        let (timer, work) = job();
        let timers = vec![(Duration::ZERO, timer)];
        let Some((model, started)) = timing else {
            return self.set_timers(node, incarnation, timers);
        };
        let cost = model.cost(InputKind::Worker, work);
        self.accounts
            .record(InputKind::Worker, work, cost, started.elapsed());
        let output = WorkOutput::Handler {
            sends: Vec::new(),
            replies: Vec::new(),
            timers,
            offloads: Vec::new(),
            upto,
            records,
        };
        self.occupy_core(node, incarnation, cost, work.serial, output);
    }

    /// Under the CPU model, a co-located client's own work for `request`, on a core of its
    /// home `node`, before the request leaves.
    fn client_work(&mut self, node: NodeId, request: ClientRequest) {
        let model = self
            .config
            .cpu
            .expect("client work is modelled only with a CPU model");
        let n = &mut self.nodes[node.0 as usize];
        if !n.up {
            // The client runs on the node: when the node is down, so is it.
            return self.traced(node, || TraceEvent::RequestDropped {
                client: request.client,
                request: request.id,
                op: format!("{:?}", request.op),
            });
        }
        let incarnation = n.incarnation;
        let output = WorkOutput::ClientSend(request);
        self.occupy_core(node, incarnation, model.cost.client, None, output);
    }

    /// A core of `node` finished its work: the work's output leaves, and the next waiting
    /// input gets the core.
    fn work_done(&mut self, node: NodeId, incarnation: u32, output: WorkOutput<P>) {
        let n = &mut self.nodes[node.0 as usize];
        if n.incarnation != incarnation || !n.up {
            // The node crashed meanwhile: the work's output is gone with its memory.
            return;
        }
        n.cpu.finish();
        match output {
            WorkOutput::Handler {
                sends,
                replies,
                timers,
                offloads,
                upto,
                records,
            } => {
                self.set_timers(node, incarnation, timers);
                self.emit(node, incarnation, sends, replies, upto, records);
                for job in offloads {
                    self.input(node, Job::Offloaded(job));
                }
            }
            WorkOutput::ClientSend(request) => {
                let at = self.now_us + self.client_delay_us();
                self.schedule(at, Event::Request { to: node, request });
            }
        }
        self.run_waiting(node);
    }

    fn set_timers(&mut self, node: NodeId, incarnation: u32, timers: Vec<(Duration, P::Timer)>) {
        for (after, timer) in timers {
            let at = self.now_us + after.as_micros() as u64;
            self.schedule(
                at,
                Event::Timer {
                    node,
                    timer,
                    incarnation,
                },
            );
        }
    }

    fn apply(&mut self, node: NodeId, incarnation: u32, effects: Effects<P>) {
        let Effects {
            persist,
            sends,
            replies,
            timers,
            offloads,
            work: _,
        } = effects;
        if self.tracing {
            self.trace_effects(node, &persist, &sends, &replies, &timers);
        }
        self.set_timers(node, incarnation, timers);
        self.append(node, persist);
        let n = &self.nodes[node.0 as usize];
        let (upto, records) = (n.log.end(), n.records);
        self.emit(node, incarnation, sends, replies, upto, records);
        for job in offloads {
            self.input(node, Job::Offloaded(job));
        }
    }

    /// Append a handler's records to `node`'s log, taking a checkpoint when one is due.
    fn append(&mut self, node: NodeId, persist: Vec<P::Record>) {
        let n = &mut self.nodes[node.0 as usize];
        if !persist.is_empty() {
            let frames = wal::encode_records(&persist);
            n.log.append(&frames);
            n.records += persist.len() as u64;
            if n.checkpoints.appended(frames.len() as u64) {
                let checkpoint = wal::encode_checkpoint(&n.protocol);
                n.checkpoints.taken(checkpoint.len() as u64);
                let bytes = checkpoint.len();
                n.log.checkpoint(checkpoint);
                self.traced(node, || TraceEvent::Checkpoint { bytes });
            }
        }
    }

    /// Send a handler's messages and replies, or hold them until the log is synced up to
    /// `upto` (`records` records).
    fn emit(
        &mut self,
        node: NodeId,
        incarnation: u32,
        sends: Vec<(NodeId, P::Msg)>,
        replies: Vec<(ClientId, ClientResponse)>,
        upto: u64,
        records: u64,
    ) {
        let n = &mut self.nodes[node.0 as usize];
        let (s, r) = (sends.len(), replies.len());
        if let Some(now) = n
            .held
            .admit(n.policy.waits(), n.synced, upto, sends, replies)
        {
            return self.release(node, incarnation, now.sends, now.replies);
        }
        let until_record = records;
        if s + r > 0 {
            self.traced(node, || TraceEvent::Hold {
                sends: s,
                replies: r,
                until_record,
            });
        }
        self.start_sync(node);
    }

    /// Trace a handler's effects, as it produced them.
    fn trace_effects(
        &mut self,
        node: NodeId,
        persist: &[P::Record],
        sends: &[(NodeId, P::Msg)],
        replies: &[(ClientId, ClientResponse)],
        timers: &[(Duration, P::Timer)],
    ) {
        for record in persist {
            self.traced(node, || TraceEvent::Persist {
                record: format!("{record:?}"),
            });
        }
        for (to, msg) in sends {
            self.traced(node, || TraceEvent::Send {
                to: *to,
                msg: format!("{msg:?}"),
            });
        }
        for (client, response) in replies {
            self.traced(node, || TraceEvent::Reply {
                client: *client,
                request: response.id,
                reply: format!("{:?}", response.reply),
            });
        }
        for (after, timer) in timers {
            self.traced(node, || TraceEvent::SetTimer {
                after: *after,
                timer: format!("{timer:?}"),
            });
        }
    }

    /// Start syncing `node`'s log if something is unsynced and no sync is running (under
    /// `batch`, no sooner than the interval after the last one).
    fn start_sync(&mut self, node: NodeId) {
        let n = &mut self.nodes[node.0 as usize];
        let end = n.log.end();
        if n.syncing || n.synced >= end || !n.policy.waits() {
            return;
        }
        let start = match n.policy {
            LogPolicy::Batch(every) => self.now_us.max(n.last_sync_us + every.as_micros() as u64),
            _ => self.now_us,
        };
        n.syncing = true;
        n.last_sync_us = start;
        let at = start + self.config.fsync_latency.as_micros() as u64;
        let incarnation = n.incarnation;
        let records = n.records;
        self.schedule(
            at,
            Event::Synced {
                node,
                incarnation,
                upto: end,
                records,
            },
        );
    }

    fn synced(&mut self, node: NodeId, incarnation: u32, upto: u64, records: u64) {
        let n = &mut self.nodes[node.0 as usize];
        if n.incarnation != incarnation {
            return;
        }
        n.log.sync(upto);
        n.synced = n.synced.max(upto);
        n.synced_records = n.synced_records.max(records);
        n.syncing = false;
        let ready = n.held.release(n.synced);
        self.traced(node, || TraceEvent::Synced { records });
        for held in ready {
            if self.tracing {
                for (to, msg) in &held.sends {
                    self.traced(node, || TraceEvent::ReleaseSend {
                        to: *to,
                        msg: format!("{msg:?}"),
                    });
                }
                for (client, response) in &held.replies {
                    self.traced(node, || TraceEvent::ReleaseReply {
                        client: *client,
                        request: response.id,
                        reply: format!("{:?}", response.reply),
                    });
                }
            }
            self.release(node, incarnation, held.sends, held.replies);
        }
        self.start_sync(node);
    }

    /// Put a handler's messages and replies on the network.
    fn release(
        &mut self,
        node: NodeId,
        incarnation: u32,
        sends: Vec<(NodeId, P::Msg)>,
        replies: Vec<(ClientId, ClientResponse)>,
    ) {
        for (to, msg) in sends {
            // Real runtimes drop a message that fails its check; a correct protocol never sends
            // one, and this is where a check that is too strict shows.
            let inbound = Inbound {
                me: to,
                from: node,
                placement: &self.placement,
            };
            if let Err(e) = msg.check(&inbound) {
                panic!("{node} sent {to} a message its own check refuses ({e}): {msg:?}");
            }
            let msg = if self.network.forgery > 0.0
                && to != node
                && self.net_rng.random_bool(self.network.forgery)
            {
                let placement = self.placement.clone();
                let inbound = Inbound {
                    me: to,
                    from: node,
                    placement: &placement,
                };
                self.forge(msg, |forged: &P::Msg| forged.check(&inbound).is_ok())
            } else {
                msg
            };
            // The loss draw happens only when loss is on, so enabling no fault leaves the random
            // sequence (and so every earlier seed's history) unchanged.
            if self.network.loss > 0.0 && to != node && self.net_rng.random_bool(self.network.loss)
            {
                self.network.lost += 1;
                self.traced(node, || TraceEvent::Dropped {
                    from: node,
                    to,
                    msg: format!("{msg:?}"),
                    cause: DropCause::Loss,
                });
                continue;
            }
            let mut at = self.now_us + self.placement.one_way(node, to).as_micros() as u64;
            if !self.config.jitter.is_zero() {
                at += self
                    .net_rng
                    .random_range(0..=self.config.jitter.as_micros() as u64);
            }
            if self.network.spike_probability > 0.0
                && self.net_rng.random_bool(self.network.spike_probability)
            {
                at += self.net_rng.random_range(0..=self.network.spike_max_us);
            }
            at += self
                .network
                .slow_links
                .get(&(node, to))
                .copied()
                .unwrap_or(0);
            if self.network.fifo {
                let last = self.link_clock.entry((node, to)).or_insert(0);
                at = at.max(*last);
                *last = at;
            }
            let incarnations = (incarnation, self.nodes[to.0 as usize].incarnation);
            self.schedule(
                at,
                Event::Deliver {
                    to,
                    from: node,
                    msg,
                    incarnations,
                },
            );
        }
        let client_delay = self.client_delay_us();
        for (client, response) in replies {
            self.schedule(
                self.now_us + client_delay,
                Event::Reply { client, response },
            );
        }
    }

    fn client_delay_us(&self) -> u64 {
        (self.config.client_delay.as_micros() as u64).max(1)
    }

    /// Poll every ready client task, then turn what they asked for into events.
    fn run_clients(&mut self) {
        // Under the CPU model, the real time client code takes here is measured: the
        // calibration of `cost.client` compares against it.
        let started = self.config.cpu.map(|_| Instant::now());
        loop {
            let next = self.ready.lock().expect("ready").pop_front();
            let Some(id) = next else { break };
            let Some(task) = self.tasks[id].as_mut() else {
                continue;
            };
            let mut cx = Context::from_waker(&self.wakers[id]);
            if task.as_mut().poll(&mut cx).is_ready() {
                self.tasks[id] = None;
            }
        }
        let (outgoing, sleeps) = {
            let mut sh = self.shared.lock().expect("shared");
            (
                std::mem::take(&mut sh.outgoing),
                std::mem::take(&mut sh.sleeps),
            )
        };
        if let Some(started) = started {
            self.accounts.client_time(started.elapsed());
        }
        let client_cost = self.config.cpu.map(|m| m.cost.client);
        for (to, request) in outgoing {
            let timeout_at = self.now_us + self.config.client_timeout.as_micros() as u64;
            self.schedule(
                timeout_at,
                Event::RequestTimeout {
                    client: request.client,
                    request: request.id,
                },
            );
            // A client's work is charged once per transaction attempt, at the request that
            // starts it: per operation it is about the same in both forms (the one-shot client
            // replays its copy of the procedure over the reply).
            let cost = client_cost.filter(|_| {
                matches!(
                    request.op,
                    ClientOp::Begin { .. } | ClientOp::Execute { .. }
                )
            });
            if let Some(cost) = cost {
                self.accounts.record(
                    InputKind::Client,
                    augur_contract::Work::default(),
                    cost,
                    Duration::ZERO,
                );
            }
            if cost.is_some_and(|c| !c.is_zero()) {
                self.input(to, Job::ClientSend(request));
            } else {
                self.schedule(
                    self.now_us + self.client_delay_us(),
                    Event::Request { to, request },
                );
            }
        }
        for (at, waker) in sleeps {
            self.schedule(at, Event::Wake { waker });
        }
    }

    /// Run until virtual time `elapsed` since the start (or until nothing is left to do).
    pub fn run_until(&mut self, elapsed: Duration) {
        let end = elapsed.as_micros() as u64;
        loop {
            self.run_clients();
            match self.queue.peek() {
                Some(Reverse(s)) if s.at <= end => {}
                _ => break,
            }
            let Reverse(Scheduled { at, event, .. }) = self.queue.pop().expect("peeked");
            self.now_us = at;
            self.shared.lock().expect("shared").now_us = at;
            self.dispatch(event);
        }
        self.now_us = self.now_us.max(end);
        self.shared.lock().expect("shared").now_us = self.now_us;
    }

    /// Run for `d` more virtual time.
    pub fn run_for(&mut self, d: Duration) {
        self.run_until(self.elapsed() + d);
    }

    /// What the CPU model charged so far, per kind of input, and each node's busy fraction
    /// (`None` without a CPU model).
    pub fn cpu_report(&self) -> Option<CpuReport> {
        let model = self.config.cpu?;
        let busy_us = self.nodes.iter().map(|n| n.cpu.busy_us).collect();
        Some(self.accounts.report(model, busy_us, self.now_us))
    }

    /// Run in steps of `step` until every client task has finished or virtual time `deadline`
    /// since the start has passed; whether they all finished.
    pub fn run_until_clients_done(&mut self, deadline: Duration, step: Duration) -> bool {
        while !self.clients_done() && self.elapsed() < deadline {
            self.run_for(step);
        }
        self.clients_done()
    }

    /// Whether every client task has finished.
    pub fn clients_done(&self) -> bool {
        self.tasks.iter().all(Option::is_none)
    }

    fn dispatch(&mut self, event: Event<P>) {
        let target = match &event {
            Event::Deliver { to, .. } | Event::Request { to, .. } => Some(*to),
            Event::Timer { node, .. } | Event::WorkDone { node, .. } => Some(*node),
            Event::Synced { node, .. } => Some(*node),
            Event::Reply { .. } | Event::RequestTimeout { .. } | Event::Wake { .. } => None,
        };
        if let Some(node) = target
            && let Some(stalled) = self.nodes[node.0 as usize].stalled.as_mut()
        {
            stalled.push(event);
            return;
        }
        match event {
            Event::Deliver {
                to,
                from,
                msg,
                incarnations,
            } => {
                let up = self.nodes[to.0 as usize].up;
                let alive = up
                    && incarnations
                        == (
                            self.nodes[from.0 as usize].incarnation,
                            self.nodes[to.0 as usize].incarnation,
                        );
                let connected = from == to || self.connected(from, to);
                if alive && connected {
                    self.messages_delivered += 1;
                    self.input(to, Job::Deliver { from, msg });
                } else {
                    self.network.lost += 1;
                    self.traced(to, || TraceEvent::Dropped {
                        from,
                        to,
                        msg: format!("{msg:?}"),
                        cause: if !up {
                            DropCause::Down
                        } else if !alive {
                            DropCause::Crashed
                        } else {
                            DropCause::Partition
                        },
                    });
                }
            }
            Event::Request { to, request } => {
                if !self.nodes[to.0 as usize].up {
                    self.traced(to, || TraceEvent::RequestDropped {
                        client: request.client,
                        request: request.id,
                        op: format!("{:?}", request.op),
                    });
                    return;
                }
                let mut request = request;
                if self.network.forgery > 0.0 && self.net_rng.random_bool(self.network.forgery) {
                    // The client's id and the request's are bound to its connection in real
                    // runtimes; only what it asks for can be forged.
                    request.op = self.forge(request.op, |op| check_request(op).is_ok());
                }
                self.input(to, Job::Request(request));
            }
            Event::Timer {
                node,
                timer,
                incarnation,
            } => {
                if self.nodes[node.0 as usize].incarnation == incarnation {
                    self.input(node, Job::Timer(timer));
                }
            }
            Event::Reply { client, response } => {
                self.complete(client, response.id, Ok(response.reply));
            }
            Event::RequestTimeout { client, request } => {
                let timeout = self.config.client_timeout;
                if self.complete(client, request, Err(TransportError::Timeout(timeout))) {
                    let home = self.client_home[&client];
                    self.traced(home, || TraceEvent::ClientTimeout { client, request });
                }
            }
            Event::Wake { waker } => waker.wake(),
            Event::WorkDone {
                node,
                incarnation,
                output,
            } => self.work_done(node, incarnation, output),
            Event::Synced {
                node,
                incarnation,
                upto,
                records,
            } => self.synced(node, incarnation, upto, records),
        }
    }

    /// Hand `result` to the client waiting for `request`; whether one was still waiting.
    fn complete(
        &mut self,
        client: ClientId,
        request: RequestId,
        result: Result<ClientReply, TransportError>,
    ) -> bool {
        let waker = {
            let mut sh = self.shared.lock().expect("shared");
            let Some(slot) = sh.slots.get_mut(&(client, request)) else {
                return false;
            };
            if slot.result.is_some() {
                return false;
            }
            let waker = slot.waker.take();
            if sh.record {
                let at_us = sh.now_us;
                sh.events.push(ClientEvent {
                    at_us,
                    client,
                    request,
                    kind: ClientEventKind::Complete(result.clone()),
                });
            }
            sh.slots.get_mut(&(client, request)).expect("slot").result = Some(result);
            waker
        };
        if let Some(w) = waker {
            w.wake();
        }
        true
    }
}

/// A client's transport inside the simulator.
pub struct SimTransport {
    client: ClientId,
    home: NodeId,
    next_request: Arc<AtomicU64>,
    shared: Arc<Mutex<Shared>>,
}

impl SimTransport {
    pub fn home(&self) -> NodeId {
        self.home
    }
}

impl Transport for SimTransport {
    fn client_id(&self) -> ClientId {
        self.client
    }

    fn call(&self, op: ClientOp) -> BoxFuture<'_, Result<ClientReply, TransportError>> {
        let id = RequestId(self.next_request.fetch_add(1, Ordering::Relaxed));
        let request = ClientRequest {
            client: self.client,
            id,
            op,
        };
        Box::pin(SimCall {
            transport: self,
            request: Some(request),
            id,
        })
    }

    fn now(&self) -> Duration {
        Duration::from_micros(self.shared.lock().expect("shared").now_us)
    }

    fn sleep(&self, d: Duration) -> BoxFuture<'_, ()> {
        let until = self.shared.lock().expect("shared").now_us + d.as_micros() as u64;
        Box::pin(SimSleep {
            shared: &self.shared,
            until,
            registered: false,
        })
    }
}

struct SimCall<'a> {
    transport: &'a SimTransport,
    request: Option<ClientRequest>,
    id: RequestId,
}

impl Future for SimCall<'_> {
    type Output = Result<ClientReply, TransportError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let key = (self.transport.client, self.id);
        let mut sh = self.transport.shared.lock().expect("shared");
        if let Some(request) = self.request.take() {
            if sh.record {
                let at_us = sh.now_us;
                sh.events.push(ClientEvent {
                    at_us,
                    client: request.client,
                    request: request.id,
                    kind: ClientEventKind::Invoke(request.op.clone()),
                });
            }
            sh.slots.insert(
                key,
                Slot {
                    result: None,
                    waker: Some(cx.waker().clone()),
                },
            );
            sh.outgoing.push((self.transport.home, request));
            return Poll::Pending;
        }
        let slot = sh.slots.get_mut(&key).expect("a pending call has a slot");
        match slot.result.take() {
            Some(result) => {
                sh.slots.remove(&key);
                Poll::Ready(result)
            }
            None => {
                slot.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl Drop for SimCall<'_> {
    fn drop(&mut self) {
        if self.request.is_none() {
            // A call abandoned before completion must not leave its slot behind; a completed
            // one already removed it.
            let key = (self.transport.client, self.id);
            if let Ok(mut sh) = self.transport.shared.lock()
                && sh.slots.get(&key).is_some_and(|s| s.result.is_none())
            {
                sh.slots.remove(&key);
            }
        }
    }
}

struct SimSleep<'a> {
    shared: &'a Arc<Mutex<Shared>>,
    until: u64,
    registered: bool,
}

impl Future for SimSleep<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut sh = self.shared.lock().expect("shared");
        if sh.now_us >= self.until {
            return Poll::Ready(());
        }
        if !self.registered {
            let until = self.until;
            sh.sleeps.push((until, cx.waker().clone()));
            drop(sh);
            self.registered = true;
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use augur_types::{LatencyProfile, TxnId};
    use serde::{Deserialize, Serialize};

    /// A toy protocol: a client request makes node 0 log it, ping node 1 and answer; node 1
    /// logs each ping and answers with a pong. Every node ticks every 10 ms and does nothing.
    struct Ping {
        id: NodeId,
    }

    #[derive(Clone, Debug, Serialize, Deserialize)]
    enum Msg {
        Ping(u32),
        Pong(u32),
    }

    impl augur_contract::inbound::CheckMessage for Msg {
        fn check(
            &self,
            _: &augur_contract::inbound::Inbound<'_>,
        ) -> Result<(), augur_contract::inbound::BadMessage> {
            Ok(())
        }
    }

    #[derive(Debug, Serialize, Deserialize)]
    enum Record {
        Got(u32),
    }

    #[derive(Debug)]
    enum Timer {
        Tick,
        /// Work handed off for a read-only `Begin` is done: answer it.
        Answer(ClientId, augur_types::RequestId),
    }

    impl Protocol for Ping {
        type Msg = Msg;
        type Timer = Timer;
        type Record = Record;

        fn new(env: &NodeEnv) -> Self {
            Ping { id: env.id }
        }

        fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
            ctx.set_timer(Duration::from_millis(10), Timer::Tick);
        }

        fn on_client(&mut self, ctx: &mut Ctx<'_, Self>, request: ClientRequest) {
            if let ClientOp::Begin {
                read_only: true, ..
            } = request.op
            {
                let (client, id) = (request.client, request.id);
                let work = augur_contract::Work {
                    steps: 1,
                    ..augur_contract::Work::default()
                };
                return ctx.offload(move || (Timer::Answer(client, id), work));
            }
            ctx.persist(Record::Got(request.id.0 as u32));
            ctx.send(NodeId(1), Msg::Ping(request.id.0 as u32));
            let reply = ClientReply::Begun {
                txn: TxnId::new(self.id, request.id.0 + 1),
                snapshot: ctx.now(),
            };
            ctx.reply(
                request.client,
                ClientResponse {
                    id: request.id,
                    reply,
                },
            );
        }

        fn on_message(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, msg: Msg) {
            if let Msg::Ping(n) = msg {
                ctx.persist(Record::Got(n));
                ctx.send(from, Msg::Pong(n));
            }
        }

        fn on_timer(&mut self, ctx: &mut Ctx<'_, Self>, timer: Timer) {
            match timer {
                Timer::Tick => ctx.set_timer(Duration::from_millis(10), timer),
                Timer::Answer(client, id) => {
                    let reply = ClientReply::Begun {
                        txn: TxnId::new(self.id, id.0 + 1),
                        snapshot: ctx.now(),
                    };
                    ctx.reply(client, ClientResponse { id, reply });
                }
            }
        }
    }

    fn sim(trace: bool) -> Simulation<Ping> {
        let profile = LatencyProfile::named("lan").unwrap();
        let placement = Arc::new(Placement::ring(profile, 2, 1).unwrap());
        let config = SimConfig {
            trace,
            ..SimConfig::new(1)
        };
        Simulation::new(placement, Arc::new(ProtocolOptions::default()), config)
    }

    /// With a CPU model: requests that arrive together at a node wait for a free core, and
    /// each reply leaves when its request's modelled work is over; work a handler hands off
    /// (`offloaded`, costed by the steps it reports) waits for a core the same way.
    #[test]
    fn the_cpu_model_queues_work_for_the_cores() {
        let replies_at = |cores: u32, offloaded: bool| {
            let profile = LatencyProfile::named("lan").unwrap();
            let placement = Arc::new(Placement::ring(profile, 2, 1).unwrap());
            let mut settings = std::collections::BTreeMap::new();
            settings.insert("cores".to_string(), cores.to_string());
            let (request, step) = if offloaded {
                ("0", "100")
            } else {
                ("100", "0")
            };
            settings.insert("cost.request".to_string(), request.to_string());
            settings.insert("cost.step".to_string(), step.to_string());
            for kind in ["message", "timer", "client"] {
                settings.insert(format!("cost.{kind}"), "0".to_string());
            }
            let config = SimConfig {
                cpu: CpuModel::from_settings(&settings).unwrap(),
                ..SimConfig::new(1)
            };
            let mut options = ProtocolOptions::default();
            options.settings.insert("log".into(), "off".into());
            let mut s = Simulation::<Ping>::new(placement, Arc::new(options), config);
            s.record_client_events();
            for _ in 0..3 {
                s.spawn_client(NodeId(0), move |t| async move {
                    let begin = ClientOp::Begin {
                        read_only: offloaded,
                        speculative: false,
                        trying_for_us: 0,
                    };
                    let _ = t.call(begin).await;
                });
            }
            s.run_until(Duration::from_millis(5));
            let report = s.cpu_report().unwrap();
            assert_eq!(report.inputs["request"].count, 3);
            if offloaded {
                assert_eq!(report.inputs["worker"].count, 3);
                assert_eq!(report.inputs["worker"].steps, 3);
            }
            let mut done: Vec<u64> = s
                .client_events()
                .iter()
                .filter(|e| matches!(e.kind, ClientEventKind::Complete(_)))
                .map(|e| e.at_us)
                .collect();
            done.sort();
            done
        };
        // Requests arrive at 20 µs; each takes 100 µs of a core; replies take 20 µs back.
        assert_eq!(replies_at(1, false), [140, 240, 340]);
        assert_eq!(replies_at(2, false), [140, 140, 240]);
        // Handed off, the three jobs queue for the core behind the requests, in order, and each
        // job's result (a timer input) queues behind the jobs already waiting: on one core all
        // three are answered after the last job, at 320 µs.
        assert_eq!(replies_at(1, true), [340, 340, 340]);
        assert_eq!(replies_at(2, true), [140, 140, 240]);
    }

    /// A client on node 0 sends two requests, 5 ms apart.
    fn spawn_client(s: &mut Simulation<Ping>) {
        s.spawn_client(NodeId(0), |t| async move {
            let begin = ClientOp::Begin {
                read_only: false,
                speculative: false,
                trying_for_us: 0,
            };
            let _ = t.call(begin.clone()).await;
            t.sleep(Duration::from_millis(5)).await;
            let _ = t.call(begin).await;
        });
    }

    #[test]
    fn a_trace_shows_inputs_effects_holds_and_releases() {
        let mut s = sim(true);
        spawn_client(&mut s);
        s.run_until(Duration::from_millis(12));
        let expected = r"
     0.000 n0  start
     0.000 n0    set-timer +10.000ms Tick
     0.000 n1  start
     0.000 n1    set-timer +10.000ms Tick
     0.020 n0  request c0#0 Begin { read_only: false, speculative: false, trying_for_us: 0 }
     0.020 n0    persist Got(0)
     0.020 n0    send n1 Ping(0)
     0.020 n0    reply c0#0 Begun { txn: T0.1, snapshot: ts(0.020) }
     0.020 n0    hold 1 send and 1 reply until record 1 is synced
     0.120 n0  synced to record 1
     0.120 n0    release send n1 Ping(0)
     0.120 n0    release reply c0#0 Begun { txn: T0.1, snapshot: ts(0.020) }
     0.220 n1  recv n0 Ping(0)
     0.220 n1    persist Got(0)
     0.220 n1    send n0 Pong(0)
     0.220 n1    hold 1 send until record 1 is synced
     0.320 n1  synced to record 1
     0.320 n1    release send n0 Pong(0)
     0.420 n0  recv n1 Pong(0)
     5.160 n0  request c0#1 Begin { read_only: false, speculative: false, trying_for_us: 0 }
     5.160 n0    persist Got(1)
     5.160 n0    send n1 Ping(1)
     5.160 n0    reply c0#1 Begun { txn: T0.2, snapshot: ts(5.160) }
     5.160 n0    hold 1 send and 1 reply until record 2 is synced
     5.260 n0  synced to record 2
     5.260 n0    release send n1 Ping(1)
     5.260 n0    release reply c0#1 Begun { txn: T0.2, snapshot: ts(5.160) }
     5.360 n1  recv n0 Ping(1)
     5.360 n1    persist Got(1)
     5.360 n1    send n0 Pong(1)
     5.360 n1    hold 1 send until record 2 is synced
     5.460 n1  synced to record 2
     5.460 n1    release send n0 Pong(1)
     5.560 n0  recv n1 Pong(1)
";
        let rendered = s.trace().without_idle_ticks().render();
        assert_eq!(rendered, expected[1..]);
        let ticks: Vec<String> = s.trace().entries()[rendered.lines().count()..]
            .iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(
            ticks,
            [
                "    10.000 n0  timer Tick",
                "    10.000 n0    set-timer +10.000ms Tick",
                "    10.000 n1  timer Tick",
                "    10.000 n1    set-timer +10.000ms Tick",
            ],
            "idle ticks are recorded, and left out by without_idle_ticks"
        );
    }

    #[test]
    fn a_trace_shows_crashes_lost_messages_and_timeouts() {
        let mut s = sim(false);
        s.record_trace();
        spawn_client(&mut s);
        s.spawn_client(NodeId(0), |t| async move {
            t.sleep(Duration::from_micros(500)).await;
            let _ = t.call(ClientOp::NodeStats).await;
        });
        s.run_until(Duration::from_micros(50));
        s.crash(NodeId(0));
        s.run_until(Duration::from_millis(1));
        s.restart(NodeId(0));
        s.partition(&[vec![NodeId(0)], vec![NodeId(1)]]);
        s.run_until(Duration::from_millis(5030));
        let rendered = s.trace().without_idle_ticks().render();
        let expected = r"
     0.020 n0  request c0#0 Begin { read_only: false, speculative: false, trying_for_us: 0 }
     0.020 n0    persist Got(0)
     0.020 n0    send n1 Ping(0)
     0.020 n0    reply c0#0 Begun { txn: T0.1, snapshot: ts(0.020) }
     0.020 n0    hold 1 send and 1 reply until record 1 is synced
     0.050 n0  crash: memory lost with 1 unsynced record, 1 held send, 1 held reply; rebuilt from 0 durable records
     0.520 n0  lost request c1#0 NodeStats (node down)
     1.000 n0  restart
     1.000 n0    set-timer +10.000ms Tick
  5000.000 n0  client c0#0 timed out
  5000.500 n0  client c1#0 timed out
  5005.020 n0  request c0#1 Begin { read_only: false, speculative: false, trying_for_us: 0 }
  5005.020 n0    persist Got(1)
  5005.020 n0    send n1 Ping(1)
  5005.020 n0    reply c0#1 Begun { txn: T0.2, snapshot: ts(5005.020) }
  5005.020 n0    hold 1 send and 1 reply until record 1 is synced
  5005.120 n0  synced to record 1
  5005.120 n0    release send n1 Ping(1)
  5005.120 n0    release reply c0#1 Begun { txn: T0.2, snapshot: ts(5005.020) }
  5005.220 n1  lost n0->n1 Ping(1) (partition)
";
        assert_eq!(rendered, expected[1..]);
        assert!(!s.take_trace().is_empty());
        assert!(s.trace().is_empty(), "taken");
    }

    #[test]
    fn nothing_is_recorded_unless_asked() {
        let mut s = sim(false);
        spawn_client(&mut s);
        s.run_until(Duration::from_millis(30));
        assert!(!s.is_tracing());
        assert!(s.trace().is_empty());
    }
}
