//! What workloads are written against: the [`Ops`] interface, the [`Procedure`] a transaction
//! type implements (with STR's speculation callbacks), the catalogue a node runs one-shot
//! procedures from, and the per-type commit statistics the callbacks weigh. A client runs a
//! procedure over an interactive transaction (`augur_client`), a node over the
//! [`driver`](crate::driver).

use crate::txn::{Outcome, TxnError, TxnInfo};
use augur_types::{Key, ProcedureCall, RequestError, Value};
use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

/// A boxed future that may move between threads: what a procedure's body and its reads are
/// (the same type as `futures::future::BoxFuture`, so workload code may name either).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Outcomes of the recent attempts of each transaction type, shared by the sessions of a
/// process: the `SYSINFO.getCommitProb` of STR §4, for [`Procedure::can_spec_commit`].
#[derive(Clone, Default)]
pub struct CommitStats {
    windows: Arc<Mutex<BTreeMap<&'static str, VecDeque<bool>>>>,
}

impl CommitStats {
    /// How many recent attempts per type the probability is computed over.
    pub const WINDOW: usize = 256;

    pub fn new() -> Self {
        CommitStats::default()
    }

    /// Note how an attempt of type `name` ended.
    pub fn record(&self, name: &'static str, committed: bool) {
        let mut windows = self.windows.lock().expect("commit stats");
        let window = windows.entry(name).or_default();
        if window.len() == Self::WINDOW {
            window.pop_front();
        }
        window.push_back(committed);
    }

    /// The fraction of recent attempts of type `name` that committed; `None` before any ended.
    pub fn commit_probability(&self, name: &str) -> Option<f64> {
        let windows = self.windows.lock().expect("commit stats");
        let window = windows.get(name).filter(|w| !w.is_empty())?;
        let committed = window.iter().filter(|c| **c).count();
        Some(committed as f64 / window.len() as f64)
    }
}

/// The read/write interface a workload procedure runs against.
pub trait Ops: Send {
    fn read<'a>(&'a mut self, key: &'a Key) -> BoxFuture<'a, Result<Option<Value>, TxnError>>;
    fn write(&mut self, key: Key, value: Option<Value>) -> Result<(), TxnError>;
    /// Note `value` under `name` in the transaction's info map, for the speculation callbacks.
    /// Implementations without an info map ignore it.
    fn note(&mut self, _name: &str, _value: f64) {}
}

/// One transaction of a workload, written once over [`Ops`].
pub trait Procedure: Send {
    /// The transaction type, for per-type counters.
    fn name(&self) -> &'static str;
    fn read_only(&self) -> bool;
    /// Run the transaction body. `Err(Aborted(UserRollback))` asks for a rollback.
    fn run<'a>(&'a mut self, ops: &'a mut dyn Ops) -> BoxFuture<'a, Result<(), TxnError>>;

    /// Told how each attempt of this procedure ended. Workloads whose audits depend on what
    /// committed (a conserved total moved by deposits) tally effects here. A speculatively
    /// committed attempt ends when its final outcome is known; `Aborted(Misspeculation)` is
    /// where compensation goes (STR's `SpecTxAbortException`).
    fn finished(&mut self, _outcome: &Outcome) {}

    /// `canSpecCommit` (STR §4): whether this attempt may be externalized at local commit.
    fn can_spec_commit(&self, _info: &TxnInfo, _stats: &CommitStats) -> bool {
        true
    }

    /// `onSpecCommit`: the attempt committed speculatively and its result may be shown.
    fn on_spec_commit(&mut self, _info: &TxnInfo) {}

    /// `onFinalCommit`: a speculatively committed attempt committed for good.
    fn on_final_commit(&mut self, _info: &TxnInfo) {}

    /// Draw whatever each attempt chooses afresh (a unique value to write, so a retry never
    /// reuses an aborted attempt's), before the attempt runs in either form. [`Procedure::run`]
    /// must be a function of the procedure's fields and of what its reads return, so that the
    /// attempt can be shipped as a [`call`](Procedure::call) and replayed.
    fn prepare_attempt(&mut self) {}

    /// This attempt as a one-shot request: the name the procedure is registered under in its
    /// workload's [`ProcedureCatalog`] and every argument its body depends on. `None` for a
    /// procedure that only runs interactively.
    fn call(&self) -> Option<ProcedureCall> {
        None
    }

    /// The keys this attempt reads and writes, when its arguments alone determine them: what a
    /// protocol that locks before it runs (`calvin`) takes as the lock set without running the
    /// body first, and an order-then-execute protocol as the partitions it touches (Calvin's
    /// *independent* transactions). `None` (the default) when they depend on what it reads,
    /// as a customer chosen by last name does: such a procedure is predicted by running it. A
    /// declaration that misses a key costs a misprediction (the run is validated against it)
    /// and never correctness; one that names a key the body does not touch costs a lock.
    fn declared_keys(&self) -> Option<DeclaredKeys> {
        None
    }
}

/// The keys a procedure declares it touches ([`Procedure::declared_keys`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeclaredKeys {
    /// Every key the body may read (before writing it).
    pub reads: Vec<Key>,
    /// Every key the body may write; for a key that is not known before the body runs (a row
    /// numbered by a counter it reads), the key's lock ([`ProcedureCatalog::lock_name`]).
    pub writes: Vec<Key>,
}

/// The procedures a node can run for one-shot transactions, by [`ProcedureCall`] name. Built
/// from the same workload code clients run, so a procedure does the same thing whichever form
/// ships it.
pub trait ProcedureCatalog: Send + Sync + 'static {
    /// A procedure ready to run `call`, or why there is none: `UnknownProcedure`, or `Invalid`
    /// arguments.
    fn instantiate(&self, call: &ProcedureCall) -> Result<Box<dyn Procedure>, RequestError>;

    /// The lock that guards `key` for a protocol that locks what a transaction will touch
    /// before running it (`calvin`), when it is coarser than `key` itself: a row whose key comes
    /// from a counter's value (TPC-C's orders, keyed by D_NEXT_O_ID) locked through the
    /// counter's row, so that a transaction's locks can be known before the counter is read.
    /// Must be a function of `key` alone, on `key`'s shard, the same for every transaction.
    fn lock_name(&self, key: &Key) -> Option<Key> {
        let _ = key;
        None
    }
}
