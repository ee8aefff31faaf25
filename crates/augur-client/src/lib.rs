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

use augur_types::{AbortReason, ClientId, ClientOp, ClientReply, Key, RequestError, Timestamp};
use augur_types::{TxnId, Value};
use futures::future::BoxFuture;
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
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
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

/// A client session bound to one coordinator.
pub struct Session<T: Transport> {
    transport: T,
}

impl<T: Transport> Session<T> {
    pub fn new(transport: T) -> Self {
        Session { transport }
    }

    pub fn transport(&self) -> &T {
        &self.transport
    }

    pub fn id(&self) -> ClientId {
        self.transport.client_id()
    }

    /// Start a transaction. `read_only` promises no writes and lets protocols skip certification.
    pub async fn begin(&self, read_only: bool) -> Result<Txn<'_, T>, TxnError> {
        match self.transport.call(ClientOp::Begin { read_only }).await? {
            ClientReply::Begun { txn, snapshot } => Ok(Txn {
                session: self,
                id: txn,
                snapshot,
                read_only,
                writes: Vec::new(),
                done: false,
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
    done: bool,
}

impl<T: Transport> Txn<'_, T> {
    pub fn id(&self) -> TxnId {
        self.id
    }

    /// The read snapshot the coordinator assigned (its meaning is the protocol's).
    pub fn snapshot(&self) -> Timestamp {
        self.snapshot
    }

    /// Read `key`: the transaction's own latest write if any, otherwise what the protocol serves.
    pub async fn read(&mut self, key: &Key) -> Result<Option<Value>, TxnError> {
        if let Some((_, v)) = self.writes.iter().rev().find(|(k, _)| k == key) {
            return Ok(v.clone());
        }
        let reply = self.session.transport.call(ClientOp::Read {
            txn: self.id,
            key: key.clone(),
        });
        match reply.await? {
            ClientReply::Value(v) => Ok(v),
            ClientReply::Aborted(r) => {
                self.done = true;
                Err(TxnError::Aborted(r))
            }
            ClientReply::Rejected(e) => Err(TxnError::Rejected(e)),
            other => Err(TxnError::Protocol(Box::new(other))),
        }
    }

    /// Buffer a write of `value` (`None` deletes) until commit.
    pub fn write(&mut self, key: Key, value: Option<Value>) -> Result<(), TxnError> {
        if self.read_only {
            return Err(TxnError::Rejected(RequestError::WriteInReadOnly(self.id)));
        }
        match self.writes.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.writes.push((key, value)),
        }
        Ok(())
    }

    /// Commit. `Err(Unavailable)` here means the outcome is unknown.
    pub async fn commit(mut self) -> Result<Timestamp, TxnError> {
        self.done = true;
        let writes = std::mem::take(&mut self.writes);
        match self
            .session
            .transport
            .call(ClientOp::Commit {
                txn: self.id,
                writes,
            })
            .await?
        {
            ClientReply::Committed { commit_ts } => Ok(commit_ts),
            ClientReply::Aborted(r) => Err(TxnError::Aborted(r)),
            ClientReply::Rejected(e) => Err(TxnError::Rejected(e)),
            other => Err(TxnError::Protocol(Box::new(other))),
        }
    }

    /// Abort; the coordinator forgets the transaction. Errors are ignored: an unreachable
    /// coordinator times the transaction out on its own.
    pub async fn abort(mut self) {
        self.done = true;
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
}

/// The read/write interface a workload procedure runs against.
pub trait Ops: Send {
    fn read<'a>(&'a mut self, key: &'a Key) -> BoxFuture<'a, Result<Option<Value>, TxnError>>;
    fn write(&mut self, key: Key, value: Option<Value>) -> Result<(), TxnError>;
}

impl<T: Transport> Ops for Txn<'_, T> {
    fn read<'a>(&'a mut self, key: &'a Key) -> BoxFuture<'a, Result<Option<Value>, TxnError>> {
        Box::pin(Txn::read(self, key))
    }

    fn write(&mut self, key: Key, value: Option<Value>) -> Result<(), TxnError> {
        Txn::write(self, key, value)
    }
}

/// One transaction of a workload, written once over [`Ops`].
pub trait Procedure: Send {
    /// The transaction type, for per-type counters.
    fn name(&self) -> &'static str;
    fn read_only(&self) -> bool;
    /// Run the transaction body. `Err(Aborted(UserRollback))` asks for a rollback.
    fn run<'a>(&'a mut self, ops: &'a mut dyn Ops) -> BoxFuture<'a, Result<(), TxnError>>;
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
    let mut txn = match session.begin(procedure.read_only()).await {
        Ok(t) => t,
        Err(e) => return error_outcome(&e, false),
    };
    match procedure.run(&mut txn).await {
        Ok(()) => match txn.commit().await {
            Ok(commit_ts) => Outcome::Committed { commit_ts },
            Err(e) => error_outcome(&e, true),
        },
        Err(e) => {
            if !txn.is_done() {
                txn.abort().await;
            }
            error_outcome(&e, false)
        }
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
