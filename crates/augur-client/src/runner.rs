//! The attempt loop of one client, shared by `augur bench` and `augur check`: run a
//! transaction's attempts in the session's request form, keep its speculative commits in a
//! chain until their final outcomes are known, retry what the [`RetryPolicy`] allows, and tell
//! a [`RunObserver`] what happened, so that callers keep statistics or react without running
//! attempts themselves.

use crate::attempt::{Attempt, Speculation, commit_attempt, resolve, run_body};
use crate::one_shot::execute_one_shot;
use crate::procedure::{CommitStats, Procedure};
use crate::session::{Outcome, Session, SpeculativeCommit};
use crate::transport::Transport;
use crate::tuner::{Degree, SpeculationTuner};
use augur_types::{AbortReason, RequestForm};
use std::collections::VecDeque;
use std::time::Duration;

/// Where each attempt's speculation degree comes from.
#[derive(Clone)]
pub enum DegreeChoice {
    /// Always this degree.
    Fixed(Degree),
    /// What `tuner` picks at the time the attempt starts, measured from `origin` on the
    /// transport's clock; the tuner hears of every final commit.
    Tuned {
        tuner: SpeculationTuner,
        origin: Duration,
    },
}

/// When a full chain of speculative commits makes room for the next one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainRoom {
    /// Just before the next attempt commits: its body runs while the chain finalizes, so the
    /// chain bounds unresolved speculative commits, not transactions in flight (STR §4). In the
    /// one-shot form the commit is part of the one request, so room is made before it is sent.
    BeforeCommit,
    /// Right after a speculative commit fills the chain, before the caller moves on: the chain
    /// never holds more than its length less one between transactions.
    AfterSpecCommit,
}

/// Which aborted attempts run again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retry an attempt aborted for a [retryable](AbortReason::is_retryable) reason.
    pub retryable: bool,
    /// Run a misspeculated transaction again (a procedure with nothing else to compensate with).
    pub misspeculated: bool,
    /// Never retry at or after this time on the transport's clock.
    pub until: Option<Duration>,
}

impl RetryPolicy {
    /// Every transaction gets one attempt.
    pub const NEVER: RetryPolicy = RetryPolicy {
        retryable: false,
        misspeculated: false,
        until: None,
    };

    /// Whether an attempt aborted for `reason` at `at` runs again.
    fn again(&self, reason: AbortReason, at: Duration) -> bool {
        let allowed = (self.retryable && reason.is_retryable())
            || (self.misspeculated && reason == AbortReason::Misspeculation);
        allowed && self.until.is_none_or(|until| at < until)
    }
}

/// Told what became of each transaction a [`Runner`] runs. `started` is what the caller passed
/// to [`Runner::run`] (the transaction's first start, or its arrival in an open loop) and `at`
/// the transport's clock when the runner learned of the event. Every method does nothing by
/// default.
pub trait RunObserver: Send {
    /// The transaction committed for good at `finished`; `perceived` is when its client could
    /// first show the result: its last speculative commit, or `finished` without one.
    fn committed(
        &mut self,
        _name: &'static str,
        _started: Duration,
        _finished: Duration,
        _perceived: Duration,
    ) {
    }

    /// An attempt aborted for `reason` (after [`misspeculated`](Self::misspeculated), when the
    /// final outcome of a speculative commit was an abort).
    fn aborted(
        &mut self,
        _name: &'static str,
        _reason: AbortReason,
        _started: Duration,
        _at: Duration,
    ) {
    }

    /// The attempt that just aborted runs again.
    fn retrying(&mut self, _name: &'static str, _started: Duration, _at: Duration) {}

    /// The client never learned whether the transaction committed.
    fn unknown(&mut self, _name: &'static str, _started: Duration, _at: Duration) {}

    /// An attempt committed speculatively and joined the chain.
    fn spec_committed(&mut self, _name: &'static str, _started: Duration, _at: Duration) {}

    /// A speculatively committed attempt's final outcome was an abort.
    fn misspeculated(&mut self, _name: &'static str, _started: Duration, _at: Duration) {}
}

/// A transaction whose speculative commit awaits its final outcome.
struct InFlight<'s, T: Transport> {
    procedure: Box<dyn Procedure>,
    spec: SpeculativeCommit<'s, T>,
    started: Duration,
    /// When its speculative commit was answered: the latency its client perceived.
    perceived: Duration,
}

/// The attempt loop of one client over `session`: the only place that decides how much an
/// attempt speculates, when the chain of unresolved speculative commits makes room, and which
/// aborts are retried.
pub struct Runner<'s, T: Transport> {
    session: &'s Session<T>,
    degree: DegreeChoice,
    room: ChainRoom,
    retry: RetryPolicy,
    /// The per-type statistics `can_spec_commit` weighs; shared with whoever else should see
    /// this client's outcomes.
    commit_stats: CommitStats,
    /// Speculatively committed transactions awaiting their outcome, oldest first. Protocols
    /// without speculation answer every commit finally and it stays empty.
    chain: VecDeque<InFlight<'s, T>>,
}

impl<'s, T: Transport> Runner<'s, T> {
    pub fn new(
        session: &'s Session<T>,
        degree: DegreeChoice,
        room: ChainRoom,
        retry: RetryPolicy,
        commit_stats: CommitStats,
    ) -> Self {
        Runner {
            session,
            degree,
            room,
            retry,
            commit_stats,
            chain: VecDeque::new(),
        }
    }

    pub fn session(&self) -> &'s Session<T> {
        self.session
    }

    /// Speculative commits not yet resolved.
    pub fn unresolved(&self) -> usize {
        self.chain.len()
    }

    /// The speculation degree for an attempt starting now.
    pub fn degree(&self) -> Degree {
        match &self.degree {
            DegreeChoice::Fixed(degree) => *degree,
            DegreeChoice::Tuned { tuner, origin } => {
                let since_start = self.now().saturating_sub(*origin);
                tuner.degree(since_start)
            }
        }
    }

    fn now(&self) -> Duration {
        self.session.transport().now()
    }

    /// Resolve the oldest speculative commits until the chain is no longer than the current
    /// degree allows (the degree may have shrunk since they joined it).
    pub async fn fit_chain(&mut self, observer: &mut impl RunObserver) {
        while self.chain.len() > self.degree().chain as usize {
            self.resolve_oldest(observer).await;
        }
    }

    /// Resolve every speculative commit still in the chain (the retry policy still applies to
    /// misspeculated ones).
    pub async fn resolve_all(&mut self, observer: &mut impl RunObserver) {
        while !self.chain.is_empty() {
            self.resolve_oldest(observer).await;
        }
    }

    /// Make room in the chain for one more speculative commit under `degree`.
    async fn make_room(&mut self, degree: Degree, observer: &mut impl RunObserver) {
        while degree.chain > 0 && self.chain.len() >= degree.chain as usize {
            // Boxed: resolving may run a misspeculated transaction again.
            Box::pin(self.resolve_oldest(observer)).await;
        }
    }

    /// Run `procedure`, which `started` at that time, until it commits for good, commits
    /// speculatively (then it joins the chain, to be resolved later), or ends otherwise. Each
    /// attempt runs at the degree current when it starts, so a change of degree reaches the
    /// retries too (with thousands of clients retrying, a tuner would otherwise see its moves
    /// only seconds later).
    pub async fn run(
        &mut self,
        mut procedure: Box<dyn Procedure>,
        started: Duration,
        observer: &mut impl RunObserver,
    ) {
        let stats = self.commit_stats.clone();
        loop {
            let degree = self.degree();
            let speculate = degree.chain > 0;
            let before_commit = self.room == ChainRoom::BeforeCommit;
            let attempt = if self.session.form() == RequestForm::OneShot {
                if before_commit {
                    self.make_room(degree, observer).await;
                }
                let speculation = Speculation {
                    reads: degree.reads,
                    commit: speculate,
                };
                execute_one_shot(self.session, procedure.as_mut(), speculation, Some(&stats)).await
            } else {
                let body =
                    run_body(self.session, procedure.as_mut(), degree.reads, Some(&stats)).await;
                match body {
                    Ok(txn) => {
                        if before_commit {
                            self.make_room(degree, observer).await;
                        }
                        commit_attempt(txn, procedure.as_mut(), speculate, &stats).await
                    }
                    Err(outcome) => Attempt::Done(outcome),
                }
            };
            let name = procedure.name();
            match attempt {
                Attempt::Done(Outcome::Committed { .. }) => {
                    let now = self.now();
                    self.committed(observer, name, started, now, now);
                    return;
                }
                Attempt::Done(Outcome::Aborted(reason)) => {
                    if !self.aborted(observer, name, reason, started) {
                        return;
                    }
                }
                Attempt::Done(Outcome::Unknown) => {
                    observer.unknown(name, started, self.now());
                    return;
                }
                Attempt::Speculative(spec) => {
                    observer.spec_committed(name, started, self.now());
                    self.chain.push_back(InFlight {
                        perceived: spec.spec_committed_at(),
                        procedure,
                        spec,
                        started,
                    });
                    if !before_commit {
                        self.make_room(degree, observer).await;
                    }
                    return;
                }
            }
        }
    }

    /// Wait for the oldest speculative commit's final outcome; a misspeculated transaction runs
    /// again if the retry policy allows (and may join the chain again).
    async fn resolve_oldest(&mut self, observer: &mut impl RunObserver) {
        let Some(mut flight) = self.chain.pop_front() else {
            return;
        };
        let name = flight.procedure.name();
        let resolution = resolve(flight.spec, flight.procedure.as_mut(), &self.commit_stats).await;
        match resolution.outcome {
            Outcome::Committed { .. } => {
                // Final latency ends when the coordinator final committed, not when this client
                // got round to asking.
                let finished = resolution.decided_at;
                self.committed(observer, name, flight.started, finished, flight.perceived);
            }
            Outcome::Aborted(reason) => {
                observer.misspeculated(name, flight.started, self.now());
                if self.aborted(observer, name, reason, flight.started) {
                    Box::pin(self.run(flight.procedure, flight.started, observer)).await;
                }
            }
            Outcome::Unknown => observer.unknown(name, flight.started, self.now()),
        }
    }

    fn committed(
        &mut self,
        observer: &mut impl RunObserver,
        name: &'static str,
        started: Duration,
        finished: Duration,
        perceived: Duration,
    ) {
        if let DegreeChoice::Tuned { tuner, .. } = &self.degree {
            tuner.committed();
        }
        observer.committed(name, started, finished, perceived);
    }

    /// An attempt aborted; whether to try the transaction again.
    fn aborted(
        &mut self,
        observer: &mut impl RunObserver,
        name: &'static str,
        reason: AbortReason,
        started: Duration,
    ) -> bool {
        let at = self.now();
        observer.aborted(name, reason, started, at);
        let again = self.retry.again(reason, at);
        if again {
            observer.retrying(name, started, at);
        }
        again
    }
}
