//! The node of the active-replication protocols of the OAB study (`oab-spec`, `sm-rep`): every
//! node holds the whole database and runs every one-shot request; the order in which requests
//! commit is decided by the Raft [`sequencer`] alone (final delivery), and what a node does
//! before that (optimistic delivery) never changes it. A protocol is this node under its
//! [`Replication`]: `oab-spec` starts a request on optimistic delivery, lets its reads see
//! every completed uncommitted version and forks an instance per version
//! ([`Replication::SPECULATIVE`]); `sm-rep` starts it on final delivery over committed versions
//! only. Both commit in the same way, written here once.
//!
//! * **Optimistic delivery.** The node a client sends a request to checks it, sends it
//!   (`Optimistic`) to every other node and proposes it to the sequencer; each node delivers
//!   it optimistically on arrival, in its own arrival order (its *arrival number*), and starts
//!   its first instance. Duplicates and copies arriving after the request committed are
//!   dropped by request id; a request optimistically delivered and never finally delivered
//!   (its proposal was lost with its submitter) is reclaimed after [`RECLAIM_AFTER`].
//! * **Final delivery.** The sequencer's committed batches, held [`FINAL_DELAY_MS`] first when
//!   that is set (an emulated gap, labelled in every run that sets it), give each request its
//!   position; the positions form the TO-queue. A request finally delivered before it was
//!   optimistically delivered starts at once.
//! * **Commit at the head.** The request at the head of the TO-queue commits the lowest of its
//!   completed instances whose every read is still the newest committed version of its key
//!   (absent keys included): all such instances read the same values, hence wrote the same
//!   writes. Its other instances are aborted, their versions removed; its committed flag
//!   (leaving the family table) stops the instances still running. With none committable, it
//!   waits for a running instance whose reads so far are all newest, or else runs again at the
//!   head over committed versions (a *re-execution*), which nothing can invalidate.
//! * **Answers.** The submitter answers its client from the committed instance, at its
//!   position: nothing speculative reaches a client.
//! * **Failures.** The committed writes are logged (`Applied`) before the answer leaves, and
//!   every few ticks how far this node committed (`Through`); a restarted node rebuilds its
//!   store from them and the sequencer delivers every batch again, the positions already
//!   committed skipped. Instances and families are volatile: a request in flight at a crash
//!   runs again from its final delivery. The log is compacted below what every node announced
//!   committed (`Horizon`).
//!
//! Versions live in the node's one [`MvStore`]: committed versions by position (writer: the
//! request's id), an instance's writes as uncommitted versions once it completes (writer: its
//! instance number, `InstanceNo::writer`). Instances run on the node's workers
//! ([`Ctx::offload`]) over the `Pool` they share with the handler behind one lock; each read
//! and the completion take it briefly. Every node must replicate every partition (the
//! registry refuses a placement that does not): full replication is what the paper studies.

use crate::common::coordinator::Pending;
use crate::common::dispatch::{self, BlindWrites, Body, ClientStep, Ran, ended_how};
use crate::common::ordered::WORKERS;
use crate::common::replica::{self, TxnIds};
use crate::common::sequencer::{self, RaftMessage, Sequencer, SequencerRecord, SequencerTimer};
use crate::protocol_info::{ProtocolInfo, SettingInfo};
use augur_contract::driver::{self, Driver, Progress, Run};
use augur_contract::forms::ONE_SHOT_AND_BLIND_WRITES;
use augur_contract::inbound::{BadMessage, CheckMessage, Inbound};
use augur_contract::{Ctx, NodeEnv, Protocol, Work};
use augur_storage::{MvStore, VersionState};
use augur_types::{
    ClientReply, ClientRequest, Key, NodeId, PartitionId, ProcedureCall, RequestForm, Timestamp,
    TxnId, Value,
};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// The setting for the emulated final-delivery gap, in milliseconds: each node holds every
/// committed batch this long before delivering it (the OAB traces' mean is about 400 ms).
pub const FINAL_DELAY_MS: &str = "final_delay_ms";
/// The final-delivery gap setting.
pub const FINAL_DELAY_SETTING: SettingInfo = SettingInfo {
    name: FINAL_DELAY_MS,
    values: &["0", "50", "100", "200", "400", "800"],
    default: "0",
    doc: "milliseconds each node holds a committed batch before delivering it finally, emulating the OAB traces' gap (about 400 ms); 0 delivers at once, after the real Raft gap alone",
};
/// The cap on instances per request (`oab-spec`).
pub const MAX_INSTANCES: SettingInfo = SettingInfo {
    name: "max_instances",
    values: &["1", "2", "4", "8", "16", "32", "64"],
    default: "16",
    doc: "instances one request may have at a node (its first and its forks); a read that would fork past it takes its first choice only (re-execution at the head still commits the request)",
};
/// The cap on live instances per node (`oab-spec`).
pub const MAX_LIVE_INSTANCES: SettingInfo = SettingInfo {
    name: "max_live_instances",
    values: &["64", "256", "1024", "4096"],
    default: "1024",
    doc: "instances alive at a node at once; past it no read forks (each request still runs its first instance)",
};

/// Whether a request's first instance runs again when an earlier request's first instance
/// completes with a version it should have read (`oab-spec`).
pub const EAGER_CHAIN: SettingInfo = SettingInfo {
    name: "eager_chain",
    values: crate::protocol_info::SWITCH_VALUES,
    default: "off",
    doc: "on: when a request's first instance completes, the first instance of each later request that read one of its keys from another version than its first choice now runs again from that read, as the request's new first instance (the old one goes on as a fork), so the first instances follow the arrival order eagerly (AGGRO's speculation, an extension); off, the paper's: versions that appear after a read are never explored",
};

/// How long an optimistically delivered request may wait for its final delivery before it is
/// reclaimed, and how long a committed request's id is kept to drop late copies.
pub const RECLAIM_AFTER: Duration = Duration::from_secs(20);
/// Garbage collection runs every tick; how far this node committed is announced (and logged)
/// every [`ANNOUNCE_EVERY`]th.
const TICK: Duration = Duration::from_millis(50);
const ANNOUNCE_EVERY: u64 = 10;
/// Keys examined per garbage-collection step.
const GC_BATCH: usize = 2048;

/// What a protocol built on this node chooses (see the module docs).
pub trait Replication: Send + Sized + 'static {
    /// Its registry entry (settings, mutants).
    const INFO: ProtocolInfo;
    /// A request starts on optimistic delivery, its reads see every completed uncommitted
    /// version of another request and fork one instance per version (`oab-spec`). Without, a
    /// request starts on final delivery and reads committed versions only (`sm-rep`).
    const SPECULATIVE: bool;
}

/// One request, as it is broadcast for optimistic delivery and ordered by the sequencer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// Its id, the family id of its instances; `txn.coordinator()` submitted it and answers.
    pub txn: TxnId,
    pub body: Body,
}

/// Messages between nodes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    Raft(RaftMessage),
    /// The submitter's copy of a request, for optimistic delivery (`oab-spec`).
    Optimistic(Request),
    /// The sender committed every position through this one, and logged so.
    Horizon {
        through: Timestamp,
    },
}

impl From<RaftMessage> for Msg {
    fn from(m: RaftMessage) -> Msg {
        Msg::Raft(m)
    }
}

impl CheckMessage for Msg {
    fn check(&self, at: &Inbound<'_>) -> Result<(), BadMessage> {
        match self {
            Msg::Raft(m) => m.check(at),
            Msg::Optimistic(request) => {
                at.txn_of_sender(request.txn)?;
                if !matches!(request.body, Body::Call { .. }) {
                    return Err(at.bad("an optimistic copy of blind writes".into()));
                }
                Ok(())
            }
            Msg::Horizon { .. } => Ok(()),
        }
    }
}

/// The node's timers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timer {
    Sequencer(SequencerTimer),
    /// An instance's run came back from a worker (ended, or stopped), after this many
    /// procedure steps.
    Ran(InstanceNo, u32),
    Tick,
}

impl From<SequencerTimer> for Timer {
    fn from(t: SequencerTimer) -> Timer {
        Timer::Sequencer(t)
    }
}

/// What the node writes to its log.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Record {
    Sequencer(SequencerRecord),
    /// Transaction-id reservations.
    Kit(replica::Record<Timestamp>),
    /// The request `txn` committed these writes at position `at`.
    Applied {
        at: Timestamp,
        txn: TxnId,
        writes: Vec<(Key, Option<Value>)>,
    },
    /// Every position through `at` is committed here.
    Through {
        at: Timestamp,
    },
}

impl From<SequencerRecord> for Record {
    fn from(r: SequencerRecord) -> Record {
        Record::Sequencer(r)
    }
}

impl From<replica::Record<Timestamp>> for Record {
    fn from(r: replica::Record<Timestamp>) -> Record {
        Record::Kit(r)
    }
}

/// One instance of a request at this node: a number of the node's own, never reused while the
/// node runs (instances are volatile).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstanceNo(u64);

impl InstanceNo {
    /// The writer of its uncommitted versions in the store (the uncommitted region holds only
    /// instances' versions, the committed region only requests').
    fn writer(self) -> TxnId {
        TxnId(self.0)
    }

    fn of_writer(writer: TxnId) -> InstanceNo {
        InstanceNo(writer.0)
    }
}

/// Which version a read returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    /// The newest committed version, committed at this position ([`Timestamp::ZERO`]: the key
    /// had none).
    Committed(Timestamp),
    /// An uncommitted version this instance wrote.
    Speculative(InstanceNo),
    /// An uncommitted version whose instance was aborted since: it can never be the newest.
    Gone,
}

/// One read of an instance.
#[derive(Clone, Debug)]
struct Read {
    key: Key,
    seen: Seen,
    value: Option<Value>,
}

/// Which versions an instance's reads see.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Visibility {
    /// The newest committed version and every completed uncommitted one of another request,
    /// forking at a read that sees several (`oab-spec`'s instances).
    All,
    /// The newest committed version only (`sm-rep`, and every re-execution at the head).
    Committed,
}

/// Where an instance is.
#[derive(Debug)]
enum State {
    /// Created (a fork), not yet handed to a worker.
    Queued,
    Running,
    /// Its run ended on a worker; the handler has not yet taken the result (in the simulator,
    /// the worker's time has not yet been spent), so its writes are not visible yet.
    Ended(Box<Completed>),
    /// It completed: its writes are installed as uncommitted versions.
    Complete(Box<Completed>),
}

/// How a completed instance ended.
#[derive(Debug)]
struct Completed {
    ran: Ran,
    writes: Vec<(Key, Option<Value>)>,
    /// The procedure steps its run took ([`Run::steps`]).
    steps: u32,
}

#[derive(Debug)]
struct Instance {
    family: TxnId,
    visibility: Visibility,
    state: State,
    /// Its reads, in order, one per key (a key read again is served the same value).
    reads: Vec<Read>,
    /// How many of `reads` it inherited from its parent at its fork (replayed, not read).
    inherited: usize,
}

/// A request this node knows and has not committed: the family of its instances.
#[derive(Debug)]
struct Family {
    request: Arc<Request>,
    /// Its place in this node's arrival order.
    arrival: u64,
    /// When this node first saw it.
    since: Timestamp,
    /// Its position, once finally delivered.
    position: Option<Timestamp>,
    /// Every instance it has had here, first first.
    instances: Vec<InstanceNo>,
}

/// The caps on instances ([`MAX_INSTANCES`], [`MAX_LIVE_INSTANCES`]).
#[derive(Clone, Copy, Debug)]
struct Caps {
    per_family: usize,
    live: usize,
    /// [`EAGER_CHAIN`].
    eager_chain: bool,
}

/// Deliberately broken variants, to show the checker catches what each rule prevents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mutant {
    /// Commit the first completed instance at the head without checking its reads.
    NoReadValidation,
    /// No committed flag: a family's other instances go on after it committed, and one that
    /// completes with reads that are then newest commits too.
    DoubleCommit,
    /// A forked child neither validates the reads it inherits nor has them validated at the
    /// head.
    NoInheritedValidation,
    /// The client hears the family's first completed instance, not the committed one.
    LeakSpeculative,
    /// Not a bug: aborted instances' versions stay readable (the head's validation rejects
    /// every read of them), a control the checker must pass.
    KeepAborted,
}

impl Mutant {
    fn named(name: Option<&str>) -> Option<Mutant> {
        Some(match name? {
            "no-read-validation" => Mutant::NoReadValidation,
            "double-commit" => Mutant::DoubleCommit,
            "no-inherited-validation" => Mutant::NoInheritedValidation,
            "leak-speculative" => Mutant::LeakSpeculative,
            "keep-aborted" => Mutant::KeepAborted,
            _ => return None,
        })
    }
}

/// What the handler and the workers share behind one lock: the store with every version, the
/// instances and the families.
struct Pool {
    store: MvStore<()>,
    instances: FxHashMap<InstanceNo, Instance>,
    families: FxHashMap<TxnId, Family>,
    /// The instances that read an uncommitted version, by the version's instance.
    readers: FxHashMap<InstanceNo, Vec<InstanceNo>>,
    /// Forks created by workers, for the handler to start.
    forks: Vec<InstanceNo>,
    next_instance: u64,
    caps: Caps,
    mutant: Option<Mutant>,
    counters: PoolCounters,
    /// `keep-aborted`: the versions of aborted instances, kept readable for [`KEPT_FOR`] more
    /// commits, with the commit count when each was aborted.
    kept: VecDeque<(u64, Vec<(Key, InstanceNo)>)>,
    commits: u64,
}

/// How many commits `keep-aborted` keeps an aborted instance's versions for.
const KEPT_FOR: u64 = 64;

#[derive(Default, Clone, Copy)]
struct PoolCounters {
    forks: u64,
    forks_capped: u64,
    chain_reruns: u64,
}

type SharedPool = Arc<Mutex<Pool>>;

/// The pool, whether or not a worker panicked holding it (its changes are each complete).
fn lock(pool: &Mutex<Pool>) -> MutexGuard<'_, Pool> {
    pool.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Pool {
    fn new_instance(
        &mut self,
        family: TxnId,
        visibility: Visibility,
        reads: Vec<Read>,
    ) -> InstanceNo {
        self.next_instance += 1;
        let no = InstanceNo(self.next_instance);
        for read in &reads {
            if let Seen::Speculative(writer) = read.seen {
                self.readers.entry(writer).or_default().push(no);
            }
        }
        let inherited = reads.len();
        self.instances.insert(
            no,
            Instance {
                family,
                visibility,
                state: State::Queued,
                reads,
                inherited,
            },
        );
        if let Some(f) = self.families.get_mut(&family) {
            f.instances.push(no);
        }
        no
    }

    /// The position of `key`'s newest committed version, and its value (`ZERO`: none).
    fn newest(&self, key: &Key) -> (Timestamp, Option<Value>) {
        match self.store.get(key).and_then(|e| e.latest_committed()) {
            Some(v) => (v.ts, v.value.clone()),
            None => (Timestamp::ZERO, None),
        }
    }

    /// Whether `read` still returns what it returned then: the newest committed version, or
    /// (`speculative_ok`) an uncommitted version whose instance is alive.
    fn still_holds(&self, read: &Read, speculative_ok: bool) -> bool {
        match read.seen {
            Seen::Committed(ts) => self.newest(&read.key).0 == ts,
            Seen::Speculative(writer) => speculative_ok && self.instances.contains_key(&writer),
            Seen::Gone => false,
        }
    }

    /// Whether instance `no` may commit now: it completed and every read it made is of the
    /// newest committed version of its key.
    fn committable(&self, no: InstanceNo) -> bool {
        let Some(i) = self.instances.get(&no) else {
            return false;
        };
        if !matches!(i.state, State::Complete(_)) {
            return false;
        }
        match self.mutant {
            Some(Mutant::NoReadValidation) => true,
            Some(Mutant::NoInheritedValidation) => i.reads[i.inherited..]
                .iter()
                .all(|r| self.still_holds(r, false)),
            _ => i.reads.iter().all(|r| self.still_holds(r, false)),
        }
    }

    /// Whether instance `no` is still running (or queued) with every read so far newest: it may
    /// yet be committable at the head.
    fn promising(&self, no: InstanceNo) -> bool {
        self.instances.get(&no).is_some_and(|i| {
            matches!(i.state, State::Queued | State::Running | State::Ended(_))
                && i.reads.iter().all(|r| self.still_holds(r, false))
        })
    }

    /// The versions of `key` a read by `reader` sees, first choice first (see
    /// [`Visibility::All`]). The first is the version of the nearest request before the
    /// reader's in this node's arrival order whose first instance wrote the key: the first
    /// instances, each taking first choices, run the requests serially in arrival order (the
    /// optimistic order's guess, as AGGRO speculates). Then the newest committed version, then
    /// every other version of an earlier request, nearest first, then those of later requests,
    /// earliest first.
    fn visible(&self, reader: &Instance, key: &Key) -> Vec<(Seen, Option<Value>)> {
        let (ts, value) = self.newest(key);
        let committed = (Seen::Committed(ts), value);
        if reader.visibility == Visibility::Committed {
            return vec![committed];
        }
        let mine = self.families.get(&reader.family).map_or(0, |f| f.arrival);
        // (class: 0 an earlier request's first instance, 1 another of an earlier request,
        // 2 a later request's; nearness; the instance; its value)
        let mut uncommitted: Vec<(u8, u64, InstanceNo, Option<Value>)> = Vec::new();
        if let Some(entry) = self.store.get(key) {
            for v in entry.uncommitted() {
                let writer = InstanceNo::of_writer(v.writer);
                let (arrival, first) = match self.instances.get(&writer) {
                    Some(w) if w.family == reader.family => continue,
                    Some(w) => match self.families.get(&w.family) {
                        Some(f) => (f.arrival, f.instances.first() == Some(&writer)),
                        // Its request committed another instance (`double-commit` keeps it).
                        None => continue,
                    },
                    // An aborted instance's version, kept by `keep-aborted`.
                    None => (u64::MAX, false),
                };
                let (class, rank) = match (arrival > mine, first) {
                    (false, true) => (0, mine - arrival),
                    (false, false) => (1, mine - arrival),
                    (true, _) => (2, arrival),
                };
                uncommitted.push((class, rank, writer, v.value.clone()));
            }
        }
        uncommitted.sort_by_key(|(class, rank, writer, _)| (*class, *rank, *writer));
        let mut choices = Vec::with_capacity(uncommitted.len() + 1);
        if uncommitted.first().is_some_and(|(class, ..)| *class == 0) {
            let (_, _, writer, value) = uncommitted.remove(0);
            choices.push((Seen::Speculative(writer), value));
        }
        choices.push(committed);
        // The rest by nearness alone, first instances or not.
        uncommitted.sort_by_key(|(class, rank, writer, _)| (*class == 2, *rank, *writer));
        choices.extend(
            uncommitted
                .into_iter()
                .map(|(_, _, writer, value)| (Seen::Speculative(writer), value)),
        );
        choices
    }

    /// Instance `no` reads `key`: the value it gets, after forking a child for each other
    /// version it sees (within the caps); `None` if it was aborted (its run stops).
    fn read(&mut self, no: InstanceNo, key: &Key) -> Option<Option<Value>> {
        let reader = self.instances.get(&no)?;
        if let Some(read) = reader.reads.iter().find(|r| r.key == *key) {
            return Some(read.value.clone());
        }
        let family = reader.family;
        let mut choices = self.visible(reader, key).into_iter();
        let (seen, value) = choices
            .next()
            .expect("the committed version is always seen");
        let prefix = reader.reads.clone();
        let live_cap = self.caps.live;
        let family_cap = self.caps.per_family;
        for (other, other_value) in choices {
            let had = self.families.get(&family).map_or(0, |f| f.instances.len());
            if had >= family_cap || self.instances.len() >= live_cap {
                self.counters.forks_capped += 1;
                break;
            }
            let mut reads = prefix.clone();
            reads.push(Read {
                key: key.clone(),
                seen: other,
                value: other_value,
            });
            let child = self.new_instance(family, Visibility::All, reads);
            self.counters.forks += 1;
            self.forks.push(child);
        }
        if let Seen::Speculative(writer) = seen {
            self.readers.entry(writer).or_default().push(no);
        }
        let reader = self.instances.get_mut(&no).expect("found above");
        reader.reads.push(Read {
            key: key.clone(),
            seen,
            value: value.clone(),
        });
        Some(value)
    }

    /// Instance `no`'s run ended (on a worker) with `run`; it completes when the handler takes
    /// the result ([`Pool::complete`]).
    fn end(&mut self, no: InstanceNo, run: Run) {
        let Some(instance) = self.instances.get_mut(&no) else {
            return;
        };
        let steps = run.steps();
        let writes: Vec<(Key, Option<Value>)> = match run.end {
            Ok(()) => run.writes.into_iter().collect(),
            Err(_) => Vec::new(),
        };
        let ran = Ran::Done {
            ops: run.ops,
            end: ended_how(run.end),
        };
        instance.state = State::Ended(Box::new(Completed { ran, writes, steps }));
    }

    /// The complete event: instance `no`'s run ended, and its writes are installed as
    /// uncommitted versions, visible to other requests' reads from now on.
    fn complete(&mut self, no: InstanceNo) {
        let Some(instance) = self.instances.get_mut(&no) else {
            return;
        };
        let State::Ended(done) = std::mem::replace(&mut instance.state, State::Running) else {
            return;
        };
        let writes = done.writes.clone();
        instance.state = State::Complete(done);
        let family = instance.family;
        let keys: Vec<Key> = writes.iter().map(|(key, _)| key.clone()).collect();
        for (key, value) in writes {
            self.store.entry(&key).install(
                no.writer(),
                Timestamp::ZERO,
                VersionState::LocalCommitted,
                value,
            );
        }
        if self.caps.eager_chain && self.is_first(no, family) {
            let arrival = self.families.get(&family).map_or(0, |f| f.arrival);
            self.follow_chain(arrival, &keys);
        }
    }

    /// Whether `no` is the first instance of `family` (the one on the optimistic chain).
    fn is_first(&self, no: InstanceNo, family: TxnId) -> bool {
        self.families
            .get(&family)
            .is_some_and(|f| f.instances.first() == Some(&no))
    }

    /// `eager_chain`: a request that arrived `arrival`th wrote `keys`, in a first instance that
    /// completed or in an instance that committed. The first instance of every later request
    /// that read one of them from another version than its first choice now runs again from
    /// that read, as the request's new first instance; the old one goes on as a fork, or is
    /// aborted if the request has no room for another instance.
    fn follow_chain(&mut self, arrival: u64, keys: &[Key]) {
        let mut later: Vec<(u64, TxnId, InstanceNo)> = self
            .families
            .iter()
            .filter(|(_, f)| f.arrival > arrival)
            .filter_map(|(txn, f)| Some((f.arrival, *txn, *f.instances.first()?)))
            .collect();
        later.sort();
        for (_, txn, first) in later {
            let Some(instance) = self.instances.get(&first) else {
                continue;
            };
            if instance.visibility != Visibility::All {
                continue;
            }
            let Some((at, read)) = instance
                .reads
                .iter()
                .enumerate()
                .find(|(_, r)| keys.contains(&r.key))
            else {
                continue;
            };
            let (seen, value) = self
                .visible(instance, &read.key)
                .into_iter()
                .next()
                .expect("the committed version is always seen");
            if seen == read.seen {
                continue;
            }
            let count = self.families.get(&txn).map_or(0, |f| f.instances.len());
            let full = count >= self.caps.per_family || self.instances.len() >= self.caps.live;
            let mut reads = instance.reads[..at].to_vec();
            reads.push(Read {
                key: read.key.clone(),
                seen,
                value,
            });
            if full {
                // The chain matters more than the fork the old first instance becomes.
                self.abort(first);
                if let Some(f) = self.families.get_mut(&txn) {
                    f.instances.retain(|no| *no != first);
                }
            }
            let rerun = self.new_instance(txn, Visibility::All, reads);
            if let Some(f) = self.families.get_mut(&txn) {
                // It takes the first place: the chain goes on through it.
                f.instances.pop();
                f.instances.insert(0, rerun);
            }
            self.counters.chain_reruns += 1;
            self.forks.push(rerun);
        }
    }

    /// Abort instance `no`: its versions go (unless `keep-aborted`), and every read of them
    /// can no longer hold.
    fn abort(&mut self, no: InstanceNo) {
        let Some(instance) = self.instances.remove(&no) else {
            return;
        };
        if let State::Complete(done) = instance.state {
            if self.mutant == Some(Mutant::KeepAborted) {
                let versions = done.writes.into_iter().map(|(key, _)| (key, no)).collect();
                self.kept.push_back((self.commits, versions));
            } else {
                for (key, _) in &done.writes {
                    if let Some(entry) = self.store.get_mut(key) {
                        entry.remove_uncommitted(no.writer());
                    }
                }
            }
        }
        self.rewrite_readers(no, Seen::Gone);
    }

    /// One more request committed: drop what `keep-aborted` has kept long enough.
    fn committed_one(&mut self) {
        self.commits += 1;
        while self
            .kept
            .front()
            .is_some_and(|(at, _)| at + KEPT_FOR <= self.commits)
        {
            let (_, versions) = self.kept.pop_front().expect("just seen");
            for (key, no) in versions {
                if let Some(entry) = self.store.get_mut(&key) {
                    entry.remove_uncommitted(no.writer());
                }
                self.readers.remove(&no);
            }
        }
    }

    /// Every read of instance `writer`'s versions now returns `seen`.
    fn rewrite_readers(&mut self, writer: InstanceNo, seen: Seen) {
        for reader in self.readers.remove(&writer).unwrap_or_default() {
            if let Some(i) = self.instances.get_mut(&reader) {
                for read in &mut i.reads {
                    if read.seen == Seen::Speculative(writer) {
                        read.seen = seen;
                    }
                }
            }
        }
    }
}

/// Run instance `no` (on a worker): replay the values it inherited, then read through the pool
/// until it ends or is aborted. Returns its timer and the work it did.
fn run_instance(
    pool: &Mutex<Pool>,
    no: InstanceNo,
    mut driver: Driver<'static>,
    replay: Vec<(Key, Option<Value>)>,
) -> (Timer, Work) {
    let mut work = Work::default();
    let mut replayed = replay.into_iter();
    let mut issued: u32 = 0;
    let stopped = loop {
        match driver.resume() {
            Progress::Needs(key) => {
                issued = issued.saturating_add(1);
                if let Some((inherited, value)) = replayed.next() {
                    if inherited != key {
                        // A procedure that is not deterministic: the child cannot stand for
                        // the parent's prefix, so it never commits.
                        lock(pool).abort(no);
                        break true;
                    }
                    driver.supply(key, value);
                    continue;
                }
                let value = lock(pool).read(no, &key);
                match value {
                    Some(value) => {
                        work.reads = work.reads.saturating_add(1);
                        driver.supply(key, value);
                    }
                    None => break true,
                }
            }
            Progress::Ended(run) => {
                work.steps = run.steps();
                lock(pool).end(no, run);
                break false;
            }
        }
    };
    if stopped {
        work.steps = issued.saturating_add(1);
    }
    (Timer::Ran(no, work.steps), work)
}

/// The node of `oab-spec` and `sm-rep` (see the module docs).
pub struct Replicated<R: Replication> {
    env: NodeEnv,
    mutant: Option<Mutant>,
    seq: Sequencer<Request>,
    ids: TxnIds,
    pool: SharedPool,
    /// Instances run on the node's handler thread rather than its workers (`workers=inline`).
    inline: bool,
    /// `sm-rep` `execution=serial`: a request starts only at the head.
    serial: bool,
    /// The TO-queue: finally delivered positions not yet committed.
    queue: BTreeMap<Timestamp, Arc<Request>>,
    /// Every position through this one is committed here.
    applied: Timestamp,
    /// What was logged as committed through (`Through`).
    logged_through: Timestamp,
    /// Requests committed here, to drop late copies, with when, oldest first.
    committed: FxHashSet<TxnId>,
    committed_order: VecDeque<(Timestamp, TxnId)>,
    /// Requests submitted here, waiting for their answer, with when they were submitted.
    waiting: FxHashMap<TxnId, (Pending, Timestamp)>,
    blind: BlindWrites,
    next_arrival: u64,
    /// The arrival number of the last request finally delivered.
    last_final_arrival: u64,
    horizons: FxHashMap<NodeId, Timestamp>,
    ticks: u64,
    counters: Counters,
    _replication: std::marker::PhantomData<R>,
}

#[derive(Default)]
struct Counters {
    requests_committed: u64,
    instances: u64,
    re_executions: u64,
    inheritance_failures: u64,
    final_order_inversions: u64,
    final_deliveries: u64,
    optimistic_deliveries: u64,
    late_copies_dropped: u64,
    reclaimed: u64,
    steps_total: u64,
    steps_committed: u64,
    final_gap_us_total: u64,
    final_gaps: u64,
}

impl<R: Replication> Replicated<R> {
    fn build(env: &NodeEnv, mut seq: Sequencer<Request>) -> Self {
        let mutant = Mutant::named(env.options.mutant.as_deref());
        let setting = |info: &SettingInfo| {
            env.options
                .settings
                .get(info.name)
                .map_or(info.default, String::as_str)
                .to_string()
        };
        // The registry accepts only the values each setting lists.
        let number = |info: &SettingInfo| {
            setting(info)
                .parse::<u64>()
                .unwrap_or_else(|_| info.default.parse().expect("a numeric default"))
        };
        let delay = Duration::from_millis(number(&FINAL_DELAY_SETTING));
        seq.set_delay(delay);
        let caps = if R::SPECULATIVE {
            Caps {
                per_family: number(&MAX_INSTANCES) as usize,
                live: number(&MAX_LIVE_INSTANCES) as usize,
                eager_chain: crate::protocol_info::switch(&setting(&EAGER_CHAIN)) == Some(true),
            }
        } else {
            Caps {
                per_family: 1,
                live: usize::MAX,
                eager_chain: false,
            }
        };
        let pool = Pool {
            store: MvStore::new(),
            instances: FxHashMap::default(),
            families: FxHashMap::default(),
            readers: FxHashMap::default(),
            forks: Vec::new(),
            next_instance: 0,
            caps,
            mutant,
            counters: PoolCounters::default(),
            kept: VecDeque::new(),
            commits: 0,
        };
        Replicated {
            env: env.clone(),
            mutant,
            seq,
            ids: TxnIds::new(env.id),
            pool: Arc::new(Mutex::new(pool)),
            inline: setting(&WORKERS).eq_ignore_ascii_case("inline"),
            serial: setting(&EXECUTION).eq_ignore_ascii_case("serial"),
            queue: BTreeMap::new(),
            applied: Timestamp::ZERO,
            logged_through: Timestamp::ZERO,
            committed: FxHashSet::default(),
            committed_order: VecDeque::new(),
            waiting: FxHashMap::default(),
            blind: BlindWrites::default(),
            next_arrival: 0,
            last_final_arrival: 0,
            horizons: FxHashMap::default(),
            ticks: 0,
            counters: Counters::default(),
            _replication: std::marker::PhantomData,
        }
    }

    fn me(&self) -> NodeId {
        self.env.id
    }

    // ----- Clients -----

    fn on_client_op(&mut self, ctx: &mut Ctx<'_, Self>, request: ClientRequest) {
        match self.blind.step(ctx, &mut self.ids, request, self.applied) {
            ClientStep::Execute {
                pending,
                call,
                read_only,
            } => self.on_execute(ctx, pending, call, read_only),
            ClientStep::Commit {
                pending,
                txn,
                writes,
            } => {
                self.waiting.insert(txn, (pending, ctx.now()));
                self.seq.submit(Request {
                    txn,
                    body: Body::Writes(writes),
                });
            }
            ClientStep::Answered => {}
        }
    }

    fn on_execute(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        pending: Pending,
        call: ProcedureCall,
        read_only: bool,
    ) {
        let procedure = match driver::checked(&self.env.procedures, &call, read_only) {
            Ok(procedure) => procedure,
            Err(e) => return pending.answer(ctx, ClientReply::Rejected(e)),
        };
        // What travels is the postcard form, whatever form the client wrote the arguments in.
        let call = procedure.call().unwrap_or(call);
        let txn = self.ids.allocate(ctx);
        let request = Request {
            txn,
            body: Body::Call { call, read_only },
        };
        self.waiting.insert(txn, (pending, ctx.now()));
        if R::SPECULATIVE {
            let me = self.me();
            for node in self.env.placement.nodes().filter(|n| *n != me) {
                ctx.send(node, Msg::Optimistic(request.clone()));
            }
            self.deliver_optimistically(ctx, request.clone());
        }
        self.seq.submit(request);
    }

    // ----- Delivery -----

    /// Optimistic delivery of `request` (`oab-spec`): start its first instance, unless it is a
    /// copy of one known or committed.
    fn deliver_optimistically(&mut self, ctx: &mut Ctx<'_, Self>, request: Request) {
        if self.committed.contains(&request.txn) {
            self.counters.late_copies_dropped += 1;
            return;
        }
        if lock(&self.pool).families.contains_key(&request.txn) {
            self.counters.late_copies_dropped += 1;
            return;
        }
        self.counters.optimistic_deliveries += 1;
        let txn = request.txn;
        self.new_family(ctx, Arc::new(request), None);
        self.start_new(ctx, txn, Visibility::All);
    }

    /// A family for `request`, arriving now.
    fn new_family(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        request: Arc<Request>,
        position: Option<Timestamp>,
    ) -> u64 {
        self.next_arrival += 1;
        let family = Family {
            request: Arc::clone(&request),
            arrival: self.next_arrival,
            since: ctx.now(),
            position,
            instances: Vec::new(),
        };
        lock(&self.pool).families.insert(request.txn, family);
        self.next_arrival
    }

    /// Final delivery of the sequencer's committed `batches`.
    fn take(&mut self, ctx: &mut Ctx<'_, Self>, batches: Vec<sequencer::Batch<Request>>) {
        for batch in batches {
            for (slot, request) in batch.items.into_iter().enumerate() {
                let Some(at) = dispatch::position(batch.index, slot) else {
                    continue;
                };
                // A position delivered again (a replay after a restart) is taken once.
                if at <= self.applied || self.queue.contains_key(&at) {
                    continue;
                }
                self.deliver_finally(ctx, at, request);
            }
        }
        self.advance(ctx);
    }

    fn deliver_finally(&mut self, ctx: &mut Ctx<'_, Self>, at: Timestamp, request: Request) {
        let txn = request.txn;
        if txn.coordinator() == self.me()
            && let Some((_, since)) = self.waiting.get(&txn)
        {
            self.counters.final_gaps += 1;
            self.counters.final_gap_us_total += ctx.now().0.saturating_sub(since.0);
        }
        let request = Arc::new(request);
        if matches!(request.body, Body::Call { .. }) && !self.committed.contains(&txn) {
            let known = {
                let mut pool = lock(&self.pool);
                match pool.families.get_mut(&txn) {
                    Some(f) => {
                        f.position = Some(at);
                        Some(f.arrival)
                    }
                    None => None,
                }
            };
            let arrival = match known {
                Some(arrival) => arrival,
                None => {
                    // Finally delivered first (or `sm-rep`): it starts now.
                    let arrival = self.new_family(ctx, Arc::clone(&request), Some(at));
                    if R::SPECULATIVE {
                        self.start_new(ctx, txn, Visibility::All);
                    } else if !self.serial {
                        self.start_new(ctx, txn, Visibility::Committed);
                    }
                    arrival
                }
            };
            self.counters.final_deliveries += 1;
            if arrival < self.last_final_arrival {
                self.counters.final_order_inversions += 1;
            }
            self.last_final_arrival = self.last_final_arrival.max(arrival);
        }
        self.queue.insert(at, request);
    }

    // ----- Instances -----

    /// Start a new instance of `family` (no inherited reads).
    fn start_new(&mut self, ctx: &mut Ctx<'_, Self>, family: TxnId, visibility: Visibility) {
        let no = lock(&self.pool).new_instance(family, visibility, Vec::new());
        self.start(ctx, no);
    }

    /// Hand instance `no` to a worker: its inherited reads are validated first (a child whose
    /// prefix no longer holds runs from the start).
    fn start(&mut self, ctx: &mut Ctx<'_, Self>, no: InstanceNo) {
        let (call, read_only, replay) = {
            let mut pool = lock(&self.pool);
            let check = pool.mutant != Some(Mutant::NoInheritedValidation);
            let Some(instance) = pool.instances.get(&no) else {
                return;
            };
            let holds = !check || instance.reads.iter().all(|r| pool.still_holds(r, true));
            let family = instance.family;
            let Some(Body::Call { call, read_only }) =
                pool.families.get(&family).map(|f| f.request.body.clone())
            else {
                return;
            };
            let instance = pool.instances.get_mut(&no).expect("found above");
            if !holds {
                self.counters.inheritance_failures += 1;
                instance.reads.clear();
                instance.inherited = 0;
            }
            instance.state = State::Running;
            let replay: Vec<(Key, Option<Value>)> = instance
                .reads
                .iter()
                .map(|r| (r.key.clone(), r.value.clone()))
                .collect();
            (call, read_only, replay)
        };
        self.counters.instances += 1;
        let driver = match driver::checked(&self.env.procedures, &call, read_only) {
            Ok(procedure) => Driver::start(procedure),
            Err(e) => {
                // Every node refuses it alike: it commits as refused, with no effect.
                let mut pool = lock(&self.pool);
                if let Some(i) = pool.instances.get_mut(&no) {
                    i.reads.clear();
                    i.state = State::Ended(Box::new(Completed {
                        ran: Ran::Refused(e.to_string()),
                        writes: Vec::new(),
                        steps: 1,
                    }));
                }
                drop(pool);
                return ctx.set_timer(Duration::ZERO, Timer::Ran(no, 0));
            }
        };
        let pool = Arc::clone(&self.pool);
        let job = move || run_instance(&pool, no, driver, replay);
        if self.inline {
            let (timer, work) = job();
            ctx.charge(work);
            ctx.set_timer(Duration::ZERO, timer);
        } else {
            ctx.offload(job);
        }
    }

    /// Instance `no`'s run came back: start the forks it made, and see whether the head can
    /// commit.
    fn on_ran(&mut self, ctx: &mut Ctx<'_, Self>, no: InstanceNo, steps: u32) {
        self.counters.steps_total += u64::from(steps);
        let forks = {
            let mut pool = lock(&self.pool);
            pool.complete(no);
            std::mem::take(&mut pool.forks)
        };
        for fork in forks {
            self.start(ctx, fork);
        }
        if self.mutant == Some(Mutant::DoubleCommit) {
            self.commit_again(ctx, no);
        }
        self.advance(ctx);
    }

    // ----- Commit -----

    /// Commit the TO-queue's head, and each next one, while it can.
    fn advance(&mut self, ctx: &mut Ctx<'_, Self>) {
        while let Some((&at, request)) = self.queue.first_key_value() {
            let request = Arc::clone(request);
            match &request.body {
                Body::Writes(writes) => {
                    self.queue.remove(&at);
                    self.apply(ctx, at, request.txn, writes.clone());
                    let ran = Ran::Done {
                        ops: Vec::new(),
                        end: Ok(()),
                    };
                    self.answer(ctx, at, &request, ran);
                    continue;
                }
                Body::Call { .. } => {}
            }
            if self.committed.contains(&request.txn) {
                // A second entry of a request already committed: nothing to do.
                self.queue.remove(&at);
                self.applied = at;
                continue;
            }
            let decision = {
                let pool = lock(&self.pool);
                // Lowest first (`eager_chain` puts a re-run first in the family's list).
                let mut instances = pool
                    .families
                    .get(&request.txn)
                    .map(|f| f.instances.clone())
                    .unwrap_or_default();
                instances.sort();
                match instances.iter().find(|no| pool.committable(**no)) {
                    Some(no) => Head::Commit(*no),
                    None if instances.iter().any(|no| pool.promising(*no)) => Head::Wait,
                    None => Head::ReExecute,
                }
            };
            match decision {
                Head::Commit(no) => {
                    self.queue.remove(&at);
                    self.commit(ctx, at, &request, no);
                }
                Head::Wait => return,
                Head::ReExecute => {
                    if !lock(&self.pool).families.contains_key(&request.txn) {
                        // Reclaimed before its final delivery (or never seen): it starts here.
                        self.new_family(ctx, Arc::clone(&request), Some(at));
                    }
                    self.counters.re_executions += 1;
                    // Its result comes back as a timer, which advances the queue again.
                    return self.start_new(ctx, request.txn, Visibility::Committed);
                }
            }
        }
    }

    /// Commit instance `no` of `request` at position `at`: its versions become committed, its
    /// siblings are aborted, and its submitter answers.
    fn commit(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        at: Timestamp,
        request: &Request,
        no: InstanceNo,
    ) {
        let (ran, writes, steps, leaked) = {
            let mut pool = lock(&self.pool);
            let Some(instance) = pool.instances.remove(&no) else {
                return;
            };
            // Only a completed instance is committable.
            let State::Complete(done) = instance.state else {
                return;
            };
            let Completed { ran, writes, steps } = *done;
            for (key, value) in &writes {
                let entry = pool.store.entry(key);
                entry.remove_uncommitted(no.writer());
                entry.put_committed(request.txn, at, value.clone());
            }
            pool.rewrite_readers(no, Seen::Committed(at));
            pool.committed_one();
            let family = pool.families.remove(&request.txn);
            if pool.caps.eager_chain
                && let Some(f) = &family
                && f.instances.first() != Some(&no)
            {
                // The chain went through another instance: the later requests that followed
                // it follow the committed versions now.
                let keys: Vec<Key> = writes.iter().map(|(key, _)| key.clone()).collect();
                pool.follow_chain(f.arrival, &keys);
            }
            let siblings = family.map(|f| f.instances).unwrap_or_default();
            // `leak-speculative`: the family's first instance speaks for it, committed or not.
            let leaked = siblings
                .first()
                .filter(|first| self.mutant == Some(Mutant::LeakSpeculative) && **first != no)
                .and_then(|first| match &pool.instances.get(first)?.state {
                    State::Complete(d) => Some(d.ran.clone()),
                    _ => None,
                });
            if self.mutant != Some(Mutant::DoubleCommit) {
                // (`double-commit` has no committed flag: the other instances go on.)
                for sibling in siblings {
                    pool.abort(sibling);
                }
            }
            (ran, writes, steps, leaked)
        };
        let reruns = std::mem::take(&mut lock(&self.pool).forks);
        for rerun in reruns {
            self.start(ctx, rerun);
        }
        self.counters.steps_committed += u64::from(steps);
        self.counters.requests_committed += 1;
        self.log_commit(ctx, at, request.txn, writes);
        self.answer(ctx, at, request, leaked.unwrap_or(ran));
    }

    /// Mutant `double-commit`: instance `no` of a family already committed, completed with
    /// reads that are newest now, commits again at the last position committed.
    fn commit_again(&mut self, ctx: &mut Ctx<'_, Self>, no: InstanceNo) {
        let family = {
            let pool = lock(&self.pool);
            match pool.instances.get(&no) {
                Some(i) if self.committed.contains(&i.family) && pool.committable(no) => i.family,
                _ => return,
            }
        };
        let at = self.applied;
        let writes = {
            let mut pool = lock(&self.pool);
            let Some(instance) = pool.instances.remove(&no) else {
                return;
            };
            let State::Complete(done) = instance.state else {
                return;
            };
            for (key, value) in &done.writes {
                let entry = pool.store.entry(key);
                entry.remove_uncommitted(no.writer());
                entry.put_committed(family, at, value.clone());
            }
            pool.rewrite_readers(no, Seen::Committed(at));
            done.writes
        };
        if !writes.is_empty() {
            ctx.persist(Record::Applied {
                at,
                txn: family,
                writes,
            });
        }
    }

    /// Blind writes at the head: committed as they are.
    fn apply(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        at: Timestamp,
        txn: TxnId,
        writes: Vec<(Key, Option<Value>)>,
    ) {
        {
            let mut pool = lock(&self.pool);
            for (key, value) in &writes {
                pool.store.entry(key).put_committed(txn, at, value.clone());
            }
        }
        self.log_commit(ctx, at, txn, writes);
    }

    /// `txn` committed `writes` at `at`: log them, and remember it committed.
    fn log_commit(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        at: Timestamp,
        txn: TxnId,
        writes: Vec<(Key, Option<Value>)>,
    ) {
        ctx.charge(Work::writes(writes.len()));
        if !writes.is_empty() {
            ctx.persist(Record::Applied { at, txn, writes });
        }
        self.applied = at;
        self.committed.insert(txn);
        self.committed_order.push_back((ctx.now(), txn));
    }

    /// The submitter answers `request`'s client: it ended `ran` at `at`.
    fn answer(&mut self, ctx: &mut Ctx<'_, Self>, at: Timestamp, request: &Request, ran: Ran) {
        if request.txn.coordinator() != self.me() {
            return;
        }
        if let Some((pending, _)) = self.waiting.remove(&request.txn) {
            pending.answer(ctx, dispatch::reply(request.txn, at, ran, &request.body));
        }
    }

    // ----- Housekeeping -----

    fn tick(&mut self, ctx: &mut Ctx<'_, Self>) {
        ctx.set_timer(TICK, Timer::Tick);
        self.ticks += 1;
        let now = ctx.now();
        let idle = self.env.options.idle_txn_timeout;
        let cutoff = Timestamp(now.0.saturating_sub(idle.as_micros() as u64));
        self.waiting.retain(|_, (_, since)| *since >= cutoff);
        self.blind.forget_before(cutoff);
        let reclaim = Timestamp(now.0.saturating_sub(RECLAIM_AFTER.as_micros() as u64));
        while self
            .committed_order
            .front()
            .is_some_and(|(when, _)| *when < reclaim)
        {
            if let Some((_, txn)) = self.committed_order.pop_front() {
                self.committed.remove(&txn);
            }
        }
        {
            let mut pool = lock(&self.pool);
            let stale: Vec<TxnId> = pool
                .families
                .iter()
                .filter(|(_, f)| f.position.is_none() && f.since < reclaim)
                .map(|(txn, _)| *txn)
                .collect();
            for txn in stale {
                self.counters.reclaimed += 1;
                if let Some(f) = pool.families.remove(&txn) {
                    for no in f.instances {
                        pool.abort(no);
                    }
                }
            }
            let applied = self.applied;
            pool.store.collect_garbage(applied, GC_BATCH);
        }
        let horizon = self
            .env
            .placement
            .nodes()
            .map(|n| self.horizons.get(&n).copied().unwrap_or(Timestamp::ZERO))
            .min()
            .unwrap_or(Timestamp::ZERO);
        // Every batch wholly at or below the horizon is committed and logged at every node.
        self.seq
            .compact_through(dispatch::batch_of(horizon).saturating_sub(1));
        if !self.ticks.is_multiple_of(ANNOUNCE_EVERY) {
            return;
        }
        // Log how far this node committed before saying so: a restarted node never runs a
        // position at or below it.
        let through = self.applied;
        if through > self.logged_through {
            self.logged_through = through;
            ctx.persist(Record::Through { at: through });
        }
        let me = self.me();
        self.raise_horizon(me, through);
        for node in self.env.placement.nodes().filter(|n| *n != me) {
            ctx.send(node, Msg::Horizon { through });
        }
    }

    fn raise_horizon(&mut self, node: NodeId, through: Timestamp) {
        let h = self.horizons.entry(node).or_insert(Timestamp::ZERO);
        *h = (*h).max(through);
    }
}

/// What the head of the TO-queue does.
enum Head {
    Commit(InstanceNo),
    Wait,
    ReExecute,
}

/// `sm-rep`'s execution setting.
pub const EXECUTION: SettingInfo = SettingInfo {
    name: "execution",
    values: &["concurrent", "serial"],
    default: "concurrent",
    doc: "`concurrent`: a request starts on final delivery beside those before it and commits at the head if its reads are still newest, else runs again there; `serial`: it runs only at the head, one at a time",
};

impl<R: Replication> Protocol for Replicated<R> {
    type Msg = Msg;
    type Timer = Timer;
    type Record = Record;

    const FORMS: &'static [RequestForm] = ONE_SHOT_AND_BLIND_WRITES;

    fn new(env: &NodeEnv) -> Self {
        let seq = Sequencer::new(env).unwrap_or_else(|e| panic!("{}: {e}", R::INFO.name));
        Replicated::build(env, seq)
    }

    fn recover(env: &NodeEnv, records: &mut dyn Iterator<Item = Record>) -> Self {
        let mut seq_records = Vec::new();
        let mut rest = Vec::new();
        let mut reserved = 0;
        for record in records {
            match record {
                Record::Sequencer(r) => seq_records.push(r),
                Record::Kit(replica::Record::IdsReserved { below }) => {
                    reserved = reserved.max(below)
                }
                Record::Kit(_) => {}
                other => rest.push(other),
            }
        }
        let seq = Sequencer::restore(env, seq_records)
            .unwrap_or_else(|e| panic!("{}: {e}", R::INFO.name));
        let mut node = Replicated::build(env, seq);
        node.ids.resume_below(reserved);
        {
            let mut pool = lock(&node.pool);
            for record in rest {
                match record {
                    Record::Applied { at, txn, writes } => {
                        for (key, value) in writes {
                            let entry = pool.store.entry(&key);
                            if entry.read_at(at).is_none_or(|v| v.ts != at) {
                                entry.put_committed(txn, at, value);
                            }
                        }
                        node.applied = node.applied.max(at);
                    }
                    Record::Through { at } => node.applied = node.applied.max(at),
                    Record::Sequencer(_) | Record::Kit(_) => {}
                }
            }
        }
        node.logged_through = node.applied;
        node
    }

    fn checkpoint(&self, emit: &mut dyn FnMut(Record)) {
        self.seq.checkpoint(emit);
        self.ids.checkpoint(emit);
        let pool = lock(&self.pool);
        for (key, entry) in pool.store.iter() {
            for v in entry.versions() {
                if v.state == VersionState::Committed {
                    emit(Record::Applied {
                        at: v.ts,
                        txn: v.writer,
                        writes: vec![(key.clone(), v.value.clone())],
                    });
                }
            }
        }
        emit(Record::Through { at: self.applied });
    }

    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        self.seq.on_start(ctx);
        ctx.set_timer(TICK, Timer::Tick);
    }

    fn on_client(&mut self, ctx: &mut Ctx<'_, Self>, request: ClientRequest) {
        self.on_client_op(ctx, request);
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, msg: Msg) {
        match msg {
            Msg::Raft(m) => {
                let batches = self.seq.on_message(ctx, from, m);
                self.take(ctx, batches);
            }
            Msg::Optimistic(request) => {
                if R::SPECULATIVE {
                    self.deliver_optimistically(ctx, request);
                }
            }
            Msg::Horizon { through } => self.raise_horizon(from, through),
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, Self>, timer: Timer) {
        match timer {
            Timer::Sequencer(t) => {
                let batches = self.seq.on_timer(ctx, t);
                self.take(ctx, batches);
            }
            Timer::Ran(no, steps) => self.on_ran(ctx, no, steps),
            Timer::Tick => self.tick(ctx),
        }
    }

    fn leftovers(&self) -> Vec<(&'static str, u64)> {
        let pool = lock(&self.pool);
        vec![
            ("submissions_unanswered", self.waiting.len() as u64),
            ("blind_write_transactions_open", self.blind.len() as u64),
            ("positions_uncommitted", self.queue.len() as u64),
            ("families_live", pool.families.len() as u64),
            ("instances_live", pool.instances.len() as u64),
        ]
    }

    fn leader(&self) -> Option<NodeId> {
        self.seq.leader()
    }

    /// Per partition (every node holds them all), an order-independent digest of every key's
    /// newest committed version.
    fn state_digests(&self) -> Vec<(PartitionId, u64)> {
        let pool = lock(&self.pool);
        dispatch::state_digests(
            &pool.store,
            &self.env.placement,
            self.env.placement.partitions(),
        )
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = &self.counters;
        let s = self.seq.counters();
        let p = lock(&self.pool).counters;
        let mut counters = vec![
            ("requests_committed", c.requests_committed),
            ("instances", c.instances),
            ("re_executions", c.re_executions),
            ("final_order_inversions", c.final_order_inversions),
            ("steps_total", c.steps_total),
            ("steps_committed", c.steps_committed),
            ("final_gap_us_total", c.final_gap_us_total),
            ("final_gaps", c.final_gaps),
            ("final_deliveries", c.final_deliveries),
        ];
        counters.extend(s.named());
        if R::SPECULATIVE {
            counters.extend([
                ("forks", p.forks),
                ("forks_capped", p.forks_capped),
                ("chain_reruns", p.chain_reruns),
                ("inheritance_failures", c.inheritance_failures),
                ("optimistic_deliveries", c.optimistic_deliveries),
                ("late_copies_dropped", c.late_copies_dropped),
                ("reclaimed", c.reclaimed),
            ]);
        }
        counters
    }
}
