//! One attempt of a procedure in the interactive form, in halves ([`run_body`], then
//! [`commit_attempt`]) or whole, the resolution of a speculative commit, and the simple retry
//! loop the loaders use. Every finished attempt is reported to its procedure and to the
//! per-type commit statistics here.

use crate::one_shot::execute_one_shot;
use crate::session::{CommitProgress, Resolution, Session, SpeculativeCommit, Txn};
use crate::transport::Transport;
use augur_contract::Outcome;
use augur_contract::TxnError;
use augur_contract::{CommitStats, Procedure};
use augur_types::{AbortReason, RequestForm};
use std::time::Duration;

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
    let budget = |attempts: u32, _: Duration| attempts < max_attempts;
    retry(session, procedure, budget, |_| Duration::ZERO).await
}

/// [`run_with_retry`] bounded by time instead of attempts: it tries again after every abort
/// that may pass while less than `patience` has elapsed since the first attempt began, and
/// waits `pause(n)` after the `n`th abort, so that attempts refused at once (a partition being
/// reconfigured, a node not leased yet) outlast the refusals rather than burn out in a burst.
pub async fn run_with_retry_for<T: Transport>(
    session: &Session<T>,
    procedure: &mut dyn Procedure,
    patience: Duration,
    pause: impl Fn(u32) -> Duration,
) -> RetryReport {
    let budget = |_: u32, elapsed: Duration| elapsed < patience;
    retry(session, procedure, budget, pause).await
}

/// The retry loop: after each abort that may pass, `budget(attempts, elapsed)` says whether
/// to try again (after `pause(attempts)`).
async fn retry<T: Transport>(
    session: &Session<T>,
    procedure: &mut dyn Procedure,
    budget: impl Fn(u32, Duration) -> bool,
    pause: impl Fn(u32) -> Duration,
) -> RetryReport {
    let mut aborts = Vec::new();
    let mut attempts = 0;
    let start = session.transport.now();
    let _trying = session.trying_since(start);
    loop {
        attempts += 1;
        let outcome = run_once(session, procedure).await;
        let Outcome::Aborted(reason) = outcome else {
            return RetryReport {
                outcome,
                attempts,
                aborts,
            };
        };
        aborts.push(reason);
        let elapsed = session.transport.now().saturating_sub(start);
        if !reason.is_retryable() || !budget(attempts, elapsed) {
            return RetryReport {
                outcome,
                attempts,
                aborts,
            };
        }
        let wait = pause(attempts);
        if !wait.is_zero() {
            session.transport.sleep(wait).await;
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
pub(crate) fn error_outcome_reason(e: &TxnError) -> AbortReason {
    match error_outcome(e, false) {
        Outcome::Aborted(r) => r,
        _ => AbortReason::Timeout,
    }
}

pub(crate) fn error_outcome(e: &TxnError, committing: bool) -> Outcome {
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
pub(crate) async fn body<'s, T: Transport>(
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

pub(crate) async fn commit_body<'s, T: Transport>(
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
pub(crate) fn finish(
    procedure: &mut dyn Procedure,
    stats: Option<&CommitStats>,
    outcome: Outcome,
) -> Outcome {
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
