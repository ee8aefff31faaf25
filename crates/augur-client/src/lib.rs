//! The client API of augur.
//!
//! A [`Session`] talks to one coordinator node through a [`Transport`]: in process, inside the
//! simulator, or over TCP. It runs interactive transactions ([`Txn`]): begin (optionally
//! read-only), read, write, commit or abort. Writes are buffered in the client and shipped with
//! the commit request; reads see the transaction's own buffered writes first.
//!
//! Every transaction ends in an [`Outcome`]: committed, aborted with a typed [`AbortReason`], or
//! unknown (the coordinator stopped answering while the commit was in flight). Workloads are
//! written as [`Procedure`]s over the small [`Ops`] interface so the same code can later run as an
//! interactive transaction or as a one-shot procedure shipped to the participants.
//!
//! Protocols with speculation (STR) add two things, both opt-in per transaction. A transaction
//! begun with [`Session::begin_speculative`] may read versions of transactions that only
//! committed locally. [`Txn::commit_speculative`] may return at local commit with a
//! [`SpeculativeCommit`], whose final outcome arrives later: committed, or
//! [`AbortReason::Misspeculation`], after which the application must compensate for whatever it
//! externalized. A [`Procedure`] decides with [`Procedure::can_spec_commit`] (consulting its
//! [`TxnInfo`] and the per-type [`CommitStats`]) and hears of each step through
//! [`Procedure::on_spec_commit`] and [`Procedure::on_final_commit`], STR §4's programming model.
//! How much a client speculates is a [`Degree`]; a [`SpeculationTuner`] picks it at run time
//! (STR §6.7).

mod tuner;
pub use tuner::{Degree, SpeculationTuner, TunerSettings};

use augur_types::history::{Op, RecordedOutcome, TxnRecord};
use augur_types::{AbortReason, ClientId, ClientOp, ClientReply, Key, ProcedureCall};
use augur_types::{ExecutedOp, Execution, RequestError, RequestForm, Timestamp};
use augur_types::{TxnId, Value};
use futures::future::BoxFuture;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use augur_types;

/// Why a request got no reply.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    #[error("no reply within {0:?}")]
    Timeout(Duration),
    #[error("connection to the coordinator lost: {0}")]
    Disconnected(String),
}

/// How a client reaches its coordinator. Implemented by each runtime.
pub trait Transport: Send + Sync + 'static {
    /// This session's identity, unique within the cluster.
    fn client_id(&self) -> ClientId;
    /// Send one operation and wait for its reply (bounded by the transport's request timeout).
    fn call(&self, op: ClientOp) -> BoxFuture<'_, Result<ClientReply, TransportError>>;
    /// Monotonic time since an arbitrary origin; virtual time in the simulator.
    fn now(&self) -> Duration;
    /// Wait for `d` (think time); virtual in the simulator.
    fn sleep(&self, d: Duration) -> BoxFuture<'_, ()>;
}

/// Why a transaction operation failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum TxnError {
    #[error("transaction aborted: {0}")]
    Aborted(AbortReason),
    #[error("request rejected: {0}")]
    Rejected(RequestError),
    /// The coordinator did not answer. If this happened during commit the outcome is unknown.
    #[error("coordinator unavailable: {0}")]
    Unavailable(TransportError),
    #[error("unexpected reply {0:?}")]
    Protocol(Box<ClientReply>),
}

impl From<TransportError> for TxnError {
    fn from(e: TransportError) -> Self {
        TxnError::Unavailable(e)
    }
}

/// How a transaction attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Committed {
        commit_ts: Timestamp,
    },
    Aborted(AbortReason),
    /// The client never learned whether the transaction committed.
    Unknown,
}

/// Collects the [`TxnRecord`] of every transaction attempt of the sessions that share it, in the
/// order the attempts ended. Cloning shares the log.
#[derive(Clone, Default)]
pub struct HistoryRecorder {
    log: Arc<Mutex<Vec<TxnRecord>>>,
}

impl HistoryRecorder {
    pub fn new() -> Self {
        HistoryRecorder::default()
    }

    fn push(&self, mut record: TxnRecord) {
        let mut log = self.log.lock().expect("history log");
        record.index = log.len();
        log.push(record);
    }

    /// The attempts recorded so far, indexed in the order they ended.
    pub fn records(&self) -> Vec<TxnRecord> {
        self.log.lock().expect("history log").clone()
    }

    pub fn len(&self) -> usize {
        self.log.lock().expect("history log").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A client session bound to one coordinator.
pub struct Session<T: Transport> {
    transport: T,
    recorder: Option<HistoryRecorder>,
    form: RequestForm,
}

impl<T: Transport> Session<T> {
    pub fn new(transport: T) -> Self {
        Session {
            transport,
            recorder: None,
            form: RequestForm::Interactive,
        }
    }

    /// A session whose every transaction attempt is recorded into `recorder`.
    pub fn recorded(transport: T, recorder: HistoryRecorder) -> Self {
        Session {
            recorder: Some(recorder),
            ..Session::new(transport)
        }
    }

    /// Submit procedures in `form`: [`RequestForm::OneShot`] ships each attempt of a procedure
    /// that has a [`call`](Procedure::call) as one request (see [`execute_one_shot`]); procedures
    /// without one, and [`Session::begin`], stay interactive.
    pub fn with_form(mut self, form: RequestForm) -> Self {
        self.form = form;
        self
    }

    /// The form procedures are submitted in.
    pub fn form(&self) -> RequestForm {
        self.form
    }

    pub fn transport(&self) -> &T {
        &self.transport
    }

    pub fn id(&self) -> ClientId {
        self.transport.client_id()
    }

    /// Start a transaction. `read_only` promises no writes and lets protocols skip certification.
    pub async fn begin(&self, read_only: bool) -> Result<Txn<'_, T>, TxnError> {
        self.begin_named("txn", read_only).await
    }

    /// Start a transaction of type `name` (the name recorded in the history).
    pub async fn begin_named(
        &self,
        name: &'static str,
        read_only: bool,
    ) -> Result<Txn<'_, T>, TxnError> {
        self.begin_with(name, read_only, false).await
    }

    /// Start a transaction of type `name` that may read versions of transactions that only
    /// committed locally (speculative reads). Protocols without them run it as a plain one.
    pub async fn begin_speculative(
        &self,
        name: &'static str,
        read_only: bool,
    ) -> Result<Txn<'_, T>, TxnError> {
        self.begin_with(name, read_only, true).await
    }

    /// The home node's protocol counters since it started (see [`ClientOp::NodeStats`]).
    pub async fn node_stats(&self) -> Result<BTreeMap<String, u64>, TxnError> {
        match self.transport.call(ClientOp::NodeStats).await? {
            ClientReply::NodeStats(counters) => Ok(counters),
            ClientReply::Rejected(e) => Err(TxnError::Rejected(e)),
            other => Err(TxnError::Protocol(Box::new(other))),
        }
    }

    async fn begin_with(
        &self,
        name: &'static str,
        read_only: bool,
        speculative: bool,
    ) -> Result<Txn<'_, T>, TxnError> {
        let invoked = self.transport.now();
        let op = ClientOp::Begin {
            read_only,
            speculative,
        };
        match self.transport.call(op).await? {
            ClientReply::Begun { txn, snapshot } => Ok(Txn {
                session: self,
                id: txn,
                snapshot,
                read_only,
                writes: Vec::new(),
                info: TxnInfo::new(),
                done: false,
                record: self.recorder.as_ref().map(|_| AttemptLog {
                    name,
                    invoked,
                    ops: Vec::new(),
                    outcome: None,
                }),
            }),
            ClientReply::Aborted(r) => Err(TxnError::Aborted(r)),
            ClientReply::Rejected(e) => Err(TxnError::Rejected(e)),
            other => Err(TxnError::Protocol(Box::new(other))),
        }
    }
}

/// An interactive transaction. Dropping it without commit or abort leaves the coordinator to time
/// it out; call [`Txn::abort`] to release it at once.
pub struct Txn<'s, T: Transport> {
    session: &'s Session<T>,
    id: TxnId,
    snapshot: Timestamp,
    read_only: bool,
    writes: Vec<(Key, Option<Value>)>,
    info: TxnInfo,
    done: bool,
    /// What the history needs, when the session records one.
    record: Option<AttemptLog>,
}

/// The part of a [`TxnRecord`] gathered while an attempt runs.
struct AttemptLog {
    name: &'static str,
    invoked: Duration,
    ops: Vec<Op>,
    outcome: Option<RecordedOutcome>,
}

fn text(value: &Option<Value>) -> Option<String> {
    value
        .as_ref()
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

fn aborted(reason: AbortReason) -> RecordedOutcome {
    RecordedOutcome::Aborted {
        reason: reason.name().to_string(),
    }
}

impl<'s, T: Transport> Txn<'s, T> {
    fn log_op(&mut self, op: impl FnOnce() -> Op) {
        if let Some(record) = &mut self.record {
            record.ops.push(op());
        }
    }

    /// Set the recorded outcome unless one is already known.
    fn log_outcome(&mut self, outcome: impl FnOnce() -> RecordedOutcome) {
        if let Some(record) = &mut self.record {
            record.outcome.get_or_insert_with(outcome);
        }
    }

    pub fn id(&self) -> TxnId {
        self.id
    }

    /// The read snapshot the coordinator assigned (its meaning is the protocol's).
    pub fn snapshot(&self) -> Timestamp {
        self.snapshot
    }

    /// Read `key`: the transaction's own latest write if any, otherwise what the protocol serves.
    pub async fn read(&mut self, key: &Key) -> Result<Option<Value>, TxnError> {
        let result = match self.writes.iter().rev().find(|(k, _)| k == key) {
            Some((_, v)) => Ok(v.clone()),
            None => {
                let reply = self.session.transport.call(ClientOp::Read {
                    txn: self.id,
                    key: key.clone(),
                });
                match reply.await {
                    Ok(ClientReply::Value(v)) => Ok(v),
                    Ok(ClientReply::Aborted(r)) => {
                        self.done = true;
                        Err(TxnError::Aborted(r))
                    }
                    Ok(ClientReply::Rejected(e)) => Err(TxnError::Rejected(e)),
                    Ok(other) => Err(TxnError::Protocol(Box::new(other))),
                    Err(e) => Err(TxnError::Unavailable(e)),
                }
            }
        };
        match &result {
            Ok(value) => self.log_op(|| Op::Read {
                key: key.to_string(),
                value: text(value),
            }),
            // Nothing was shipped yet, so whatever went wrong the attempt cannot commit.
            Err(e) => self.log_outcome(|| aborted(error_outcome_reason(e))),
        }
        result
    }

    /// Buffer a write of `value` (`None` deletes) until commit.
    pub fn write(&mut self, key: Key, value: Option<Value>) -> Result<(), TxnError> {
        if self.read_only {
            return Err(TxnError::Rejected(RequestError::WriteInReadOnly(self.id)));
        }
        self.log_op(|| Op::Write {
            key: key.to_string(),
            value: text(&value),
        });
        match self.writes.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.writes.push((key, value)),
        }
        Ok(())
    }

    /// Commit. `Err(Unavailable)` here means the outcome is unknown.
    pub async fn commit(mut self) -> Result<Timestamp, TxnError> {
        let reply = self.send_commit(false).await;
        self.finish_commit(reply)
    }

    /// Commit, allowing the protocol to answer at local commit (STR's speculative commit).
    /// A protocol without speculative commits answers with the final outcome, as
    /// [`commit`](Self::commit) would.
    pub async fn commit_speculative(mut self) -> Result<CommitProgress<'s, T>, TxnError> {
        match self.send_commit(true).await {
            Ok(ClientReply::SpecCommitted { local_commit_ts }) => {
                let session = self.session;
                Ok(CommitProgress::Speculative(SpeculativeCommit {
                    session,
                    id: self.id,
                    local_commit_ts,
                    read_only: self.read_only,
                    info: std::mem::take(&mut self.info),
                    at: session.transport.now(),
                    record: self.record.take(),
                }))
            }
            reply => self.finish_commit(reply).map(CommitProgress::Final),
        }
    }

    async fn send_commit(&mut self, speculative: bool) -> Result<ClientReply, TransportError> {
        self.done = true;
        let writes = std::mem::take(&mut self.writes);
        let op = ClientOp::Commit {
            txn: self.id,
            writes,
            speculative,
        };
        self.session.transport.call(op).await
    }

    fn finish_commit(
        &mut self,
        reply: Result<ClientReply, TransportError>,
    ) -> Result<Timestamp, TxnError> {
        let result = match reply {
            Ok(ClientReply::Committed { commit_ts }) => Ok(commit_ts),
            Ok(ClientReply::Aborted(r)) => Err(TxnError::Aborted(r)),
            Ok(ClientReply::Rejected(e)) => Err(TxnError::Rejected(e)),
            Ok(other) => Err(TxnError::Protocol(Box::new(other))),
            Err(e) => Err(TxnError::Unavailable(e)),
        };
        self.log_outcome(|| match &result {
            Ok(ts) => RecordedOutcome::Committed { commit_ts: ts.0 },
            Err(TxnError::Aborted(r)) => aborted(*r),
            Err(TxnError::Rejected(_)) => aborted(AbortReason::InvalidRequest),
            // No answer, or one that makes no sense: the writes may or may not be installed.
            Err(TxnError::Unavailable(_) | TxnError::Protocol(_)) => RecordedOutcome::Unknown,
        });
        result
    }

    /// Abort; the coordinator forgets the transaction. Errors are ignored: an unreachable
    /// coordinator times the transaction out on its own.
    pub async fn abort(mut self) {
        self.done = true;
        self.log_outcome(|| aborted(AbortReason::UserRollback));
        let _ = self
            .session
            .transport
            .call(ClientOp::Abort { txn: self.id })
            .await;
    }

    /// Whether the transaction already ended (committed, aborted, or aborted by the protocol).
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The transaction's info map, handed to the speculation callbacks.
    pub fn info(&self) -> &TxnInfo {
        &self.info
    }
}

impl<T: Transport> Drop for Txn<'_, T> {
    /// Hand the finished attempt to the session's recorder. A transaction dropped without commit
    /// or abort never shipped its writes, and its coordinator times it out.
    fn drop(&mut self) {
        if let Some(record) = self.record.take() {
            self.session
                .record(self.id, self.read_only, record, AbortReason::Timeout);
        }
    }
}

impl<T: Transport> Session<T> {
    /// Push a finished attempt to the recorder; `unfinished` is the outcome when none was set.
    fn record(&self, id: TxnId, read_only: bool, log: AttemptLog, unfinished: AbortReason) {
        let Some(recorder) = &self.recorder else {
            return;
        };
        recorder.push(TxnRecord {
            index: 0,
            client: self.id().0,
            txn: Some(id.0),
            name: log.name.to_string(),
            read_only,
            invoke_us: log.invoked.as_micros() as u64,
            complete_us: self.transport.now().as_micros() as u64,
            ops: log.ops,
            outcome: log.outcome.unwrap_or_else(|| aborted(unfinished)),
            ops_unknown: false,
        });
    }

    /// Record a one-shot attempt invoked at `invoked` whose reply never came: its outcome and
    /// its operations are unknown.
    fn record_lost(&self, name: &'static str, read_only: bool, invoked: Duration) {
        let Some(recorder) = &self.recorder else {
            return;
        };
        recorder.push(TxnRecord {
            index: 0,
            client: self.id().0,
            txn: None,
            name: name.to_string(),
            read_only,
            invoke_us: invoked.as_micros() as u64,
            complete_us: self.transport.now().as_micros() as u64,
            ops: Vec::new(),
            outcome: RecordedOutcome::Unknown,
            ops_unknown: true,
        });
    }
}

/// The info map of a transaction (STR §4's `txInfo`): what its body noted for the speculation
/// callbacks to weigh, such as the price of the item being bought.
pub type TxnInfo = BTreeMap<String, f64>;

/// How a speculative commit request ended.
pub enum CommitProgress<'s, T: Transport> {
    /// Committed for good (the protocol does not speculate, or chose not to).
    Final(Timestamp),
    /// Committed locally and externalizable; the final outcome is pending.
    Speculative(SpeculativeCommit<'s, T>),
}

/// A transaction that committed speculatively and waits for its final outcome. Its history
/// record is written once the outcome is known (or as unknown, if it is dropped unresolved).
pub struct SpeculativeCommit<'s, T: Transport> {
    session: &'s Session<T>,
    id: TxnId,
    local_commit_ts: Timestamp,
    read_only: bool,
    info: TxnInfo,
    /// When the speculative commit was answered (the transport's clock).
    at: Duration,
    record: Option<AttemptLog>,
}

impl<T: Transport> SpeculativeCommit<'_, T> {
    pub fn id(&self) -> TxnId {
        self.id
    }

    pub fn local_commit_ts(&self) -> Timestamp {
        self.local_commit_ts
    }

    pub fn info(&self) -> &TxnInfo {
        &self.info
    }

    /// When the speculative commit was answered, on the transport's clock.
    pub fn spec_committed_at(&self) -> Duration {
        self.at
    }

    /// Wait for the final outcome: `Committed`, `Aborted(Misspeculation)`, or `Unknown` when the
    /// coordinator forgot the transaction or stopped answering.
    pub async fn outcome(self) -> Outcome {
        self.resolution().await.outcome
    }

    /// Wait for the final outcome, and learn when the coordinator reached it, which may be
    /// long before the client asked.
    pub async fn resolution(mut self) -> Resolution {
        let transport = &self.session.transport;
        let reply = transport
            .call(ClientOp::AwaitOutcome { txn: self.id })
            .await;
        let mut decided_at = transport.now();
        let outcome = match reply {
            Ok(ClientReply::Committed { commit_ts }) => Outcome::Committed { commit_ts },
            // Whatever the protocol's reason, the client had already externalized the result.
            Ok(ClientReply::Aborted(_)) => Outcome::Aborted(AbortReason::Misspeculation),
            Ok(ClientReply::Resolved {
                commit_ts,
                decided_ago_us,
            }) => {
                // Never before the speculative commit itself.
                let ago = Duration::from_micros(decided_ago_us);
                decided_at = decided_at.saturating_sub(ago).max(self.at);
                match commit_ts {
                    Some(commit_ts) => Outcome::Committed { commit_ts },
                    None => Outcome::Aborted(AbortReason::Misspeculation),
                }
            }
            _ => Outcome::Unknown,
        };
        if let Some(mut log) = self.record.take() {
            log.outcome = Some(recorded(outcome));
            self.session
                .record(self.id, self.read_only, log, AbortReason::Timeout);
        }
        Resolution {
            outcome,
            decided_at,
        }
    }
}

/// The final outcome of a speculative commit and when the coordinator reached it, on the
/// transport's clock: the end of the transaction's final latency (STR §8), which the client may
/// learn only later, when it asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resolution {
    pub outcome: Outcome,
    pub decided_at: Duration,
}

impl<T: Transport> Drop for SpeculativeCommit<'_, T> {
    /// Dropped unresolved: the client never learned the outcome.
    fn drop(&mut self) {
        if let Some(mut log) = self.record.take() {
            log.outcome = Some(RecordedOutcome::Unknown);
            self.session
                .record(self.id, self.read_only, log, AbortReason::Timeout);
        }
    }
}

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

impl<T: Transport> Ops for Txn<'_, T> {
    fn read<'a>(&'a mut self, key: &'a Key) -> BoxFuture<'a, Result<Option<Value>, TxnError>> {
        Box::pin(Txn::read(self, key))
    }

    fn write(&mut self, key: Key, value: Option<Value>) -> Result<(), TxnError> {
        Txn::write(self, key, value)
    }

    fn note(&mut self, name: &str, value: f64) {
        self.info.insert(name.to_string(), value);
    }
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
}

/// The procedures a node can run for one-shot transactions, by [`ProcedureCall`] name. Built
/// from the same workload code clients run, so a procedure does the same thing whichever form
/// ships it.
pub trait ProcedureCatalog: Send + Sync + 'static {
    /// A procedure ready to run `call`, or why there is none: `UnknownProcedure`, or `Invalid`
    /// arguments.
    fn instantiate(&self, call: &ProcedureCall) -> Result<Box<dyn Procedure>, RequestError>;
}

/// What [`run_with_retry`] reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryReport {
    pub outcome: Outcome,
    /// Attempts made, including the final one.
    pub attempts: u32,
    /// The reason of every aborted attempt, in order.
    pub aborts: Vec<AbortReason>,
}

/// Run `procedure` until it commits, aborts for a non-retryable reason, its outcome becomes
/// unknown, or `max_attempts` attempts were made.
pub async fn run_with_retry<T: Transport>(
    session: &Session<T>,
    procedure: &mut dyn Procedure,
    max_attempts: u32,
) -> RetryReport {
    let mut aborts = Vec::new();
    let mut attempts = 0;
    loop {
        attempts += 1;
        let outcome = run_once(session, procedure).await;
        match outcome {
            Outcome::Aborted(reason) => {
                aborts.push(reason);
                if !reason.is_retryable() || attempts >= max_attempts {
                    return RetryReport {
                        outcome,
                        attempts,
                        aborts,
                    };
                }
            }
            _ => {
                return RetryReport {
                    outcome,
                    attempts,
                    aborts,
                };
            }
        }
    }
}

/// One attempt of `procedure`, reduced to its outcome.
pub async fn run_once<T: Transport>(
    session: &Session<T>,
    procedure: &mut dyn Procedure,
) -> Outcome {
    match attempt(session, procedure, Speculation::default(), None).await {
        Attempt::Done(outcome) => outcome,
        Attempt::Speculative(_) => unreachable!("no speculative commit was asked for"),
    }
}

/// The abort reason an attempt that failed before commit ends with.
fn error_outcome_reason(e: &TxnError) -> AbortReason {
    match error_outcome(e, false) {
        Outcome::Aborted(r) => r,
        _ => AbortReason::Timeout,
    }
}

fn error_outcome(e: &TxnError, committing: bool) -> Outcome {
    match e {
        TxnError::Aborted(r) => Outcome::Aborted(*r),
        TxnError::Unavailable(_) if committing => Outcome::Unknown,
        // Before commit nothing can have taken effect.
        TxnError::Unavailable(_) => Outcome::Aborted(AbortReason::Timeout),
        TxnError::Rejected(_) | TxnError::Protocol(_) => {
            Outcome::Aborted(AbortReason::InvalidRequest)
        }
    }
}

/// How much speculation one attempt may use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Speculation {
    /// Read versions of transactions that only committed locally.
    pub reads: bool,
    /// Answer at local commit when the procedure's `can_spec_commit` agrees.
    pub commit: bool,
}

/// How a speculative attempt ended for now.
pub enum Attempt<'s, T: Transport> {
    /// Finished: committed for good, aborted, or unknown.
    Done(Outcome),
    /// Speculatively committed; [`SpeculativeCommit::outcome`] gives the final outcome.
    Speculative(SpeculativeCommit<'s, T>),
}

/// One attempt of `procedure` using up to `speculation`. A finished attempt is reported to
/// `procedure.finished` and to `stats`; a speculative one has `on_spec_commit` called and must
/// be resolved with [`resolve`].
pub async fn run_speculative<'s, T: Transport>(
    session: &'s Session<T>,
    procedure: &mut dyn Procedure,
    speculation: Speculation,
    stats: &CommitStats,
) -> Attempt<'s, T> {
    attempt(session, procedure, speculation, Some(stats)).await
}

/// One attempt; a speculative commit is considered only with `stats` to weigh it against.
async fn attempt<'s, T: Transport>(
    session: &'s Session<T>,
    procedure: &mut dyn Procedure,
    speculation: Speculation,
    stats: Option<&CommitStats>,
) -> Attempt<'s, T> {
    if session.form == RequestForm::OneShot {
        return execute_one_shot(session, procedure, speculation, stats).await;
    }
    match run_body(session, procedure, speculation.reads, stats).await {
        Ok(txn) => commit_body(txn, procedure, speculation.commit, stats).await,
        Err(outcome) => Attempt::Done(outcome),
    }
}

/// The first half of an attempt: begin a transaction (with speculative reads if `reads`) and
/// run `procedure`'s body in it. Returns the transaction, ready to commit with
/// [`commit_attempt`], or the outcome of an attempt that ended before its commit (reported to
/// `procedure` and `stats` like any finished attempt).
///
/// Splitting an attempt lets a client with a chain of speculative commits run the next
/// transaction's body while earlier ones finalize, and make room in the chain only when the
/// next one is about to commit (STR §4: the chain bounds unresolved speculative commits, not
/// transactions in flight).
pub async fn run_body<'s, T: Transport>(
    session: &'s Session<T>,
    procedure: &mut dyn Procedure,
    reads: bool,
    stats: Option<&CommitStats>,
) -> Result<Txn<'s, T>, Outcome> {
    procedure.prepare_attempt();
    body(session, procedure, reads, stats).await
}

/// [`run_body`] for an attempt already prepared.
async fn body<'s, T: Transport>(
    session: &'s Session<T>,
    procedure: &mut dyn Procedure,
    reads: bool,
    stats: Option<&CommitStats>,
) -> Result<Txn<'s, T>, Outcome> {
    let begun = session
        .begin_with(procedure.name(), procedure.read_only(), reads)
        .await;
    let mut txn = match begun {
        Ok(t) => t,
        Err(e) => return Err(finish(procedure, stats, error_outcome(&e, false))),
    };
    if let Err(e) = procedure.run(&mut txn).await {
        if !txn.is_done() {
            txn.abort().await;
        }
        return Err(finish(procedure, stats, error_outcome(&e, false)));
    }
    Ok(txn)
}

/// The second half of an attempt begun with [`run_body`]: commit `txn`, speculatively if
/// `speculative_commit` and `procedure.can_spec_commit` agrees (weighing `stats`).
pub async fn commit_attempt<'s, T: Transport>(
    txn: Txn<'s, T>,
    procedure: &mut dyn Procedure,
    speculative_commit: bool,
    stats: &CommitStats,
) -> Attempt<'s, T> {
    commit_body(txn, procedure, speculative_commit, Some(stats)).await
}

async fn commit_body<'s, T: Transport>(
    txn: Txn<'s, T>,
    procedure: &mut dyn Procedure,
    speculative_commit: bool,
    stats: Option<&CommitStats>,
) -> Attempt<'s, T> {
    let speculate = match stats {
        Some(stats) if speculative_commit => procedure.can_spec_commit(txn.info(), stats),
        _ => false,
    };
    let committed = if speculate {
        txn.commit_speculative().await
    } else {
        txn.commit().await.map(CommitProgress::Final)
    };
    let outcome = match committed {
        Ok(CommitProgress::Final(commit_ts)) => Outcome::Committed { commit_ts },
        Ok(CommitProgress::Speculative(spec)) => {
            procedure.on_spec_commit(spec.info());
            return Attempt::Speculative(spec);
        }
        Err(e) => error_outcome(&e, true),
    };
    Attempt::Done(finish(procedure, stats, outcome))
}

/// Wait for a speculative attempt's final outcome and report it to `procedure` and `stats`.
pub async fn resolve<T: Transport>(
    spec: SpeculativeCommit<'_, T>,
    procedure: &mut dyn Procedure,
    stats: &CommitStats,
) -> Resolution {
    let info = spec.info().clone();
    let resolution = spec.resolution().await;
    if matches!(resolution.outcome, Outcome::Committed { .. }) {
        procedure.on_final_commit(&info);
    }
    finish(procedure, Some(stats), resolution.outcome);
    resolution
}

/// Report a finished attempt to its procedure and to the per-type statistics, if kept.
fn finish(procedure: &mut dyn Procedure, stats: Option<&CommitStats>, outcome: Outcome) -> Outcome {
    if let Some(stats) = stats {
        match outcome {
            Outcome::Committed { .. } => stats.record(procedure.name(), true),
            Outcome::Aborted(AbortReason::UserRollback) | Outcome::Unknown => {}
            Outcome::Aborted(_) => stats.record(procedure.name(), false),
        }
    }
    procedure.finished(&outcome);
    outcome
}

/// One attempt of `procedure` in the one-shot form: prepare it, ship it as one
/// [`ClientOp::Execute`] request, and take in what the node's run of it did. A procedure
/// without a [`call`](Procedure::call) runs interactively instead. The speculation asked for
/// applies as in [`run_speculative`], except that the node, not this client, weighs
/// [`Procedure::can_spec_commit`] (with its own [`CommitStats`]) since the commit is part of the
/// request; `stats` is still told how the attempt ended.
///
/// The attempt's history record carries the operations the node reports, in program order,
/// and this client's copy of the procedure is replayed over them (reads answered with the
/// values the node read) so that it ends in the state an interactive run would have left.
/// When the reply is lost the outcome is [`Outcome::Unknown`] and the operations are unknown
/// too: the attempt is recorded with none, marked `ops_unknown`.
pub async fn execute_one_shot<'s, T: Transport>(
    session: &'s Session<T>,
    procedure: &mut dyn Procedure,
    speculation: Speculation,
    stats: Option<&CommitStats>,
) -> Attempt<'s, T> {
    procedure.prepare_attempt();
    match procedure.call() {
        Some(call) => one_shot(session, procedure, call, speculation, stats).await,
        None => match body(session, procedure, speculation.reads, stats).await {
            Ok(txn) => commit_body(txn, procedure, speculation.commit, stats).await,
            Err(outcome) => Attempt::Done(outcome),
        },
    }
}

async fn one_shot<'s, T: Transport>(
    session: &'s Session<T>,
    procedure: &mut dyn Procedure,
    call: ProcedureCall,
    speculation: Speculation,
    stats: Option<&CommitStats>,
) -> Attempt<'s, T> {
    let invoked = session.transport.now();
    let read_only = procedure.read_only();
    let op = ClientOp::Execute {
        call,
        read_only,
        speculative_reads: speculation.reads,
        speculative_commit: speculation.commit && stats.is_some(),
    };
    let execution = match session.transport.call(op).await {
        Ok(ClientReply::Executed(execution)) => *execution,
        Ok(ClientReply::Aborted(reason)) => {
            return Attempt::Done(finish(procedure, stats, Outcome::Aborted(reason)));
        }
        Ok(ClientReply::Rejected(e)) => {
            let outcome = error_outcome(&TxnError::Rejected(e), false);
            return Attempt::Done(finish(procedure, stats, outcome));
        }
        Ok(other) => {
            let outcome = error_outcome(&TxnError::Protocol(Box::new(other)), true);
            return Attempt::Done(finish(procedure, stats, outcome));
        }
        // The procedure may have committed; what it read and wrote is unknown.
        Err(_) => {
            session.record_lost(procedure.name(), read_only, invoked);
            return Attempt::Done(finish(procedure, stats, Outcome::Unknown));
        }
    };
    let Execution {
        txn,
        ops,
        info,
        end,
    } = execution;
    replay(procedure, &ops, &end).await;
    // Only a recorded session needs the operations in the history's form.
    let mut log = session.recorder.as_ref().map(|_| AttemptLog {
        name: procedure.name(),
        invoked,
        ops: ops.iter().map(history_op).collect(),
        outcome: None,
    });
    let outcome = match (end, txn) {
        (ClientReply::Committed { commit_ts }, _) => Outcome::Committed { commit_ts },
        (ClientReply::SpecCommitted { local_commit_ts }, Some(id)) => {
            procedure.on_spec_commit(&info);
            return Attempt::Speculative(SpeculativeCommit {
                session,
                id,
                local_commit_ts,
                read_only,
                info,
                at: session.transport.now(),
                record: log,
            });
        }
        (ClientReply::Aborted(reason), _) => Outcome::Aborted(reason),
        (ClientReply::Rejected(e), _) => error_outcome(&TxnError::Rejected(e), false),
        (other, _) => error_outcome(&TxnError::Protocol(Box::new(other)), true),
    };
    if let (Some(id), Some(mut log)) = (txn, log.take()) {
        log.outcome = Some(recorded(outcome));
        session.record(id, read_only, log, AbortReason::Timeout);
    }
    Attempt::Done(finish(procedure, stats, outcome))
}

/// How a history records `outcome`.
fn recorded(outcome: Outcome) -> RecordedOutcome {
    match outcome {
        Outcome::Committed { commit_ts } => RecordedOutcome::Committed {
            commit_ts: commit_ts.0,
        },
        Outcome::Aborted(reason) => aborted(reason),
        Outcome::Unknown => RecordedOutcome::Unknown,
    }
}

/// A one-shot operation as a history records it.
fn history_op(op: &ExecutedOp) -> Op {
    match op {
        ExecutedOp::Read { key, value } => Op::Read {
            key: key.to_string(),
            value: text(value),
        },
        ExecutedOp::Write { key, value } => Op::Write {
            key: key.to_string(),
            value: text(value),
        },
    }
}

/// Run `procedure`'s body over the operations a node's run of it reported, so that this copy
/// ends in the same state (its results, what `finished` will tally). Reads are answered in
/// order with the values the node read; a read past the reported ones (the node's run ended
/// there) fails as the node's did. A body that departs from the reported operations (the node
/// ran different code) stops at that point: the outcome is the node's either way.
async fn replay(procedure: &mut dyn Procedure, ops: &[ExecutedOp], end: &ClientReply) {
    let ended = match end {
        ClientReply::Aborted(reason) => TxnError::Aborted(*reason),
        ClientReply::Rejected(e) => TxnError::Rejected(e.clone()),
        other => TxnError::Protocol(Box::new(other.clone())),
    };
    let mut replay = Replay {
        ops: ops.iter(),
        ended,
    };
    let _ = procedure.run(&mut replay).await;
}

/// [`Ops`] answering from a node's reported operations (see [`replay`]).
struct Replay<'o> {
    ops: std::slice::Iter<'o, ExecutedOp>,
    ended: TxnError,
}

impl Ops for Replay<'_> {
    fn read<'a>(&'a mut self, key: &'a Key) -> BoxFuture<'a, Result<Option<Value>, TxnError>> {
        let result = match self.ops.next() {
            Some(ExecutedOp::Read { key: k, value }) if k == key => Ok(value.clone()),
            _ => Err(self.ended.clone()),
        };
        Box::pin(std::future::ready(result))
    }

    fn write(&mut self, key: Key, value: Option<Value>) -> Result<(), TxnError> {
        match self.ops.next() {
            Some(ExecutedOp::Write { key: k, value: v }) if *k == key && *v == value => Ok(()),
            _ => Err(self.ended.clone()),
        }
    }
}
