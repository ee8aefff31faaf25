//! `rococo`: ROCOCO (Mu, Nguyen, Lloyd, Li, "Extracting More Concurrency from Distributed
//! Transactions", OSDI 2014), one of the baselines SSS is measured against (Kishi, Peluso,
//! Korth, Palmieri, ICDCS 2019, §V, Figs. 6 and 8: every piece deferrable, read-only
//! transactions in rounds, replication disabled).
//!
//! **Guarantee: strict serializability** (ROCOCO §3–§4). The checker verifies histories at
//! `IsolationLevel::StrictSerializable`.
//!
//! # ROCOCO on augur
//!
//! ROCOCO runs a transaction as *pieces*, one per server it touches, in two phases (ROCOCO §3):
//! a *start* phase in which every server records the piece and answers with the conflicting
//! pieces it holds (its dependencies), and a *commit* phase in which the coordinator sends the
//! aggregated dependencies and every server executes its piece once the pieces ordered before
//! it have executed there. Every replica of every partition a transaction touches holds a piece
//! and acts as a ROCOCO server (ROCOCO replicates pieces by Paxos instead; SSS disables it).
//!
//! ## One-shot transactions: ROCOCO's reordering (ROCOCO §3.2–§3.3)
//!
//! A one-shot request (`ClientOp::Execute`) carries the whole transaction, so it runs the
//! ROCOCO way, with every piece *deferrable* (as SSS configures ROCOCO): no read happens
//! before the commit phase, and no conflict aborts anything.
//!
//! * **Pieces.** ROCOCO knows each transaction's pieces in advance; augur's procedures are
//!   code. The coordinator runs the procedure once over absent values (a dry run, no messages)
//!   to learn the keys it reads and writes; when that run of a read-write procedure stops
//!   early (a rollback), the keys it read are declared written too. Each replica of each key gets a piece: the keys it reads
//!   and may write there.
//! * **Start phase.** A node persists the piece, records it pending and answers its
//!   dependencies: *every* pending piece it conflicts with (read-write, write-read,
//!   write-write). Nothing is refused, so the dependency graph may have cycles.
//! * **Commit phase.** The coordinator persists its decision (the union of the answers, and
//!   the procedure's call) and sends the dependencies. A node executes a piece when every
//!   conflicting piece pending there that comes *before* it has executed: an ancestor outside
//!   its strongly connected component (SCC), or a member of its SCC with a smaller transaction
//!   id. Every node orders the members of a cycle by id, so all order them alike. To know the
//!   SCC, a node walks the piece's ancestors over their aggregated dependencies (final once
//!   committed): it waits until every ancestor is committed, and for an ancestor with no piece
//!   there it *inquires* the ancestor's coordinator (`Inquire`), which answers its
//!   dependencies, its SCC once it executed everywhere, or that it knows nothing of it
//!   (aborted). The walk stops at pieces executed at the node (had one shared the SCC, its
//!   turn would have recorded the SCC in the pending members, `Piece::component`), and at
//!   ancestors finished everywhere (their SCC is reported).
//! * **Execution, and where ROCOCO differs.** In ROCOCO a deferrable piece executes whole at
//!   its server, with its inputs in hand. A procedure's writes here may depend on reads at
//!   other nodes (`bank`'s transfer writes both accounts from both balances), so a piece's
//!   turn is split: at its turn the node sends the coordinator what the piece's keys hold
//!   (`PieceRead`) and keeps the piece pending (conflicting pieces after it keep waiting); once
//!   every key was read at its turn, the coordinator runs the procedure over those values and
//!   sends each node its writes (`Install`); the node installs them and the piece ends. A node
//!   whose writes arrive before its turn (another replica read the keys) installs them at its
//!   turn. This holds a piece's keys for one round trip to the coordinator, which ROCOCO does
//!   not; the order of execution is ROCOCO's. A procedure that rolls back writes nothing (its
//!   client is told `UserRollback`); one that, over the real values, reads or writes a key
//!   its pieces did not declare writes nothing: its keys depend on what it reads, which
//!   pieces cannot express, and it is answered `RequestError::NotOneShot` naming it, on which
//!   the client runs it interactively (below), as every later one of its type. None of
//!   `ycsb-t`, `list-append`, `rw-register`, `bank` is: their keys come from arguments. Most
//!   of `rubis`'s and `tpcc`'s are (an item's seller, the bids an index page lists, a counter's
//!   next id).
//! * **Read-only one-shot transactions (ROCOCO §3.4)** read their keys (dry run) in rounds at
//!   the nearest replicas, each read waiting for the pending writers of its key, until two
//!   consecutive rounds return the same versions (at most `MAX_READ_ROUNDS` (4), then
//!   `ValidationFailed`); one key needs one round. Over the values read, a run that reads a
//!   key the rounds did not is answered `NotOneShot`, as above.
//! * The coordinator answers the client once every node executed, with the reads (values at
//!   execution) and writes of the procedure's run.
//!
//! ## Interactive transactions: validated reads, conflicts refused
//!
//! An interactive client reads before any piece exists, so its reads cannot be deferred. They
//! are performed at the nearest replica, each waiting until no pending piece writes the key,
//! and the start phase *validates* them. A node refuses an interactive piece (the transaction
//! aborts before anything executes) when a key it read no longer has the version read or a
//! pending piece writes it; when a key it writes is read by another pending piece or written by
//! a pending one-shot piece (`ValidationFailed`); or when a key it writes is written by a
//! pending interactive piece of a younger transaction (`WaitDie`; the age is the one its client
//! claims, so a retry keeps its first attempt's). Its dependencies are the
//! pending pieces writing its keys; it executes (installing its writes) once none is pending.
//! Read-only interactive transactions re-read their versions in a second round at commit and
//! abort when it disagrees (the client holds the first round's values: two rounds at most).
//!
//! **Both forms at one node.** An interactive piece's in-edges come only from older
//! interactive pieces (everything else conflicting and pending refuses it), so no cycle passes
//! through one: its SCC is itself and it needs no walk.
//!
//! **Why it is strictly serializable.** Conflicting pieces execute in one order at every
//! node: a pair pending together at a node has an edge there, and every node orders the pair
//! by the same rule on the same final graph (SCC, then id). That order (SCCs in topological
//! order, ids within one) is acyclic, so waiting never deadlocks and the transactions are
//! serializable in it; a transaction answers only after executing everywhere, and one that
//! starts after another finished cannot be ordered before it (no piece of the earlier is
//! pending anywhere any more). Interactive reads stay the newest versions until the piece
//! executes (writers of a key read by a pending piece are refused or ordered after it).
//! Read-only transactions: between two agreeing rounds every key kept the version read.
//!
//! **Left out:** immediate pieces and ROCOCO's offline classification of pieces (every piece is
//! deferrable here, as in SSS's benchmark); execution of a piece entirely at its server (see
//! above); ordering of interactive transactions' read-write conflicts (refused instead);
//! Paxos replication of pieces. A coordinator remembers a finished transaction's SCC for
//! `FINISHED_RETENTION_FACTOR` (4) × `gc_retention`; a node that asks about an ancestor later
//! than that is told nothing and skips it, which could misorder a cycle only if that node had
//! been cut off for that long while a member of the cycle waited there.
//!
//! # Failures
//!
//! Links may lose and reorder messages, partitions heal, nodes crash and restart:
//!
//! * **Durable state** ([`Record`]): a node persists a piece before accepting it (`Started`,
//!   `StartedDeferred`), and its execution with the writes installed (`Executed`) or its abort
//!   (`Aborted`); the coordinator persists its decision with the aggregated dependencies and a
//!   one-shot transaction's call (`Decided`) before sending it, the writes it computed
//!   (`Computed`) before sending them, and the transaction's SCC once every node executed
//!   (`Finished`). Replaying `Started` records in log order rebuilds the pending lists and
//!   each piece's local dependencies as they were. Which SCC a pending piece belongs to, what
//!   inquiries taught, and which pieces ended here are volatile: lost together, the walk
//!   starts over, asking coordinators.
//! * **Termination.** A node holding a piece not committed for `participant_timeout` (at once
//!   after a restart) asks the coordinator, which resends the commit (and computed writes) if
//!   it decided, stays silent while collecting answers, and otherwise presumes abort. A
//!   coordinator resends the commit and writes to nodes that have not acknowledged execution
//!   after `participant_timeout`; a node whose piece's values got no writes back sends them
//!   again; unanswered inquiries are repeated.
//! * A start or commit arriving after its transaction ended at a node is ignored (or, for a
//!   commit, acknowledged again) for `gc_retention`.
//!
//! # Mutants (`augur check --mutant`)
//!
//! * `no-dependency-wait`: a node executes a committed piece at once, without waiting for the
//!   pieces ordered before it: one-shot pieces of conflicting transactions execute in different
//!   orders at different nodes (and replicas diverge).
//! * `no-read-validation`: the start phase accepts an interactive piece whose reads are stale,
//!   or overwritten by a pending piece: two read-modify-write transactions of one key both
//!   commit (lost update).
//! * `single-round-reads`: read-only transactions commit after their first round of reads: a
//!   reader may see one key before and another after a writer.
//! * `no-scc-order`: members of an SCC execute in the order their pieces arrived at each node
//!   instead of by id, so two nodes may order the members of a cycle differently.

mod graph;

use crate::common::coordinator::serve_interactive;
use crate::common::coordinator::{ByReplica, InteractiveCoordinator, Pending, ReadInFlight, Reads};
use crate::common::replica::{self, TxnIds, Writes};
use crate::common::two_phase::GC_BATCH;
use crate::protocol_info::Engine;
use crate::protocol_info::{INTERACTIVE_AND_ONE_SHOT, IsolationLevel, NetworkModel, ProtocolInfo};
use augur_contract::Procedure;
use augur_contract::driver;
use augur_contract::inbound::{BadMessage, CheckMessage, Inbound};
use augur_contract::reply_for;
use augur_contract::{Ctx, NodeEnv, Protocol, Work};
use augur_storage::MvStore;
use augur_types::{AbortReason, ClientOp, ClientReply, ClientRequest, ExecutedOp, Execution};
use augur_types::{Key, NodeId, ProcedureCall, RequestError, Timestamp, TxnId, Value};
use graph::Known;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// `rococo`'s registry entry.
pub const INFO: ProtocolInfo = ProtocolInfo {
    name: "rococo",
    isolation: IsolationLevel::StrictSerializable,
    isolation_with: &[],
    paper: "ROCOCO (OSDI 2014), SSS (ICDCS 2019) §V baseline",
    summary: "deferrable pieces: a start phase collects dependencies among conflicting pieces, a commit phase executes strongly connected components of the dependency graph in id order; read-only transactions read in rounds until two agree",
    engine: Engine::Own,
    commit_order_evidence: false,
    promises: &[],
    network: NetworkModel {
        tolerates_loss: true,
        tolerates_reordering: true,
    },
    mutants: MUTANTS,
    settings: &[],
    speculation: None,
    forms: INTERACTIVE_AND_ONE_SHOT,
};

/// The mutants `rococo` knows, with what each breaks.
pub const MUTANTS: &[(&str, &str)] = &[
    (
        "no-dependency-wait",
        "committed pieces execute at once, without waiting for the pieces they depend on (one-shot pieces of conflicting transactions execute in different orders at different nodes)",
    ),
    (
        "no-read-validation",
        "the start phase accepts an interactive piece whose reads are stale or overwritten by a pending piece (lost updates)",
    ),
    (
        "single-round-reads",
        "read-only transactions commit after one round of reads (fractured reads)",
    ),
    (
        "no-scc-order",
        "members of a strongly connected component execute in the order their pieces arrived at each node rather than in id order, so nodes order a cycle differently",
    ),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mutant {
    NoDependencyWait,
    NoReadValidation,
    SingleRoundReads,
    NoSccOrder,
}

impl Mutant {
    fn named(name: &str) -> Option<Mutant> {
        match name {
            "no-dependency-wait" => Some(Mutant::NoDependencyWait),
            "no-read-validation" => Some(Mutant::NoReadValidation),
            "single-round-reads" => Some(Mutant::SingleRoundReads),
            "no-scc-order" => Some(Mutant::NoSccOrder),
            _ => None,
        }
    }
}

/// A transaction's aggregated dependencies.
pub type Deps = Vec<TxnId>;

/// Rounds a one-shot read-only transaction reads before it gives up (ROCOCO §3.4 repeats
/// rounds until two consecutive ones agree; a bound keeps a reader from starving).
const MAX_READ_ROUNDS: u32 = 4;

/// How much longer than `gc_retention` a coordinator remembers a finished transaction's
/// component, for inquiries from nodes walking the ancestors of their pieces.
const FINISHED_RETENTION_FACTOR: u32 = 4;

/// A coordinator's durable commit decision.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    pub deps: Deps,
    /// A one-shot transaction's procedure and declared keys; `None` for an interactive one.
    pub one_shot: Option<OneShotPlan>,
}

/// What a coordinator needs to run a decided one-shot transaction's procedure again.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OneShotPlan {
    pub call: ProcedureCall,
    /// Every key its pieces read, and those they may write.
    pub keys: Vec<Key>,
    pub writes: Vec<Key>,
}

/// A transaction that executed at every node, as its coordinator remembers it for inquiries.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Finished {
    pub deps: Deps,
    /// Its strongly connected component, as the nodes that executed it reported it (`None`
    /// when every report was lost).
    pub component: Option<Deps>,
}

/// What a coordinator knows of a transaction another node asks about.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Status {
    /// Committed, with its aggregated dependencies.
    Committed(Deps),
    /// Executed at every node, in this strongly connected component.
    Finished(Deps),
    /// Neither decided nor remembered: aborted (presumed abort), or finished long ago.
    Unknown,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// Coordinator → a replica of `key`: its newest version, once no pending piece writes it.
    Read { txn: TxnId, seq: u32, key: Key },
    /// Replica → coordinator: the value and its writer (`None`: no version).
    ReadReply {
        txn: TxnId,
        seq: u32,
        version: Option<TxnId>,
        value: Option<Value>,
    },
    /// Coordinator → a node of an interactive transaction: the start phase of its piece.
    /// `age`: the transaction's age under wait-die.
    Start {
        txn: TxnId,
        age: Timestamp,
        reads: Reads,
        writes: Writes,
    },
    /// Coordinator → a node of a one-shot transaction: the start phase of its deferrable
    /// piece, which reads `reads` and may write `writes` when it executes.
    StartDeferred {
        txn: TxnId,
        reads: Vec<Key>,
        writes: Vec<Key>,
    },
    /// Node → coordinator: the piece's dependencies there, or why it was refused.
    Started {
        txn: TxnId,
        deps: Result<Deps, AbortReason>,
    },
    /// Coordinator → every node of the transaction: commit, with the aggregated dependencies.
    Commit { txn: TxnId, deps: Deps },
    /// Node → coordinator: a deferrable piece's turn came; what its keys hold.
    PieceRead {
        txn: TxnId,
        values: Vec<(Key, Option<Value>)>,
    },
    /// Coordinator → node: the writes of a deferrable piece, computed from its reads.
    Install { txn: TxnId, writes: Writes },
    /// Node → coordinator: the piece executed here, in this strongly connected component.
    Executed { txn: TxnId, component: Deps },
    /// Coordinator → nodes: the transaction aborted; drop its piece.
    Abort { txn: TxnId },
    /// Node → coordinator: what became of `txn`, whose piece is pending here?
    QueryOutcome { txn: TxnId },
    /// Node → coordinator of `txn`, an ancestor of a piece here (ROCOCO §3.3's inquiry).
    Inquire { txn: TxnId },
    /// Coordinator → inquiring node.
    Inquired { txn: TxnId, status: Status },
    /// Coordinator → a node that served reads of a read-only transaction: the second round.
    Confirm { txn: TxnId, keys: Vec<Key> },
    /// Node → coordinator: the versions of `Confirm`'s keys, in its order.
    Confirmed {
        txn: TxnId,
        versions: Vec<Option<TxnId>>,
    },
    /// Coordinator → node: a round of a one-shot read-only transaction's reads.
    ReadRound {
        txn: TxnId,
        round: u32,
        keys: Vec<Key>,
    },
    /// Node → coordinator: each key's writer and value, in `ReadRound`'s order.
    RoundRead {
        txn: TxnId,
        round: u32,
        reads: Vec<(Option<TxnId>, Option<Value>)>,
    },
}

/// Requests come from the transaction's coordinator and name keys stored here; answers go back
/// to the coordinator; an inquiry goes to the coordinator of the transaction asked about.
impl CheckMessage for Msg {
    fn check(&self, at: &Inbound<'_>) -> Result<(), BadMessage> {
        match self {
            Msg::Read { txn, key, .. } => {
                at.txn_of_sender(*txn)?;
                at.key_here(key)
            }
            Msg::Start {
                txn, reads, writes, ..
            } => {
                at.txn_of_sender(*txn)?;
                reads.iter().try_for_each(|(key, _)| at.key_here(key))?;
                writes.iter().try_for_each(|(key, _)| at.key_here(key))
            }
            Msg::StartDeferred { txn, reads, writes } => {
                at.txn_of_sender(*txn)?;
                reads
                    .iter()
                    .chain(writes)
                    .try_for_each(|key| at.key_here(key))
            }
            Msg::Install { txn, writes } => {
                at.txn_of_sender(*txn)?;
                writes.iter().try_for_each(|(key, _)| at.key_here(key))
            }
            Msg::Confirm { txn, keys } | Msg::ReadRound { txn, keys, .. } => {
                at.txn_of_sender(*txn)?;
                keys.iter().try_for_each(|key| at.key_here(key))
            }
            // Every transaction named in a dependency list must be one a node of the cluster
            // began: this node may inquire of its coordinator.
            Msg::Commit { txn, deps } => {
                at.txn_of_sender(*txn)?;
                deps.iter().try_for_each(|dep| at.txn(*dep))
            }
            Msg::Inquired { txn, status } => {
                at.txn_of_sender(*txn)?;
                match status {
                    Status::Committed(deps) | Status::Finished(deps) => {
                        deps.iter().try_for_each(|dep| at.txn(*dep))
                    }
                    Status::Unknown => Ok(()),
                }
            }
            Msg::Started { txn, deps } => {
                at.txn_here(*txn)?;
                match deps {
                    Ok(deps) => deps.iter().try_for_each(|dep| at.txn(*dep)),
                    Err(_) => Ok(()),
                }
            }
            Msg::Executed { txn, component } => {
                at.txn_here(*txn)?;
                component.iter().try_for_each(|member| at.txn(*member))
            }
            Msg::Abort { txn } => at.txn_of_sender(*txn),
            Msg::ReadReply { txn, .. }
            | Msg::PieceRead { txn, .. }
            | Msg::QueryOutcome { txn }
            | Msg::Inquire { txn }
            | Msg::Confirmed { txn, .. }
            | Msg::RoundRead { txn, .. } => at.txn_here(*txn),
        }
    }
}

#[derive(Debug)]
pub enum Timer {
    /// Periodic: termination queries, inquiries, resends, garbage collection.
    Tick,
    /// A coordinator's read `seq` of a transaction got no answer in time.
    Read(TxnId, u32),
    /// A coordinator's start phase or read rounds did not complete in time.
    Phase(TxnId),
}

/// What a node writes to its log and rebuilds from.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Record {
    /// The kit's records this protocol uses: `IdsReserved`; `Decided` (a coordinator's commit
    /// decision, and the nodes yet to execute); in checkpoints, `Versions` (a key's versions
    /// with their execution positions, oldest first).
    Kit(replica::Record<Plan>),
    /// This node accepted `txn`'s interactive piece: its age, the keys it read here, its writes
    /// here.
    Started {
        txn: TxnId,
        age: Timestamp,
        reads: Vec<Key>,
        writes: Writes,
    },
    /// This node accepted `txn`'s deferrable piece: the keys it reads and may write here.
    StartedDeferred {
        txn: TxnId,
        reads: Vec<Key>,
        writes: Vec<Key>,
    },
    /// `txn`'s piece executed here (its writes installed): for a deferrable piece, `writes`.
    Executed { txn: TxnId, writes: Option<Writes> },
    /// `txn` aborted: its piece here is dropped.
    Aborted { txn: TxnId },
    /// A coordinator computed a one-shot transaction's writes, per node.
    Computed {
        txn: TxnId,
        installs: BTreeMap<NodeId, Writes>,
    },
    /// A coordinator's transaction executed at every node.
    Finished { txn: TxnId, finished: Finished },
    /// Checkpoints only, first: the last execution position.
    Position { pos: u64 },
}

impl From<replica::Record<Plan>> for Record {
    fn from(record: replica::Record<Plan>) -> Record {
        Record::Kit(record)
    }
}

/// Counters `augur bench` reads (see [`Protocol::counters`]).
#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    pieces_executed: u64,
    deferred_executed: u64,
    refused_validation: u64,
    refused_wait_die: u64,
    reads_parked: u64,
    read_only_commits: u64,
    read_only_aborts: u64,
    read_rounds: u64,
    commits_resent: u64,
    inquiries: u64,
    cyclic_components: u64,
    /// One-shot transactions answered `NotOneShot` (their keys depend on their reads).
    not_one_shot: u64,
}

/// A read this coordinator's transaction did, and where.
struct ReadDone {
    key: Key,
    version: Option<TxnId>,
    node: NodeId,
}

/// A transaction this node coordinates, before its commit decision.
struct Coord {
    read_only: bool,
    pending: Option<Pending>,
    /// The node the read in flight went to, and its key.
    read: ReadInFlight<(NodeId, Key)>,
    reads: Vec<ReadDone>,
    last_active: Timestamp,
    /// Its age under wait-die (interactive transactions; one-shot pieces never die).
    age: Timestamp,
    phase: Phase,
    /// A one-shot transaction's procedure, and the plan its pieces started with.
    one_shot: Option<(Box<dyn Procedure>, OneShotPlan)>,
}

enum Phase {
    Executing,
    /// Start phase: waiting for every node's dependencies.
    Starting {
        nodes: Vec<NodeId>,
        waiting: BTreeSet<NodeId>,
        deps: BTreeSet<TxnId>,
    },
    /// An interactive read-only transaction's second round: per node, the versions the first
    /// round read.
    Confirming {
        expected: BTreeMap<NodeId, Vec<Option<TxnId>>>,
    },
    /// A one-shot read-only transaction's rounds (ROCOCO §3.4).
    Rounds {
        round: u32,
        by_node: BTreeMap<NodeId, Vec<Key>>,
        waiting: BTreeSet<NodeId>,
        current: BTreeMap<Key, (Option<TxnId>, Option<Value>)>,
        previous: Option<BTreeMap<Key, Option<TxnId>>>,
    },
}

/// A commit decision kept until every node of the transaction executed it.
struct Decision {
    plan: Plan,
    waiting: BTreeSet<NodeId>,
    /// The client, unless the coordinator restarted since.
    pending: Option<Pending>,
    sent_at: Timestamp,
    /// A one-shot transaction's run: its procedure, the values read so far, what it computed.
    run: Option<DeferredRun>,
    /// The component the first node to execute reported.
    component: Option<Deps>,
}

struct DeferredRun {
    procedure: Option<Box<dyn Procedure>>,
    values: BTreeMap<Key, Option<Value>>,
    installs: Option<BTreeMap<NodeId, Writes>>,
    /// The reply owed to the client once every node executed.
    ops: Vec<ExecutedOp>,
    end: Option<ClientReply>,
}

/// How a piece came: an interactive transaction's (writes known, reads validated) or a
/// one-shot transaction's deferrable piece (reads and writes at execution).
enum Form {
    Interactive {
        writes: Writes,
        /// The transaction's age under wait-die.
        age: Timestamp,
    },
    Deferred {
        /// When the piece's turn came and its values went to the coordinator.
        begun: Option<Timestamp>,
        /// Its writes, once the coordinator computed them.
        install: Option<Writes>,
    },
}

/// A piece accepted here and not executed yet.
struct Piece {
    reads: Vec<Key>,
    write_keys: Vec<Key>,
    form: Form,
    /// The conflicting pieces pending here when it started.
    local: BTreeSet<TxnId>,
    /// Once committed, the aggregated dependencies (`local` included).
    deps: Option<BTreeSet<TxnId>>,
    /// Its strongly connected component, once found here (see `Rococo::component_of`).
    component: Option<Vec<TxnId>>,
    /// Start order here.
    arrival: u64,
    /// When its outcome was last asked for (or when it started).
    last_query: Timestamp,
}

impl Piece {
    fn deferred(&self) -> bool {
        matches!(self.form, Form::Deferred { .. })
    }
}

/// A read or a confirming round parked until the pending writers of its keys executed.
struct Parked {
    txn: TxnId,
    what: ParkedOp,
    waiting: BTreeSet<TxnId>,
}

enum ParkedOp {
    Read { seq: u32, key: Key },
    Confirm { keys: Vec<Key> },
    Round { round: u32, keys: Vec<Key> },
}

/// What an inquiry taught this node about a transaction with no piece here.
struct Learned {
    at: Timestamp,
    status: LearnedStatus,
}

/// One node running `rococo`.
pub struct Rococo {
    env: NodeEnv,
    mutant: Option<Mutant>,
    /// Versions in execution order (`ts`: execution position).
    store: MvStore<()>,
    pos: u64,
    pieces: FxHashMap<TxnId, Piece>,
    arrivals: u64,
    /// Per key, the pending pieces writing it and those reading it, in start order.
    writers: FxHashMap<Key, Vec<TxnId>>,
    readers: FxHashMap<Key, Vec<TxnId>>,
    parked: Vec<Parked>,
    /// Transactions whose piece ended here, with when, and for an executed one its component,
    /// so a late start is ignored and a repeated commit acknowledged.
    ended: FxHashMap<TxnId, (Timestamp, Option<Deps>)>,
    /// Ancestors with no piece here: what their coordinators said, and inquiries in flight.
    learned: FxHashMap<TxnId, Learned>,
    inquired: FxHashMap<TxnId, Timestamp>,
    coord: FxHashMap<TxnId, Coord>,
    decisions: BTreeMap<TxnId, Decision>,
    /// Transactions coordinated here that executed everywhere, with their component.
    finished: FxHashMap<TxnId, (Timestamp, Finished)>,
    ids: TxnIds,
    counters: Counters,
}

/// The wait-die order of interactive transactions, the same at every node: the age its client
/// claims (`augur_contract::age`, so a retry keeps its first attempt's), then the sequence
/// number, so no node's transactions are always the younger, then the node.
fn seniority(age: Timestamp, txn: TxnId) -> (Timestamp, u64, u32) {
    (age, txn.seq(), txn.coordinator().0)
}

/// The `Executed` reply a one-shot transaction owes its client.
fn executed(txn: Option<TxnId>, ops: Vec<ExecutedOp>, end: ClientReply) -> ClientReply {
    ClientReply::Executed(Box::new(Execution {
        txn,
        ops,
        info: Default::default(),
        end,
    }))
}

/// What a one-shot transaction whose keys depend on its reads is answered: over the values its
/// pieces read, its procedure touched keys the dry run over absent values did not declare, so
/// it cannot run as pieces (it wrote nothing); its client runs it interactively instead.
fn not_one_shot(call: &ProcedureCall) -> ClientReply {
    ClientReply::Rejected(RequestError::NotOneShot(format!(
        "rococo cannot run procedure {}/{} as one-shot pieces: the keys it reads or writes \
         depend on the values it reads, so they are not known before it runs",
        call.workload, call.procedure
    )))
}

/// The status an inquiry answer gave, kept for walks.
enum LearnedStatus {
    Committed(BTreeSet<TxnId>),
    Finished(Vec<TxnId>),
    Unknown,
}

/// What a committed piece's readiness check found.
enum Readiness {
    /// It may execute now; its component.
    Ready(Vec<TxnId>),
    /// A piece ordered before it is still pending here, or it is not committed.
    Waiting,
    /// These ancestors' commit status must be learned first.
    Unknown(Vec<TxnId>),
}

impl Rococo {
    fn id(&self) -> NodeId {
        self.env.id
    }

    /// The writer of `key`'s newest version here.
    fn version(&self, key: &Key) -> Option<TxnId> {
        self.store
            .get(key)
            .and_then(|e| e.latest_committed())
            .map(|v| v.writer)
    }

    /// The pending pieces writing `key`, other than `txn`'s.
    fn pending_writers(&self, key: &Key, txn: TxnId) -> impl Iterator<Item = TxnId> + '_ {
        self.writers
            .get(key)
            .into_iter()
            .flatten()
            .copied()
            .filter(move |w| *w != txn)
    }

    /// The pending pieces conflicting with a piece reading `reads` and writing `writes`:
    /// writers of either, readers of `writes` (ROCOCO's read-write, write-read and write-write
    /// conflicts).
    fn conflicting(&self, txn: TxnId, reads: &[Key], writes: &[Key]) -> BTreeSet<TxnId> {
        let mut found: BTreeSet<TxnId> = BTreeSet::new();
        for key in reads.iter().chain(writes) {
            found.extend(self.pending_writers(key, txn));
        }
        for key in writes {
            let readers = self.readers.get(key).into_iter().flatten();
            found.extend(readers.copied().filter(|r| *r != txn));
        }
        found
    }

    /// Send `msg` to `to`, or handle it at once when `to` is this node.
    fn deliver(&mut self, ctx: &mut Ctx<'_, Self>, to: NodeId, msg: Msg) {
        if to == self.id() {
            self.handle(ctx, to, msg);
        } else {
            ctx.send(to, msg);
        }
    }

    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, msg: Msg) {
        match msg {
            Msg::Read { txn, seq, key } => {
                self.park_or_serve(ctx, txn, ParkedOp::Read { seq, key })
            }
            Msg::ReadReply {
                txn,
                seq,
                version,
                value,
            } => self.read_reply(ctx, from, txn, seq, version, value),
            Msg::Start {
                txn,
                age,
                reads,
                writes,
            } => self.start(ctx, txn, age, reads, writes),
            Msg::StartDeferred { txn, reads, writes } => {
                self.start_deferred(ctx, txn, reads, writes)
            }
            Msg::Started { txn, deps } => self.started(ctx, from, txn, deps),
            Msg::Commit { txn, deps } => self.on_commit(ctx, txn, deps),
            Msg::PieceRead { txn, values } => self.piece_read(ctx, from, txn, values),
            Msg::Install { txn, writes } => self.on_install(ctx, txn, writes),
            Msg::Executed { txn, component } => self.executed(ctx, from, txn, component),
            Msg::Abort { txn } => self.on_abort(ctx, txn),
            Msg::QueryOutcome { txn } => self.query_outcome(ctx, from, txn),
            Msg::Inquire { txn } => self.inquire(ctx, from, txn),
            Msg::Inquired { txn, status } => self.inquired(ctx, txn, status),
            Msg::Confirm { txn, keys } => self.park_or_serve(ctx, txn, ParkedOp::Confirm { keys }),
            Msg::Confirmed { txn, versions } => self.confirmed(ctx, from, txn, versions),
            Msg::ReadRound { txn, round, keys } => {
                self.park_or_serve(ctx, txn, ParkedOp::Round { round, keys })
            }
            Msg::RoundRead { txn, round, reads } => self.round_read(ctx, from, txn, round, reads),
        }
    }

    // ----- pieces (live and in replay alike) -----

    /// Record `txn`'s accepted piece as pending; its local dependencies are the pending pieces
    /// it conflicts with.
    fn register(
        &mut self,
        txn: TxnId,
        reads: Vec<Key>,
        write_keys: Vec<Key>,
        form: Form,
        now: Timestamp,
    ) {
        let local = self.conflicting(txn, &reads, &write_keys);
        for key in &write_keys {
            let list = self.writers.entry(key.clone()).or_default();
            if !list.contains(&txn) {
                list.push(txn);
            }
        }
        for key in &reads {
            let list = self.readers.entry(key.clone()).or_default();
            if !list.contains(&txn) {
                list.push(txn);
            }
        }
        self.arrivals += 1;
        let piece = Piece {
            reads,
            write_keys,
            form,
            local,
            deps: None,
            component: None,
            arrival: self.arrivals,
            last_query: now,
        };
        self.pieces.insert(txn, piece);
    }

    /// Remove `txn`'s pending piece (executed or aborted), returning it.
    fn unregister(&mut self, txn: TxnId) -> Option<Piece> {
        let piece = self.pieces.remove(&txn)?;
        for (keys, lists) in [
            (&piece.write_keys, &mut self.writers),
            (&piece.reads, &mut self.readers),
        ] {
            for key in keys {
                if let Some(list) = lists.get_mut(key) {
                    list.retain(|t| *t != txn);
                    if list.is_empty() {
                        lists.remove(key);
                    }
                }
            }
        }
        Some(piece)
    }

    /// Install `writes` at the next execution position.
    fn install(&mut self, txn: TxnId, writes: &Writes) {
        self.pos += 1;
        let ts = Timestamp(self.pos);
        for (key, value) in writes {
            self.store.entry(key).put_committed(txn, ts, value.clone());
        }
    }

    // ----- node: start phase -----

    /// The answer to a start already accepted: the same dependencies.
    fn started_again(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) -> bool {
        let Some(piece) = self.pieces.get(&txn) else {
            return self.ended.contains_key(&txn);
        };
        let deps = Ok(piece.local.iter().copied().collect());
        self.deliver(ctx, txn.coordinator(), Msg::Started { txn, deps });
        true
    }

    /// ROCOCO's start phase at this node for an interactive piece: check it, persist it,
    /// answer its dependencies.
    fn start(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        age: Timestamp,
        reads: Reads,
        writes: Writes,
    ) {
        if self.started_again(ctx, txn) {
            return;
        }
        ctx.charge(Work::reads(reads.len() + writes.len()));
        if let Err(reason) = self.refusal(txn, age, &reads, &writes) {
            match reason {
                AbortReason::WaitDie => self.counters.refused_wait_die += 1,
                _ => self.counters.refused_validation += 1,
            }
            self.ended.insert(txn, (ctx.now(), None));
            let msg = Msg::Started {
                txn,
                deps: Err(reason),
            };
            return self.deliver(ctx, txn.coordinator(), msg);
        }
        let read_keys: Vec<Key> = reads.into_iter().map(|(k, _)| k).collect();
        ctx.persist(Record::Started {
            txn,
            age,
            reads: read_keys.clone(),
            writes: writes.clone(),
        });
        let write_keys = writes.iter().map(|(k, _)| k.clone()).collect();
        self.register(
            txn,
            read_keys,
            write_keys,
            Form::Interactive { writes, age },
            ctx.now(),
        );
        let deps = Ok(self.pieces[&txn].local.iter().copied().collect());
        self.deliver(ctx, txn.coordinator(), Msg::Started { txn, deps });
    }

    /// ROCOCO §3.2's start phase for a deferrable piece: never refused; its dependencies are
    /// every pending piece it conflicts with.
    fn start_deferred(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        reads: Vec<Key>,
        writes: Vec<Key>,
    ) {
        if self.started_again(ctx, txn) {
            return;
        }
        ctx.charge(Work::reads(reads.len() + writes.len()));
        ctx.persist(Record::StartedDeferred {
            txn,
            reads: reads.clone(),
            writes: writes.clone(),
        });
        let form = Form::Deferred {
            begun: None,
            install: None,
        };
        self.register(txn, reads, writes, form, ctx.now());
        let deps = Ok(self.pieces[&txn].local.iter().copied().collect());
        self.deliver(ctx, txn.coordinator(), Msg::Started { txn, deps });
    }

    /// Why `txn`'s interactive piece cannot be accepted here, if it cannot (see the module
    /// docs).
    fn refusal(
        &self,
        txn: TxnId,
        age: Timestamp,
        reads: &Reads,
        writes: &Writes,
    ) -> Result<(), AbortReason> {
        let validate = self.mutant != Some(Mutant::NoReadValidation);
        for (key, version) in reads.iter().filter(|_| validate) {
            if self.version(key) != *version || self.pending_writers(key, txn).next().is_some() {
                return Err(AbortReason::ValidationFailed);
            }
        }
        for (key, _) in writes {
            let read_by_other = self
                .readers
                .get(key)
                .is_some_and(|r| r.iter().any(|t| *t != txn));
            if read_by_other {
                return Err(AbortReason::ValidationFailed);
            }
            // An interactive piece is never ordered after a deferrable one, so no cycle of the
            // dependency graph passes through it (module docs, "Both forms at one node").
            let deferred_writer = self
                .pending_writers(key, txn)
                .any(|w| self.pieces.get(&w).is_some_and(Piece::deferred));
            if deferred_writer {
                return Err(AbortReason::ValidationFailed);
            }
            // Edges between interactive pieces go from older to younger only.
            let me = seniority(age, txn);
            let younger_writer = self.pending_writers(key, txn).any(|w| {
                match self.pieces.get(&w).map(|p| &p.form) {
                    Some(Form::Interactive { age, .. }) => seniority(*age, w) > me,
                    // Refused above: a deferrable writer is never ordered before it.
                    _ => false,
                }
            });
            if younger_writer {
                return Err(AbortReason::WaitDie);
            }
        }
        Ok(())
    }

    // ----- node: commit phase -----

    /// Acknowledge again the execution of a piece that ended here (its acknowledgement was
    /// lost), or do nothing if it aborted or ended long ago.
    fn ack_again(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        let component = match self.ended.get(&txn) {
            Some((_, None)) => return,
            Some((_, Some(component))) => component.clone(),
            // Ended so long ago that it was forgotten, and only a committed transaction is
            // resent: executed, in a component no longer known here (empty).
            None => Vec::new(),
        };
        self.deliver(ctx, txn.coordinator(), Msg::Executed { txn, component });
    }

    fn on_commit(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, deps: Deps) {
        let Some(piece) = self.pieces.get_mut(&txn) else {
            return self.ack_again(ctx, txn);
        };
        if piece.deps.is_none() {
            // A transaction never depends on itself.
            let mut all = piece.local.clone();
            all.extend(deps.into_iter().filter(|d| *d != txn));
            piece.deps = Some(all);
        }
        self.execute_ready(ctx);
    }

    fn on_install(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, writes: Writes) {
        let Some(piece) = self.pieces.get_mut(&txn) else {
            return self.ack_again(ctx, txn);
        };
        // Before its commit arrives the piece's place in the order is unknown: the coordinator
        // resends both.
        if piece.deps.is_none() {
            return;
        }
        if let Form::Deferred { install, .. } = &mut piece.form {
            install.get_or_insert(writes);
            self.execute_ready(ctx);
        }
    }

    /// What this node knows of `txn`, met while walking the ancestors of a piece here.
    fn known(&self, txn: TxnId) -> Known<'_> {
        if let Some(piece) = self.pieces.get(&txn) {
            return match &piece.deps {
                Some(deps) => Known::Committed(deps),
                None => Known::Missing,
            };
        }
        // Executed here: had it shared a component with a piece still pending here, it would
        // have found that component when it executed, and recorded it in the pending member
        // (`Piece::component`), which is then not walked. Aborted: not in the graph.
        if self.ended.contains_key(&txn) {
            return Known::Outside;
        }
        match self.learned.get(&txn).map(|l| &l.status) {
            Some(LearnedStatus::Committed(deps)) => Known::Committed(deps),
            Some(LearnedStatus::Finished(members)) => Known::Finished(members),
            Some(LearnedStatus::Unknown) => Known::Outside,
            None => Known::Missing,
        }
    }

    /// Whether `txn`'s piece may execute here, with its strongly connected component: every
    /// conflicting piece pending here that comes before it has executed (ROCOCO §3.3). A piece
    /// comes before `txn` when it is an ancestor outside `txn`'s component, or a member of it
    /// with a smaller id.
    fn readiness(&self, txn: TxnId) -> Readiness {
        let piece = &self.pieces[&txn];
        let Some(deps) = &piece.deps else {
            return Readiness::Waiting;
        };
        if self.mutant == Some(Mutant::NoDependencyWait) {
            return Readiness::Ready(vec![txn]);
        }
        let component = match (&piece.component, &piece.form) {
            (Some(found), _) => found.clone(),
            // No cycle passes through an interactive piece.
            (None, Form::Interactive { .. }) => vec![txn],
            (None, Form::Deferred { .. }) => match graph::component(txn, deps, |t| self.known(t)) {
                Ok(members) => members,
                Err(unknown) => return Readiness::Unknown(unknown),
            },
        };
        let arrival_order = self.mutant == Some(Mutant::NoSccOrder);
        let before = |q: &TxnId| {
            if *q != txn && component.binary_search(q).is_ok() && !arrival_order {
                *q < txn
            } else {
                piece.local.contains(q)
            }
        };
        let conflicting = self.conflicting(txn, &piece.reads, &piece.write_keys);
        if conflicting.iter().any(before) {
            return Readiness::Waiting;
        }
        Readiness::Ready(component)
    }

    /// Execute every committed piece whose turn came, repeatedly (in id order within a pass,
    /// so execution is deterministic); ask about ancestors whose status is missing.
    fn execute_ready(&mut self, ctx: &mut Ctx<'_, Self>) {
        let mut unknown: BTreeSet<TxnId> = BTreeSet::new();
        loop {
            let mut candidates: Vec<TxnId> = self
                .pieces
                .iter()
                .filter(|(_, p)| p.deps.is_some())
                .filter(|(_, p)| {
                    !matches!(
                        p.form,
                        Form::Deferred {
                            begun: Some(_),
                            install: None
                        }
                    )
                })
                .map(|(t, _)| *t)
                .collect();
            candidates.sort();
            let mut progressed = false;
            for txn in candidates {
                if !self.pieces.contains_key(&txn) {
                    continue;
                }
                match self.readiness(txn) {
                    Readiness::Waiting => {}
                    Readiness::Unknown(missing) => unknown.extend(missing),
                    Readiness::Ready(component) => {
                        progressed |= self.take_turn(ctx, txn, component);
                    }
                }
            }
            if !progressed {
                break;
            }
        }
        let now = ctx.now();
        let again_after = self.env.options.participant_timeout / 4;
        for txn in unknown {
            // Pieces here learn their outcome from their own commit, or by asking.
            if self.pieces.contains_key(&txn) || self.learned.contains_key(&txn) {
                continue;
            }
            let due = self
                .inquired
                .get(&txn)
                .is_none_or(|at| now.since(*at) >= again_after);
            if due {
                self.inquired.insert(txn, now);
                self.counters.inquiries += 1;
                self.deliver(ctx, txn.coordinator(), Msg::Inquire { txn });
            }
        }
    }

    /// `txn`'s turn came here: execute it, or for a deferrable piece without its writes yet,
    /// send what its keys hold to the coordinator. Whether a piece ended.
    fn take_turn(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, component: Vec<TxnId>) -> bool {
        if component.len() > 1 {
            // Every member pending here keeps the component: once one of them executed, the
            // others no longer find it by walking (`known`).
            for member in &component {
                if let Some(p) = self.pieces.get_mut(member)
                    && p.component.is_none()
                {
                    p.component = Some(component.clone());
                    if *member == txn {
                        self.counters.cyclic_components += 1;
                    }
                }
            }
        }
        let piece = self.pieces.get_mut(&txn).expect("a candidate");
        let writes = match &mut piece.form {
            Form::Interactive { writes, .. } => writes.clone(),
            Form::Deferred {
                install: Some(writes),
                ..
            } => writes.clone(),
            Form::Deferred {
                begun,
                install: None,
            } => {
                *begun = Some(ctx.now());
                let keys: Vec<Key> = piece
                    .reads
                    .iter()
                    .chain(&piece.write_keys)
                    .cloned()
                    .collect();
                return self.send_values(ctx, txn, keys);
            }
        };
        let piece = self.unregister(txn).expect("a candidate");
        ctx.charge(Work::writes(writes.len()));
        self.install(txn, &writes);
        let deferred = piece.deferred();
        ctx.persist(Record::Executed {
            txn,
            writes: deferred.then(|| writes.clone()),
        });
        self.ended.insert(txn, (ctx.now(), Some(component.clone())));
        self.counters.pieces_executed += 1;
        if deferred {
            self.counters.deferred_executed += 1;
        }
        self.deliver(ctx, txn.coordinator(), Msg::Executed { txn, component });
        self.left(ctx, txn);
        true
    }

    /// Send the coordinator what `keys` hold now, for `txn`'s deferrable piece. Never ends a
    /// piece.
    fn send_values(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, mut keys: Vec<Key>) -> bool {
        keys.sort();
        keys.dedup();
        ctx.charge(Work::reads(keys.len()));
        let values = keys
            .into_iter()
            .map(|k| {
                let value = self
                    .store
                    .get(&k)
                    .and_then(|e| e.latest_committed())
                    .and_then(|v| v.value.clone());
                (k, value)
            })
            .collect();
        self.deliver(ctx, txn.coordinator(), Msg::PieceRead { txn, values });
        false
    }

    fn on_abort(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        if self.pieces.get(&txn).is_some_and(|p| p.deps.is_some()) {
            // Only a forged abort can contradict a commit: keep the decision.
            return;
        }
        self.ended.entry(txn).or_insert((ctx.now(), None));
        if self.unregister(txn).is_some() {
            ctx.persist(Record::Aborted { txn });
            self.left(ctx, txn);
            self.execute_ready(ctx);
        }
    }

    /// `txn`'s piece is no longer pending here: serve what waited for it.
    fn left(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        let mut served = Vec::new();
        for (i, p) in self.parked.iter_mut().enumerate() {
            if p.waiting.remove(&txn) && p.waiting.is_empty() {
                served.push(i);
            }
        }
        for i in served.into_iter().rev() {
            let p = self.parked.remove(i);
            self.serve(ctx, p.txn, p.what);
        }
    }

    fn inquired(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, status: Status) {
        self.inquired.remove(&txn);
        let status = match status {
            Status::Committed(deps) => LearnedStatus::Committed(deps.into_iter().collect()),
            Status::Finished(mut members) => {
                members.sort();
                LearnedStatus::Finished(members)
            }
            Status::Unknown => LearnedStatus::Unknown,
        };
        let at = ctx.now();
        self.learned.insert(txn, Learned { at, status });
        self.execute_ready(ctx);
    }

    // ----- node: reads -----

    /// ROCOCO §3.3–3.4: a read waits for the pending pieces writing its keys.
    fn park_or_serve(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, what: ParkedOp) {
        let keys: Vec<&Key> = match &what {
            ParkedOp::Read { key, .. } => vec![key],
            ParkedOp::Confirm { keys } | ParkedOp::Round { keys, .. } => keys.iter().collect(),
        };
        let waiting: BTreeSet<TxnId> = keys
            .into_iter()
            .flat_map(|k| self.pending_writers(k, txn))
            .collect();
        if waiting.is_empty() {
            return self.serve(ctx, txn, what);
        }
        self.counters.reads_parked += 1;
        self.parked.push(Parked { txn, what, waiting });
    }

    fn serve(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, what: ParkedOp) {
        let newest = |store: &MvStore<()>, key: &Key| {
            let v = store.get(key).and_then(|e| e.latest_committed());
            (v.map(|v| v.writer), v.and_then(|v| v.value.clone()))
        };
        let msg = match what {
            ParkedOp::Read { seq, key } => {
                ctx.charge(Work::reads(1));
                let (version, value) = newest(&self.store, &key);
                Msg::ReadReply {
                    txn,
                    seq,
                    version,
                    value,
                }
            }
            ParkedOp::Confirm { keys } => {
                ctx.charge(Work::reads(keys.len()));
                let versions = keys.iter().map(|k| self.version(k)).collect();
                Msg::Confirmed { txn, versions }
            }
            ParkedOp::Round { round, keys } => {
                ctx.charge(Work::reads(keys.len()));
                let reads = keys.iter().map(|k| newest(&self.store, k)).collect();
                Msg::RoundRead { txn, round, reads }
            }
        };
        self.deliver(ctx, txn.coordinator(), msg);
    }

    // ----- coordinator: client requests -----

    /// The coordinator of a transaction that is executing with no request in flight, or the
    /// answer owed to a request that cannot proceed.
    fn executing(&mut self, txn: TxnId) -> Result<&mut Coord, ClientReply> {
        let Some(t) = self.coord.get_mut(&txn) else {
            return Err(ClientReply::Aborted(AbortReason::TransactionLost));
        };
        if t.pending.is_some() || !matches!(t.phase, Phase::Executing) {
            let why = format!("transaction {txn:?} already has a request in flight");
            return Err(ClientReply::Rejected(RequestError::Invalid(why)));
        }
        Ok(t)
    }

    fn new_coord(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        read_only: bool,
        age: Timestamp,
        phase: Phase,
    ) -> TxnId {
        let txn = self.ids.allocate(ctx);
        let coord = Coord {
            read_only,
            pending: None,
            read: ReadInFlight::default(),
            reads: Vec::new(),
            last_active: ctx.now(),
            age,
            phase,
            one_shot: None,
        };
        self.coord.insert(txn, coord);
        txn
    }

    /// Start the start phase of `txn`: send each node its piece.
    fn start_phase(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, starts: BTreeMap<NodeId, Msg>) {
        let nodes: Vec<NodeId> = starts.keys().copied().collect();
        if let Some(t) = self.coord.get_mut(&txn) {
            t.phase = Phase::Starting {
                waiting: nodes.iter().copied().collect(),
                nodes,
                deps: BTreeSet::new(),
            };
        }
        ctx.set_timer(self.env.options.participant_timeout, Timer::Phase(txn));
        for (node, msg) in starts {
            self.deliver(ctx, node, msg);
        }
    }

    /// A one-shot request (see the module docs, "One-shot transactions").
    fn execute(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        pending: Pending,
        call: ProcedureCall,
        read_only: bool,
    ) {
        let reject = |ctx: &mut Ctx<'_, Self>, e: RequestError| {
            pending.answer(ctx, ClientReply::Rejected(e));
        };
        // The dry run: which keys the pieces read and write (ROCOCO knows its pieces in
        // advance; augur's procedures are code, so they are run once over absent values).
        let (procedure, dry) = match driver::dry_run(&self.env.procedures, &call, read_only) {
            Ok(checked) => checked,
            Err(e) => return reject(ctx, e),
        };
        let mut writes: Vec<Key> = dry.writes.keys().cloned().collect();
        if dry.end.is_err() && !read_only {
            // It stopped early over absent values (a rollback): over real ones it may write
            // what it read (a read-only procedure writes nothing whatever it reads).
            writes.extend(dry.reads.iter().cloned());
        }
        writes.sort();
        writes.dedup();
        let mut reads = dry.reads;
        reads.sort();
        reads.dedup();
        let placement = self.env.placement.clone();
        if read_only {
            if !writes.is_empty() {
                let why = format!(
                    "read-only procedure {}/{} writes",
                    call.workload, call.procedure
                );
                return reject(ctx, RequestError::Invalid(why));
            }
            let me = self.id();
            let mut by_node: BTreeMap<NodeId, Vec<Key>> = BTreeMap::new();
            for key in reads {
                let node = placement.closest_replica(me, placement.partition_of(&key));
                by_node.entry(node).or_default().push(key);
            }
            let txn = self.new_coord(ctx, true, ctx.now(), Phase::Executing);
            let t = self.coord.get_mut(&txn).expect("just made");
            t.pending = Some(pending);
            t.one_shot = Some((
                procedure,
                OneShotPlan {
                    call,
                    keys: Vec::new(),
                    writes: Vec::new(),
                },
            ));
            ctx.set_timer(self.env.options.participant_timeout, Timer::Phase(txn));
            return self.read_round(ctx, txn, 1, by_node, None);
        }
        let mut keys = reads.clone();
        keys.extend(writes.iter().cloned());
        keys.sort();
        keys.dedup();
        let mut pieces: BTreeMap<NodeId, (Vec<Key>, Vec<Key>)> = BTreeMap::new();
        for key in &reads {
            for &r in placement.replicas(placement.partition_of(key)) {
                pieces.entry(r).or_default().0.push(key.clone());
            }
        }
        for key in &writes {
            for &r in placement.replicas(placement.partition_of(key)) {
                pieces.entry(r).or_default().1.push(key.clone());
            }
        }
        let txn = self.new_coord(ctx, false, ctx.now(), Phase::Executing);
        let t = self.coord.get_mut(&txn).expect("just made");
        t.pending = Some(pending);
        t.one_shot = Some((procedure, OneShotPlan { call, keys, writes }));
        let starts = pieces
            .into_iter()
            .map(|(node, (reads, writes))| (node, Msg::StartDeferred { txn, reads, writes }))
            .collect();
        self.start_phase(ctx, txn, starts);
    }

    /// Send round `round` of a one-shot read-only transaction's reads.
    fn read_round(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        round: u32,
        by_node: BTreeMap<NodeId, Vec<Key>>,
        previous: Option<BTreeMap<Key, Option<TxnId>>>,
    ) {
        let Some(t) = self.coord.get_mut(&txn) else {
            return;
        };
        self.counters.read_rounds += 1;
        let sends: Vec<(NodeId, Vec<Key>)> = by_node.iter().map(|(n, k)| (*n, k.clone())).collect();
        t.phase = Phase::Rounds {
            round,
            waiting: by_node.keys().copied().collect(),
            by_node,
            current: BTreeMap::new(),
            previous,
        };
        if sends.is_empty() {
            return self.rounds_done(ctx, txn);
        }
        for (node, keys) in sends {
            self.deliver(ctx, node, Msg::ReadRound { txn, round, keys });
        }
    }

    fn round_read(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        from: NodeId,
        txn: TxnId,
        round: u32,
        reads: Vec<(Option<TxnId>, Option<Value>)>,
    ) {
        let Some(Phase::Rounds {
            round: expected,
            by_node,
            waiting,
            current,
            ..
        }) = self.coord.get_mut(&txn).map(|t| &mut t.phase)
        else {
            return;
        };
        let Some(keys) = by_node.get(&from) else {
            return;
        };
        if *expected != round || keys.len() != reads.len() || !waiting.remove(&from) {
            return;
        }
        current.extend(keys.iter().cloned().zip(reads));
        if waiting.is_empty() {
            self.rounds_done(ctx, txn);
        }
    }

    /// Every node answered the current round: commit if it agrees with the previous one (or
    /// one key was read), or read again.
    fn rounds_done(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        let single_round = self.mutant == Some(Mutant::SingleRoundReads);
        let Some(t) = self.coord.get_mut(&txn) else {
            return;
        };
        let Phase::Rounds {
            round,
            by_node,
            current,
            previous,
            ..
        } = &mut t.phase
        else {
            return;
        };
        let versions: BTreeMap<Key, Option<TxnId>> =
            current.iter().map(|(k, (v, _))| (k.clone(), *v)).collect();
        let agreed = current.len() <= 1 || single_round || previous.as_ref() == Some(&versions);
        if !agreed {
            if *round >= MAX_READ_ROUNDS {
                self.counters.read_only_aborts += 1;
                return self.abort(ctx, txn, AbortReason::ValidationFailed);
            }
            let (next, by_node) = (*round + 1, std::mem::take(by_node));
            return self.read_round(ctx, txn, next, by_node, Some(versions));
        }
        let values: BTreeMap<Key, Option<Value>> = current
            .iter()
            .map(|(k, (_, v))| (k.clone(), v.clone()))
            .collect();
        let t = self.coord.remove(&txn).expect("checked above");
        let (mut procedure, plan) = t.one_shot.expect("rounds are one-shot");
        let run = driver::run(procedure.as_mut(), driver::Source::Read(&values));
        let (ops, end) = match run {
            Some(run) => {
                let end = match run.end {
                    _ if run.missing.is_some() => {
                        self.counters.not_one_shot += 1;
                        not_one_shot(&plan.call)
                    }
                    Ok(()) => ClientReply::Committed {
                        commit_ts: ctx.now(),
                    },
                    Err(e) => reply_for(e),
                };
                (run.ops, end)
            }
            None => (
                Vec::new(),
                ClientReply::Aborted(AbortReason::ValidationFailed),
            ),
        };
        if matches!(end, ClientReply::Committed { .. }) {
            self.counters.read_only_commits += 1;
        }
        if let Some(pending) = t.pending {
            pending.answer(ctx, executed(Some(txn), ops, end));
        }
    }

    fn read_reply(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        from: NodeId,
        txn: TxnId,
        seq: u32,
        version: Option<TxnId>,
        value: Option<Value>,
    ) {
        let Some(t) = self.coord.get_mut(&txn) else {
            return;
        };
        let expected = t.read.awaits(seq) && t.read.waiting().is_some_and(|(n, _)| *n == from);
        if !expected || !matches!(t.phase, Phase::Executing) {
            return;
        }
        let Some(pending) = t.pending.take() else {
            return;
        };
        let (node, key) = t.read.answered(seq).expect("checked above");
        t.reads.push(ReadDone { key, version, node });
        t.last_active = ctx.now();
        pending.answer(ctx, ClientReply::Value(value));
    }

    fn started(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        from: NodeId,
        txn: TxnId,
        answer: Result<Deps, AbortReason>,
    ) {
        let Some(Phase::Starting {
            waiting,
            deps,
            nodes,
        }) = self.coord.get_mut(&txn).map(|t| &mut t.phase)
        else {
            return;
        };
        if !waiting.contains(&from) {
            return;
        }
        match answer {
            Err(reason) => return self.abort(ctx, txn, reason),
            Ok(found) => {
                waiting.remove(&from);
                deps.extend(found.into_iter().filter(|d| *d != txn));
            }
        }
        if !waiting.is_empty() {
            return;
        }
        let nodes = std::mem::take(nodes);
        let deps: Deps = std::mem::take(deps).into_iter().collect();
        let t = self.coord.remove(&txn).expect("checked above");
        let (procedure, one_shot) = match t.one_shot {
            Some((p, plan)) => (Some(p), Some(plan)),
            None => (None, None),
        };
        let plan = Plan { deps, one_shot };
        // The decision is durable before any node hears of it.
        ctx.persist(
            replica::Record::Decided {
                txn,
                decision: plan.clone(),
                replicas: nodes.clone(),
            }
            .into(),
        );
        let run = plan.one_shot.as_ref().map(|_| DeferredRun {
            procedure,
            values: BTreeMap::new(),
            installs: None,
            ops: Vec::new(),
            end: None,
        });
        let deps = plan.deps.clone();
        self.decisions.insert(
            txn,
            Decision {
                plan,
                waiting: nodes.iter().copied().collect(),
                pending: t.pending,
                sent_at: ctx.now(),
                run,
                component: None,
            },
        );
        for node in nodes {
            let msg = Msg::Commit {
                txn,
                deps: deps.clone(),
            };
            self.deliver(ctx, node, msg);
        }
    }

    /// A node's deferrable piece of `txn` took its turn and sent what its keys hold.
    fn piece_read(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        from: NodeId,
        txn: TxnId,
        values: Vec<(Key, Option<Value>)>,
    ) {
        let Some(d) = self.decisions.get_mut(&txn) else {
            return;
        };
        let (Some(run), Some(plan)) = (&mut d.run, &d.plan.one_shot) else {
            return;
        };
        if let Some(installs) = &run.installs {
            if d.waiting.contains(&from) {
                let writes = installs.get(&from).cloned().unwrap_or_default();
                self.deliver(ctx, from, Msg::Install { txn, writes });
            }
            return;
        }
        for (key, value) in values {
            // Every replica of a key holds the same value at the piece's turn: the first is
            // kept.
            if plan.keys.binary_search(&key).is_ok() {
                run.values.entry(key).or_insert(value);
            }
        }
        if run.values.len() == plan.keys.len() {
            self.compute(ctx, txn);
        }
    }

    /// Every key of a one-shot transaction was read at its turn: run its procedure over them
    /// and send each node its writes (ROCOCO's deferred execution, with the procedure's code
    /// at the coordinator).
    fn compute(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        let placement = self.env.placement.clone();
        let Some(d) = self.decisions.get_mut(&txn) else {
            return;
        };
        let (Some(run), Some(plan)) = (&mut d.run, &d.plan.one_shot) else {
            return;
        };
        ctx.charge(Work::reads(run.values.len()));
        let outcome = run
            .procedure
            .as_mut()
            .and_then(|p| driver::run(p.as_mut(), driver::Source::Read(&run.values)));
        let (ops, writes, end) = match outcome {
            Some(r) => {
                let declared = r
                    .writes
                    .keys()
                    .all(|k| plan.writes.binary_search(k).is_ok());
                match r.end {
                    // Over the values read it touched keys the dry run did not: its keys
                    // depend on its reads, and it writes nothing.
                    _ if r.missing.is_some() || !declared => {
                        self.counters.not_one_shot += 1;
                        (r.ops, BTreeMap::new(), Some(not_one_shot(&plan.call)))
                    }
                    Ok(()) => (r.ops, r.writes, None),
                    Err(e) => (r.ops, BTreeMap::new(), Some(reply_for(e))),
                }
            }
            // Rebuilt after a restart from a call this node can no longer run: write nothing.
            None => (
                Vec::new(),
                BTreeMap::new(),
                Some(ClientReply::Aborted(AbortReason::ValidationFailed)),
            ),
        };
        let mut installs: BTreeMap<NodeId, Writes> =
            d.waiting.iter().map(|n| (*n, Vec::new())).collect();
        for (key, value) in writes {
            for &r in placement.replicas(placement.partition_of(&key)) {
                if let Some(w) = installs.get_mut(&r) {
                    w.push((key.clone(), value.clone()));
                }
            }
        }
        run.ops = ops;
        run.end = end;
        run.installs = Some(installs.clone());
        ctx.persist(Record::Computed {
            txn,
            installs: installs.clone(),
        });
        for (node, writes) in installs {
            self.deliver(ctx, node, Msg::Install { txn, writes });
        }
    }

    fn executed(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, txn: TxnId, component: Deps) {
        let Some(d) = self.decisions.get_mut(&txn) else {
            return;
        };
        d.waiting.remove(&from);
        if !component.is_empty() {
            d.component.get_or_insert(component);
        }
        if !d.waiting.is_empty() {
            return;
        }
        let d = self.decisions.remove(&txn).expect("checked above");
        let finished = Finished {
            deps: d.plan.deps.clone(),
            component: d.component.clone(),
        };
        ctx.persist(Record::Finished {
            txn,
            finished: finished.clone(),
        });
        self.finished.insert(txn, (ctx.now(), finished));
        let Some(pending) = d.pending else {
            return;
        };
        let commit_ts = ctx.now();
        let reply = match d.run {
            Some(run) => {
                let end = run.end.unwrap_or(ClientReply::Committed { commit_ts });
                executed(Some(txn), run.ops, end)
            }
            None => ClientReply::Committed { commit_ts },
        };
        pending.answer(ctx, reply);
    }

    fn confirmed(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        from: NodeId,
        txn: TxnId,
        versions: Vec<Option<TxnId>>,
    ) {
        let Some(Phase::Confirming { expected }) = self.coord.get_mut(&txn).map(|t| &mut t.phase)
        else {
            return;
        };
        let Some(first) = expected.remove(&from) else {
            return;
        };
        if first != versions {
            self.counters.read_only_aborts += 1;
            return self.abort(ctx, txn, AbortReason::ValidationFailed);
        }
        if !expected.is_empty() {
            return;
        }
        let t = self.coord.remove(&txn).expect("checked above");
        self.counters.read_only_commits += 1;
        if let Some(pending) = t.pending {
            let commit_ts = ctx.now();
            pending.answer(ctx, ClientReply::Committed { commit_ts });
        }
    }

    /// Abort `txn`, coordinated here and not decided: drop its pieces, answer the client.
    fn abort(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, reason: AbortReason) {
        let Some(t) = self.coord.remove(&txn) else {
            return;
        };
        if let Phase::Starting { nodes, .. } = t.phase {
            for node in nodes {
                self.deliver(ctx, node, Msg::Abort { txn });
            }
        }
        if let Some(pending) = t.pending {
            pending.answer(ctx, ClientReply::Aborted(reason));
        }
    }

    /// Resend `txn`'s commit to `node`, and its writes once computed.
    fn resend(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, node: NodeId) {
        let Some(d) = self.decisions.get(&txn) else {
            return;
        };
        let deps = d.plan.deps.clone();
        let install = d
            .run
            .as_ref()
            .and_then(|r| r.installs.as_ref())
            .map(|i| i.get(&node).cloned().unwrap_or_default());
        self.deliver(ctx, node, Msg::Commit { txn, deps });
        if let Some(writes) = install {
            self.deliver(ctx, node, Msg::Install { txn, writes });
        }
    }

    /// A node asks what became of `txn` (see the module docs, "Termination").
    fn query_outcome(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, txn: TxnId) {
        if self.decisions.contains_key(&txn) {
            return self.resend(ctx, txn, from);
        }
        if self.coord.contains_key(&txn) || self.finished.contains_key(&txn) {
            // Still starting: the decision, or the phase timeout's abort, will come. Finished:
            // the node executed it already.
            return;
        }
        self.deliver(ctx, from, Msg::Abort { txn });
    }

    /// A node walking the ancestors of its pieces asks about `txn` (ROCOCO §3.3's inquiry).
    fn inquire(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, txn: TxnId) {
        let status = if let Some(d) = self.decisions.get(&txn) {
            Status::Committed(d.plan.deps.clone())
        } else if let Some((_, f)) = self.finished.get(&txn) {
            match &f.component {
                Some(members) => Status::Finished(members.clone()),
                // Every acknowledgement naming it was lost: walkers go on through its edges.
                None => Status::Committed(f.deps.clone()),
            }
        } else if self.coord.contains_key(&txn) {
            // Undecided: asked again later.
            return;
        } else {
            Status::Unknown
        };
        self.deliver(ctx, from, Msg::Inquired { txn, status });
    }

    // ----- periodic work -----

    fn tick(&mut self, ctx: &mut Ctx<'_, Self>) {
        let now = ctx.now();
        let patience = self.env.options.participant_timeout;
        // Termination: pieces not committed for long ask their coordinator.
        let mut overdue: Vec<TxnId> = self
            .pieces
            .iter()
            .filter(|(_, p)| p.deps.is_none() && now.since(p.last_query) >= patience)
            .map(|(t, _)| *t)
            .collect();
        overdue.sort();
        for txn in overdue {
            if let Some(p) = self.pieces.get_mut(&txn) {
                p.last_query = now;
            }
            self.deliver(ctx, txn.coordinator(), Msg::QueryOutcome { txn });
        }
        // Deferrable pieces whose writes did not come: their values again.
        let mut unanswered: Vec<TxnId> = self
            .pieces
            .iter()
            .filter(|(_, p)| matches!(p.form, Form::Deferred { begun: Some(at), install: None } if now.since(at) >= patience))
            .map(|(t, _)| *t)
            .collect();
        unanswered.sort();
        for txn in unanswered {
            if let Some(p) = self.pieces.get_mut(&txn) {
                let keys: Vec<Key> = p.reads.iter().chain(&p.write_keys).cloned().collect();
                if let Form::Deferred { begun, .. } = &mut p.form {
                    *begun = Some(now);
                }
                self.send_values(ctx, txn, keys);
            }
        }
        // Commits not acknowledged for long are sent again.
        let late: Vec<(TxnId, Vec<NodeId>)> = self
            .decisions
            .iter()
            .filter(|(_, d)| now.since(d.sent_at) >= patience)
            .map(|(t, d)| (*t, d.waiting.iter().copied().collect()))
            .collect();
        for (txn, nodes) in late {
            if let Some(d) = self.decisions.get_mut(&txn) {
                d.sent_at = now;
            }
            for node in nodes {
                self.counters.commits_resent += 1;
                self.resend(ctx, txn, node);
            }
        }
        // Transactions whose client vanished mid-execution: nothing of theirs is anywhere.
        let idle_after = self.env.options.idle_txn_timeout;
        self.coord.retain(|_, t| {
            !(matches!(t.phase, Phase::Executing)
                && t.pending.is_none()
                && now.since(t.last_active) >= idle_after)
        });
        let retention = self.env.options.gc_retention;
        let horizon = now.saturating_sub(retention);
        self.ended.retain(|_, (at, _)| *at >= horizon);
        self.learned.retain(|_, l| l.at >= horizon);
        self.inquired.retain(|_, at| *at >= horizon);
        let finished_horizon = now.saturating_sub(retention * FINISHED_RETENTION_FACTOR);
        for (at, _) in self.finished.values_mut() {
            // Rebuilt from the log: kept a full retention from the restart.
            if *at == Timestamp::ZERO {
                *at = now;
            }
        }
        self.finished.retain(|_, (at, _)| *at >= finished_horizon);
        // Undecided ancestors are asked about again.
        if self.pieces.values().any(|p| p.deps.is_some()) {
            self.execute_ready(ctx);
        }
        // Reads return the newest version only: older ones are never read again.
        self.store.collect_garbage(Timestamp(self.pos), GC_BATCH);
        ctx.set_timer(self.env.options.gc_interval, Timer::Tick);
    }

    /// Rebuild state from one durable record (see [`Record`]).
    fn replay(&mut self, record: Record) {
        use replica::Record as Kit;
        match record {
            Record::Kit(Kit::IdsReserved { below }) => self.ids.resume_below(below),
            Record::Kit(Kit::Versions { key, versions }) => {
                replica::restore_versions(&mut self.store, &key, versions)
            }
            Record::Kit(Kit::Decided {
                txn,
                decision,
                replicas,
            }) => {
                let run = decision.one_shot.as_ref().map(|plan| DeferredRun {
                    procedure: self.env.procedures.instantiate(&plan.call).ok(),
                    values: BTreeMap::new(),
                    installs: None,
                    ops: Vec::new(),
                    end: None,
                });
                let d = Decision {
                    plan: decision,
                    waiting: replicas.into_iter().collect(),
                    pending: None,
                    // Resent at the first tick.
                    sent_at: Timestamp::ZERO,
                    run,
                    component: None,
                };
                self.decisions.insert(txn, d);
            }
            Record::Kit(Kit::Forgotten { txn }) => {
                self.decisions.remove(&txn);
            }
            // Not written by this protocol.
            Record::Kit(_) => {}
            Record::Position { pos } => self.pos = pos,
            Record::Started {
                txn,
                age,
                reads,
                writes,
            } => {
                let write_keys = writes.iter().map(|(k, _)| k.clone()).collect();
                // Overdue from the start: ask the coordinator at once.
                let form = Form::Interactive { writes, age };
                self.register(txn, reads, write_keys, form, Timestamp::ZERO);
            }
            Record::StartedDeferred { txn, reads, writes } => {
                let form = Form::Deferred {
                    begun: None,
                    install: None,
                };
                self.register(txn, reads, writes, form, Timestamp::ZERO);
            }
            Record::Executed { txn, writes } => {
                if let Some(piece) = self.unregister(txn) {
                    let writes = match (piece.form, writes) {
                        (Form::Interactive { writes, .. }, _) => writes,
                        (Form::Deferred { .. }, writes) => writes.unwrap_or_default(),
                    };
                    self.install(txn, &writes);
                }
            }
            Record::Aborted { txn } => {
                self.unregister(txn);
            }
            Record::Computed { txn, installs } => {
                if let Some(run) = self.decisions.get_mut(&txn).and_then(|d| d.run.as_mut()) {
                    run.installs = Some(installs);
                }
            }
            Record::Finished { txn, finished } => {
                self.decisions.remove(&txn);
                self.finished.insert(txn, (Timestamp::ZERO, finished));
            }
        }
    }
}

impl InteractiveCoordinator for Rococo {
    fn begin(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        pending: Pending,
        read_only: bool,
        age: Timestamp,
    ) {
        let txn = self.new_coord(ctx, read_only, age, Phase::Executing);
        let snapshot = ctx.now();
        pending.answer(ctx, ClientReply::Begun { txn, snapshot });
    }

    fn read(&mut self, ctx: &mut Ctx<'_, Self>, pending: Pending, txn: TxnId, key: Key) {
        let now = ctx.now();
        let me = self.id();
        let placement = self.env.placement.clone();
        let t = match self.executing(txn) {
            Ok(t) => t,
            Err(reply) => return pending.answer(ctx, reply),
        };
        let replica = placement.closest_replica(me, placement.partition_of(&key));
        t.pending = Some(pending);
        t.last_active = now;
        let seq = t.read.begin((replica, key.clone()));
        // Reads park behind pending writers, which may wait for a silent coordinator.
        ctx.set_timer(self.env.options.participant_timeout, Timer::Read(txn, seq));
        self.deliver(ctx, replica, Msg::Read { txn, seq, key });
    }

    fn commit(&mut self, ctx: &mut Ctx<'_, Self>, pending: Pending, txn: TxnId, writes: Writes) {
        let now = ctx.now();
        let placement = self.env.placement.clone();
        let single_round = self.mutant == Some(Mutant::SingleRoundReads);
        let t = match self.executing(txn) {
            Ok(t) => t,
            Err(reply) => return pending.answer(ctx, reply),
        };
        if t.read_only && !writes.is_empty() {
            let err = RequestError::WriteInReadOnly(txn);
            return pending.answer(ctx, ClientReply::Rejected(err));
        }
        t.last_active = now;
        if writes.is_empty() {
            if t.reads.len() <= 1 || single_round {
                // One key read after its pending writers: nothing to confirm.
                self.coord.remove(&txn);
                self.counters.read_only_commits += 1;
                return pending.answer(ctx, ClientReply::Committed { commit_ts: now });
            }
            // ROCOCO §3.4: a second round, to compare with the first.
            let mut keys: BTreeMap<NodeId, Vec<Key>> = BTreeMap::new();
            let mut expected: BTreeMap<NodeId, Vec<Option<TxnId>>> = BTreeMap::new();
            for r in &t.reads {
                keys.entry(r.node).or_default().push(r.key.clone());
                expected.entry(r.node).or_default().push(r.version);
            }
            t.pending = Some(pending);
            t.phase = Phase::Confirming { expected };
            ctx.set_timer(self.env.options.participant_timeout, Timer::Phase(txn));
            for (node, keys) in keys {
                self.deliver(ctx, node, Msg::Confirm { txn, keys });
            }
            return;
        }
        let reads: Reads = t.reads.iter().map(|r| (r.key.clone(), r.version)).collect();
        let by = ByReplica::group(&placement, &reads, writes);
        t.pending = Some(pending);
        let age = t.age;
        let starts = by
            .parts
            .into_iter()
            .map(|(node, (reads, writes))| {
                let start = Msg::Start {
                    txn,
                    age,
                    reads,
                    writes,
                };
                (node, start)
            })
            .collect();
        self.start_phase(ctx, txn, starts);
    }

    fn abort_asked(&mut self, _ctx: &mut Ctx<'_, Self>, txn: TxnId) -> Result<(), String> {
        let committing = self.decisions.contains_key(&txn)
            || self
                .coord
                .get(&txn)
                .is_some_and(|t| !matches!(t.phase, Phase::Executing));
        if committing {
            return Err(format!("transaction {txn:?} is already committing"));
        }
        // Nothing of an executing transaction is anywhere but here.
        self.coord.remove(&txn);
        Ok(())
    }
}

impl Protocol for Rococo {
    type Msg = Msg;
    type Timer = Timer;
    type Record = Record;
    const FORMS: &'static [augur_contract::forms::RequestForm] = INTERACTIVE_AND_ONE_SHOT;

    fn new(env: &NodeEnv) -> Self {
        Rococo {
            env: env.clone(),
            mutant: env.options.mutant.as_deref().and_then(Mutant::named),
            store: MvStore::new(),
            pos: 0,
            pieces: FxHashMap::default(),
            arrivals: 0,
            writers: FxHashMap::default(),
            readers: FxHashMap::default(),
            parked: Vec::new(),
            ended: FxHashMap::default(),
            learned: FxHashMap::default(),
            inquired: FxHashMap::default(),
            coord: FxHashMap::default(),
            decisions: BTreeMap::new(),
            finished: FxHashMap::default(),
            ids: TxnIds::new(env.id),
            counters: Counters::default(),
        }
    }

    fn recover(env: &NodeEnv, records: &mut dyn Iterator<Item = Record>) -> Self {
        let mut node = Rococo::new(env);
        for record in records {
            node.replay(record);
        }
        node
    }

    fn checkpoint(&self, emit: &mut dyn FnMut(Record)) {
        emit(Record::Position { pos: self.pos });
        self.ids.checkpoint::<Record, Plan>(emit);
        replica::checkpoint_versions::<_, _, Record>(&self.store, emit);
        // Pending pieces in their start order, which rebuilds each key's list, and each
        // piece's local dependencies among those still pending, as they were.
        let mut pending: Vec<(&TxnId, &Piece)> = self.pieces.iter().collect();
        pending.sort_by_key(|(_, p)| p.arrival);
        for (txn, p) in pending {
            let txn = *txn;
            emit(match &p.form {
                Form::Interactive { writes, age } => Record::Started {
                    txn,
                    age: *age,
                    reads: p.reads.clone(),
                    writes: writes.clone(),
                },
                Form::Deferred { .. } => Record::StartedDeferred {
                    txn,
                    reads: p.reads.clone(),
                    writes: p.write_keys.clone(),
                },
            });
        }
        for (txn, d) in &self.decisions {
            emit(
                replica::Record::Decided {
                    txn: *txn,
                    decision: d.plan.clone(),
                    replicas: d.waiting.iter().copied().collect(),
                }
                .into(),
            );
            if let Some(installs) = d.run.as_ref().and_then(|r| r.installs.clone()) {
                emit(Record::Computed {
                    txn: *txn,
                    installs,
                });
            }
        }
        let mut finished: Vec<_> = self.finished.iter().collect();
        finished.sort_by_key(|(t, _)| **t);
        for (txn, (_, f)) in finished {
            emit(Record::Finished {
                txn: *txn,
                finished: f.clone(),
            });
        }
    }

    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        ctx.set_timer(self.env.options.gc_interval, Timer::Tick);
    }

    fn on_client(&mut self, ctx: &mut Ctx<'_, Self>, request: ClientRequest) {
        let pending = Pending::of(&request);
        match request.op {
            ClientOp::Execute {
                call, read_only, ..
            } => self.execute(ctx, pending, call, read_only),
            _ => serve_interactive(self, ctx, request),
        }
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, msg: Msg) {
        self.handle(ctx, from, msg);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, Self>, timer: Timer) {
        match timer {
            Timer::Tick => self.tick(ctx),
            Timer::Read(txn, seq) => {
                let waiting = self.coord.get(&txn).is_some_and(|t| t.read.awaits(seq));
                if waiting {
                    self.abort(ctx, txn, AbortReason::Timeout);
                }
            }
            Timer::Phase(txn) => {
                let stuck = self
                    .coord
                    .get(&txn)
                    .is_some_and(|t| !matches!(t.phase, Phase::Executing));
                if stuck {
                    self.abort(ctx, txn, AbortReason::Timeout);
                }
            }
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = self.counters;
        vec![
            ("pieces_executed", c.pieces_executed),
            ("deferred_executed", c.deferred_executed),
            ("refused_validation", c.refused_validation),
            ("refused_wait_die", c.refused_wait_die),
            ("reads_parked", c.reads_parked),
            ("read_only_commits", c.read_only_commits),
            ("read_only_aborts", c.read_only_aborts),
            ("read_rounds", c.read_rounds),
            ("commits_resent", c.commits_resent),
            ("inquiries", c.inquiries),
            ("cyclic_components", c.cyclic_components),
            ("not_one_shot", c.not_one_shot),
            ("pieces_now", self.pieces.len() as u64),
        ]
    }

    fn leftovers(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("pending_pieces", self.pieces.len() as u64),
            ("parked_reads", self.parked.len() as u64),
            ("undelivered_decisions", self.decisions.len() as u64),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mutant_is_known() {
        for (name, _) in MUTANTS {
            assert!(Mutant::named(name).is_some(), "{name}");
        }
    }

    #[test]
    fn seniority_orders_by_claimed_age_then_sequence_then_node() {
        let older_on_high_node = TxnId::new(NodeId(7), 3);
        let younger_on_low_node = TxnId::new(NodeId(0), 4);
        let now = Timestamp(1_000);
        assert!(seniority(now, older_on_high_node) < seniority(now, younger_on_low_node));
        // A retry that has been trying longer is older, whatever its id.
        let retry = seniority(Timestamp(400), younger_on_low_node);
        assert!(retry < seniority(now, older_on_high_node));
    }
}
