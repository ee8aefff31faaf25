use crate::forms::{INTERACTIVE_ONLY, Procedures, RequestForm};
use crate::inbound::CheckMessage;
use augur_types::{
    ClientId, ClientOp, ClientReply, ClientRequest, ClientResponse, NodeId, PartitionId, Placement,
    RequestError, Timestamp,
};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

/// Settings every protocol understands, plus protocol-specific `key=value` settings.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct ProtocolOptions {
    /// How long a coordinator waits for a participant before aborting with `Timeout`.
    pub participant_timeout: Duration,
    /// Versions older than this (relative to the node's clock) may be garbage-collected, unless a
    /// transaction the node coordinates still reads below it. A read whose snapshot is below the
    /// serving replica's watermark aborts with `SnapshotTooOld`.
    pub gc_retention: Duration,
    /// How often a node runs a bounded garbage-collection step.
    pub gc_interval: Duration,
    /// How long a transaction may sit idle at its coordinator before it is aborted.
    pub idle_txn_timeout: Duration,
    /// Protocol-specific settings (`--set protocol.KEY=VALUE`).
    pub settings: BTreeMap<String, String>,
    /// A deliberately broken variant to run instead of the protocol (`augur check --mutant`),
    /// used to show the checker catches the bug. Each protocol lists the mutants it knows.
    #[serde(default)]
    pub mutant: Option<String>,
}

/// The setting every protocol takes that sizes a node's worker pool, where
/// [`Ctx::offload`](crate::Ctx::offload)ed work runs in the real runtimes (`--set
/// protocol.worker_threads=N`); one thread per core when it is not given. The simulator models
/// cores instead (`sim.cores`).
pub const WORKER_THREADS_SETTING: &str = "worker_threads";

impl ProtocolOptions {
    /// The worker pool's size the options ask for ([`WORKER_THREADS_SETTING`]), if any.
    pub fn worker_threads(&self) -> Option<std::num::NonZeroUsize> {
        self.settings.get(WORKER_THREADS_SETTING)?.parse().ok()
    }
}

impl Default for ProtocolOptions {
    fn default() -> Self {
        ProtocolOptions {
            participant_timeout: Duration::from_secs(2),
            gc_retention: Duration::from_secs(5),
            gc_interval: Duration::from_millis(50),
            idle_txn_timeout: Duration::from_secs(10),
            settings: BTreeMap::new(),
            mutant: None,
        }
    }
}

/// What a node knows about itself and its cluster when it is created.
#[derive(Clone, Debug)]
pub struct NodeEnv {
    pub id: NodeId,
    pub placement: Arc<Placement>,
    pub options: Arc<ProtocolOptions>,
    /// The procedures one-shot transactions may name (see [`crate::forms`]).
    pub procedures: Procedures,
}

/// A concurrency-control protocol, as the state machine one node runs.
///
/// Handlers must be deterministic functions of the node's state, the input and the [`Ctx`]
/// (its clock reading and its RNG): iterate only over ordered or insertion-ordered collections
/// where order can change behaviour.
pub trait Protocol: Send + Sized + 'static {
    /// Messages between nodes running this protocol. A runtime checks each message it takes off
    /// a wire ([`CheckMessage`]) before a handler sees it.
    type Msg: Clone + Debug + Send + Serialize + DeserializeOwned + CheckMessage + 'static;
    /// Payloads of the timers this protocol sets.
    type Timer: Debug + Send + 'static;
    /// What the protocol writes to its node's write-ahead log ([`Ctx::persist`]) and rebuilds
    /// itself from after a crash ([`Protocol::recover`]).
    type Record: Debug + Send + Serialize + DeserializeOwned + 'static;

    /// The forms of client request it serves; a request of another form is refused with
    /// [`RequestError::UnsupportedForm`] before it reaches the protocol ([`deliver_client`]).
    const FORMS: &'static [RequestForm] = INTERACTIVE_ONLY;

    /// A node with empty state.
    fn new(env: &NodeEnv) -> Self;

    /// Rebuild a node from its durable records, in the order they were persisted: first the
    /// records of its newest checkpoint ([`Protocol::checkpoint`]), then every record persisted
    /// after it. Whatever is not rebuilt from them is lost in a crash: timers, coordination in
    /// flight, waiting requests. [`Protocol::on_start`] follows. The default, for protocols
    /// that persist nothing, starts empty.
    fn recover(env: &NodeEnv, records: &mut dyn Iterator<Item = Self::Record>) -> Self {
        records.for_each(drop);
        Self::new(env)
    }

    /// Emit records that rebuild this node's whole durable state on their own (replayed by
    /// [`Protocol::recover`] on an empty node), so the log before this point can be dropped.
    /// Called between two handlers. The default, for protocols that persist nothing, emits
    /// nothing.
    fn checkpoint(&self, _emit: &mut dyn FnMut(Self::Record)) {}

    /// Called once before any input, and again after every restart; a place to set periodic
    /// timers.
    fn on_start(&mut self, _ctx: &mut Ctx<'_, Self>) {}

    fn on_client(&mut self, ctx: &mut Ctx<'_, Self>, request: ClientRequest);

    fn on_message(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, msg: Self::Msg);

    fn on_timer(&mut self, ctx: &mut Ctx<'_, Self>, timer: Self::Timer);

    /// `client` is gone for good (its connection closed) and will send no more requests:
    /// forget what is kept for it alone (session state). Its open transactions are not touched
    /// here; they end as any idle transaction does. The default keeps nothing per client.
    fn on_client_gone(&mut self, _ctx: &mut Ctx<'_, Self>, _client: ClientId) {}

    /// Counters of what the protocol did on this node since it started (speculative reads,
    /// parked reads, cascading aborts...), by a stable snake_case name: running totals, except
    /// that names beginning with `largest_` are maxima. Runtimes answer [`ClientOp::NodeStats`]
    /// with them; the default keeps none.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// What the node still keeps for transactions that should have ended, by a stable
    /// snake_case name: once every client has stopped and the network has been calm for long
    /// enough that every retry and timeout has fired, each count must be zero. `augur check`
    /// asserts that after its liveness phase (its *quiescence* check), so a protocol whose
    /// bookkeeping can leak (an entry nobody removes, a writer held for a reader that ended)
    /// says here what to look at. The default keeps nothing that could leak.
    fn leftovers(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// The node this node believes leads the ordering of transactions (the Raft leader of a
    /// protocol with a sequencer), for the faults that target it (`augur check`'s
    /// `leader-crash`). `None` for a protocol with no leader, or while none is known.
    fn leader(&self) -> Option<NodeId> {
        None
    }

    /// The node this node believes masters `partition` now, for the faults that target it
    /// (`augur check`'s `master-crash`). `None` for a protocol without masters that fail over,
    /// or while the node does not know.
    fn master_of(&self, _partition: PartitionId) -> Option<NodeId> {
        None
    }

    /// A digest of the committed state of each partition this node replicates, equal at two
    /// replicas that hold the same state, for checks that replicas agree once the cluster is
    /// left alone (`augur check`). Empty for a protocol whose replicas may rightly differ at
    /// rest, or that does not say.
    fn state_digests(&self) -> Vec<(PartitionId, u64)> {
        Vec::new()
    }
}

/// Hand a client request to `protocol`, answering [`ClientOp::NodeStats`] on its behalf and
/// refusing a request of a form it does not serve ([`Protocol::FORMS`]): every runtime delivers
/// client requests through here, so protocols never see those.
pub fn deliver_client<P: Protocol>(protocol: &mut P, ctx: &mut Ctx<'_, P>, request: ClientRequest) {
    if let Some(form) = RequestForm::of(&request.op)
        && !P::FORMS.contains(&form)
    {
        let response = ClientResponse {
            id: request.id,
            reply: ClientReply::Rejected(RequestError::UnsupportedForm(form.to_string())),
        };
        ctx.reply(request.client, response);
        return;
    }
    if let ClientOp::NodeStats = request.op {
        let counters = protocol
            .counters()
            .into_iter()
            .map(|(name, n)| (name.to_string(), n))
            .collect();
        let response = ClientResponse {
            id: request.id,
            reply: ClientReply::NodeStats(counters),
        };
        ctx.reply(request.client, response);
        return;
    }
    protocol.on_client(ctx, request);
}

/// The effects one handler invocation asked for; the runtime carries them out afterwards.
///
/// Records in `persist` are appended to the node's log first. The sends and replies of this
/// handler — and of every later one — leave the node only once the log is durable up to those
/// records, so nothing outside the node ever depends on state a crash could take back.
/// Timers are internal and are set at once; so is offloaded work ([`Ctx::offload`]).
pub struct Effects<P: Protocol> {
    pub persist: Vec<P::Record>,
    pub sends: Vec<(NodeId, P::Msg)>,
    pub replies: Vec<(ClientId, ClientResponse)>,
    pub timers: Vec<(Duration, P::Timer)>,
    /// Work handed off the node's handler thread, in the order it was handed off.
    pub offloads: Vec<Offload<P>>,
    /// The work the handler reported ([`Ctx::charge`]), for the simulator's CPU model.
    pub work: Work,
}

/// What a handler reports it did, beyond handling its input, for the simulator's CPU model
/// (the simulator's `CpuModel`), which turns it into time a core is busy. The real runtimes
/// ignore it: there the work takes the time it takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// Versions read from the store (a read served, a key certified against).
    pub reads: u32,
    /// Versions written to the store (installed, prepared or made visible).
    pub writes: u32,
    /// Steps a one-shot procedure took while running at this node: one per read it issued
    /// (or request it sent, when it runs through a session) and one for its end or commit;
    /// its writes ride with the commit ([`crate::driver::Run::steps`]).
    pub steps: u32,
    /// The serial resource the work must hold, if any (see [`SerialResource`]).
    pub serial: Option<SerialResource>,
}

impl Work {
    /// `n` versions read.
    pub fn reads(n: usize) -> Work {
        Work {
            reads: n.try_into().unwrap_or(u32::MAX),
            ..Work::default()
        }
    }

    /// `n` versions written.
    pub fn writes(n: usize) -> Work {
        Work {
            writes: n.try_into().unwrap_or(u32::MAX),
            ..Work::default()
        }
    }

    /// Work that holds `resource` while it runs.
    pub fn on(resource: SerialResource) -> Work {
        Work {
            serial: Some(resource),
            ..Work::default()
        }
    }

    /// `self` and `other` together (a wrapped protocol's work added to its wrapper's).
    pub fn plus(self, other: Work) -> Work {
        Work {
            reads: self.reads.saturating_add(other.reads),
            writes: self.writes.saturating_add(other.writes),
            steps: self.steps.saturating_add(other.steps),
            serial: self.serial.or(other.serial),
        }
    }
}

/// Work a handler hands off the node's handler thread ([`Ctx::offload`]): a side-effect-free
/// computation over what it owns (a procedure run over the values it was given) that returns
/// the timer to deliver its result with, and the work it did (for the simulator's CPU model).
pub type Offload<P> = Box<dyn FnOnce() -> (<P as Protocol>::Timer, Work) + Send>;

/// A resource of a node that one handler at a time may use, whatever the number of cores: a
/// lock manager's thread, a partition's single executor. The CPU model runs work that names
/// one only once the previous work on it has finished. Protocols number their own resources.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SerialResource(pub u32);

impl<P: Protocol> Default for Effects<P> {
    fn default() -> Self {
        Effects {
            persist: Vec::new(),
            sends: Vec::new(),
            replies: Vec::new(),
            timers: Vec::new(),
            offloads: Vec::new(),
            work: Work::default(),
        }
    }
}

/// The handler's window on the world: time, randomness, and effect collection.
pub struct Ctx<'a, P: Protocol> {
    id: NodeId,
    now: Timestamp,
    rng: &'a mut ChaCha8Rng,
    effects: &'a mut Effects<P>,
}

impl<'a, P: Protocol> Ctx<'a, P> {
    /// Runtimes build contexts; tests of single handlers may too.
    pub fn new(
        id: NodeId,
        now: Timestamp,
        rng: &'a mut ChaCha8Rng,
        effects: &'a mut Effects<P>,
    ) -> Self {
        Ctx {
            id,
            now,
            rng,
            effects,
        }
    }

    /// The node running the handler.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The node's physical clock when this input was handed over. Monotonic per node; loosely
    /// synchronised across nodes (the simulator can skew it).
    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// The node's seeded random number generator.
    pub fn rng(&mut self) -> &mut ChaCha8Rng {
        self.rng
    }

    /// Make `record` durable before any message or reply of this handler leaves the node (see
    /// [`Effects`]). Records are replayed, in order, by [`Protocol::recover`].
    pub fn persist(&mut self, record: P::Record) {
        self.effects.persist.push(record);
    }

    /// Send `msg` to `to` (which may be this node: it is then delivered as a later input).
    pub fn send(&mut self, to: NodeId, msg: P::Msg) {
        self.effects.sends.push((to, msg));
    }

    /// Answer a client request.
    pub fn reply(&mut self, client: ClientId, response: ClientResponse) {
        self.effects.replies.push((client, response));
    }

    /// Call `on_timer(timer)` after `after` (measured on this node's clock).
    pub fn set_timer(&mut self, after: Duration, timer: P::Timer) {
        self.effects.timers.push((after, timer));
    }

    /// Run `job` off the node's handler thread and deliver the timer it returns as an input
    /// ([`Protocol::on_timer`]) once it is done: CPU-heavy work (a procedure run over the
    /// values it was handed) that may run in parallel with the node's handlers and with other
    /// jobs. Its only side effects may be on state the protocol shares with its jobs behind a
    /// lock, each change one that the handler could have made at any moment between handing
    /// the job off and taking its result. The real runtimes run it on the node's worker pool,
    /// so two jobs handed off one after the other may finish in either order; the simulator
    /// runs it when it is handed off (its changes to shared state land then, deterministically)
    /// and delivers its result once a core of the CPU model has spent the job's cost on it,
    /// as a new input waiting its turn. Like a timer, a job in flight is lost in a crash.
    pub fn offload(&mut self, job: impl FnOnce() -> (P::Timer, Work) + Send + 'static) {
        self.effects.offloads.push(Box::new(job));
    }

    /// Report work this handler did (reads and writes of the store, procedure steps), or the
    /// serial resource it runs on, to the simulator's CPU model (see [`Work`]). Costs nothing
    /// in the real runtimes.
    pub fn charge(&mut self, work: Work) {
        self.effects.work = self.effects.work.plus(work);
    }

    /// A context for a protocol `Q` this one wraps, with the same clock reading and RNG,
    /// collecting into `effects`.
    pub fn for_inner<'b, Q>(&'b mut self, effects: &'b mut Effects<Q>) -> Ctx<'b, Q>
    where
        Q: Protocol<Msg = P::Msg, Timer = P::Timer, Record = P::Record>,
    {
        Ctx::new(self.id, self.now, self.rng, effects)
    }

    /// Take on the effects a wrapped protocol's handler asked for, in order.
    pub fn absorb<Q>(&mut self, effects: Effects<Q>)
    where
        Q: Protocol<Msg = P::Msg, Timer = P::Timer, Record = P::Record>,
    {
        self.effects.persist.extend(effects.persist);
        self.effects.sends.extend(effects.sends);
        self.effects.replies.extend(effects.replies);
        self.effects.timers.extend(effects.timers);
        self.effects.offloads.extend(effects.offloads);
        self.effects.work = self.effects.work.plus(effects.work);
    }
}
