//! Sessions and interactive transactions: begin, read, write, commit (finally or
//! speculatively), abort, and how a speculative commit learns its final outcome.

use crate::HistoryRecorder;
use crate::attempt::error_outcome_reason;
use crate::history::{AttemptLog, aborted, recorded, text};
use crate::transport::Transport;
use augur_contract::{BoxFuture, Ops, Outcome, TransportError, TxnError, TxnInfo};
use augur_types::history::{Op, RecordedOutcome};
use augur_types::{AbortReason, ClientId, ClientOp, ClientReply, Key, RequestError, RequestForm};
use augur_types::{Timestamp, TxnId, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// A client session bound to one coordinator.
pub struct Session<T: Transport> {
    pub(crate) transport: T,
    pub(crate) recorder: Option<HistoryRecorder>,
    pub(crate) form: RequestForm,
    /// The procedure types the coordinator refused to run in one request
    /// ([`RequestError::NotOneShot`]): this session runs them interactively from then on.
    pub(crate) interactive_types: std::sync::Mutex<std::collections::BTreeSet<&'static str>>,
    /// When the transaction now being attempted was first tried, on the transport's clock, while
    /// a retry loop says so ([`Session::trying_since`]).
    trying_since: std::sync::Mutex<Option<Duration>>,
}

impl<T: Transport> Session<T> {
    pub fn new(transport: T) -> Self {
        Session {
            transport,
            recorder: None,
            form: RequestForm::Interactive,
            interactive_types: Default::default(),
            trying_since: Default::default(),
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
    /// that has a [`call`](crate::Procedure::call) as one request (see [`execute_one_shot`](crate::execute_one_shot)); procedures
    /// without one, and [`Session::begin`], stay interactive.
    pub fn with_form(mut self, form: RequestForm) -> Self {
        self.form = form;
        self
    }

    /// The form procedures are submitted in.
    pub fn form(&self) -> RequestForm {
        self.form
    }

    /// Whether procedures of type `name` go interactively even in the one-shot form: the
    /// coordinator answered one of them [`RequestError::NotOneShot`].
    pub fn runs_interactively(&self, name: &str) -> bool {
        self.interactive_types
            .lock()
            .expect("interactive types")
            .contains(name)
    }

    pub(crate) fn run_interactively(&self, name: &'static str) {
        self.interactive_types
            .lock()
            .expect("interactive types")
            .insert(name);
    }

    /// Attempts begun while the returned guard lives belong to a transaction first tried at
    /// `since` (the transport's clock): each tells its coordinator how long the transaction has
    /// been trying, which is its age under wait-die (`augur_contract::age`). Retry loops hold
    /// one per attempt; dropping it restores what was there before.
    pub fn trying_since(&self, since: Duration) -> TryingSince<'_, T> {
        let before = self
            .trying_since
            .lock()
            .expect("trying since")
            .replace(since);
        TryingSince {
            session: self,
            before,
        }
    }

    /// How long the transaction being attempted has been trying, in microseconds (0 outside a
    /// retry loop).
    pub(crate) fn trying_for_us(&self) -> u64 {
        match *self.trying_since.lock().expect("trying since") {
            Some(since) => {
                let micros = self.transport.now().saturating_sub(since).as_micros();
                micros.try_into().unwrap_or(u64::MAX)
            }
            None => 0,
        }
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

    pub(crate) async fn begin_with(
        &self,
        name: &'static str,
        read_only: bool,
        speculative: bool,
    ) -> Result<Txn<'_, T>, TxnError> {
        let invoked = self.transport.now();
        let op = ClientOp::Begin {
            read_only,
            speculative,
            trying_for_us: self.trying_for_us(),
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
                    call: None,
                }),
            }),
            ClientReply::Aborted(r) => Err(TxnError::Aborted(r)),
            ClientReply::Rejected(e) => Err(TxnError::Rejected(e)),
            other => Err(TxnError::Protocol(Box::new(other))),
        }
    }
}

/// While it lives, attempts of the session belong to a transaction first tried at a given time
/// ([`Session::trying_since`]).
pub struct TryingSince<'s, T: Transport> {
    session: &'s Session<T>,
    before: Option<Duration>,
}

impl<T: Transport> Drop for TryingSince<'_, T> {
    fn drop(&mut self) {
        *self.session.trying_since.lock().expect("trying since") = self.before;
    }
}

/// An interactive transaction. Dropping it without commit or abort leaves the coordinator to time
/// it out; call [`Txn::abort`] to release it at once.
pub struct Txn<'s, T: Transport> {
    pub(crate) session: &'s Session<T>,
    pub(crate) id: TxnId,
    pub(crate) snapshot: Timestamp,
    pub(crate) read_only: bool,
    pub(crate) writes: Vec<(Key, Option<Value>)>,
    pub(crate) info: TxnInfo,
    pub(crate) done: bool,
    /// What the history needs, when the session records one.
    pub(crate) record: Option<AttemptLog>,
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
    pub(crate) session: &'s Session<T>,
    pub(crate) id: TxnId,
    pub(crate) local_commit_ts: Timestamp,
    pub(crate) read_only: bool,
    pub(crate) info: TxnInfo,
    /// When the speculative commit was answered (the transport's clock).
    pub(crate) at: Duration,
    pub(crate) record: Option<AttemptLog>,
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
