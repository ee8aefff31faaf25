//! The attempt loop of one client, shared by `augur bench` and `augur check`: run a
//! transaction's attempts in the session's request form, keep its speculative commits in a
//! chain until their final outcomes are known, retry what the [`RetryPolicy`] allows, and tell
//! a [`RunObserver`] what happened, so that callers keep statistics or react without running
//! attempts themselves.

use crate::attempt::{Attempt, Speculation, commit_attempt, resolve, run_body};
use crate::one_shot::execute_one_shot;
use crate::session::{Session, SpeculativeCommit};
use crate::transport::Transport;
use crate::tuner::{Degree, SpeculationTuner};
use augur_contract::Outcome;
use augur_contract::{CommitStats, Procedure};
use augur_types::{AbortReason, ClientId, RequestForm};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
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
    /// How long to wait before retrying an attempt aborted for a retryable reason.
    pub backoff: Backoff,
}

impl RetryPolicy {
    /// Every transaction gets one attempt.
    pub const NEVER: RetryPolicy = RetryPolicy {
        retryable: false,
        misspeculated: false,
        until: None,
        backoff: Backoff::NONE,
    };

    /// Whether an attempt aborted for `reason` at `at` runs again.
    fn again(&self, reason: AbortReason, at: Duration) -> bool {
        let allowed = (self.retryable && reason.is_retryable())
            || (self.misspeculated && reason == AbortReason::Misspeculation);
        allowed && self.until.is_none_or(|until| at < until)
    }
}

/// Randomized exponential backoff between an aborted attempt and the transaction's next one,
/// with full jitter: after the `n`th consecutive abort of one transaction the client waits a
/// time drawn uniformly from `[0, min(cap, base × 2^(n-1))]`. A transaction starts again from
/// `base`, so a commit resets it.
///
/// Without it, clients whose transactions conflict retry in lockstep: two no-wait optimistic
/// clients on the same keys each abort the other's retry, in the simulator forever (its
/// deterministic delays never break the tie). The jitter is what breaks it; the doubling
/// spreads the retries of a crowd out until one of them gets through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// The bound of the first wait; zero retries at once (no backoff at all).
    pub base: Duration,
    /// The largest bound a wait is drawn under, however many aborts in a row.
    pub cap: Duration,
    /// The run's seed. Each client draws its waits from a generator seeded by it and the
    /// client's id, so a simulated run repeats exactly and no two clients draw alike.
    pub seed: u64,
}

impl Backoff {
    /// Retry at once.
    pub const NONE: Backoff = Backoff {
        base: Duration::ZERO,
        cap: Duration::ZERO,
        seed: 0,
    };

    /// The bound of the wait after `aborts` consecutive aborts of one transaction (at least
    /// one): `base` doubled `aborts - 1` times, at most `cap`.
    pub fn bound(&self, aborts: u32) -> Duration {
        let doublings = aborts.saturating_sub(1);
        let factor = 1u32.checked_shl(doublings).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }
}

/// The waits of one client's [`Backoff`]: its own generator, drawn from only when a wait is due,
/// so that a run without retries draws nothing.
struct Delays {
    backoff: Backoff,
    rng: ChaCha8Rng,
}

impl Delays {
    /// Keeps the waits' generator apart from the run's others seeded by the same seed.
    const SALT: u64 = 0x6261_636b_6f66_6621;

    fn new(backoff: Backoff, client: ClientId) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(backoff.seed ^ Self::SALT);
        rng.set_stream(client.0);
        Delays { backoff, rng }
    }

    /// The wait after the `aborts`th consecutive abort of a transaction, uniform in
    /// `[0, bound(aborts)]`.
    fn after(&mut self, aborts: u32) -> Duration {
        let bound = self.backoff.bound(aborts);
        if bound.is_zero() {
            return Duration::ZERO;
        }
        let bound_ns = u64::try_from(bound.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(self.rng.random_range(0..=bound_ns))
    }
}

/// Whether a retry after an abort for `reason` waits out the [`Backoff`] first.
///
/// Every retryable abort is a sign of contention or of trouble at the nodes (a conflict, a
/// lock not granted, a participant that did not answer, a transaction depending on one that
/// aborted), which retrying at once only makes worse. A misspeculated transaction is re-run at
/// once: it committed locally and learned its final outcome at least one final-commit round
/// later, so the transactions it conflicted with have had that long to finish already, and its
/// client's chain of speculative commits (STR §4) stalls behind the re-run for as long as it
/// waits. Should the re-run abort in turn, that abort backs off like any other.
fn backs_off(reason: AbortReason) -> bool {
    reason != AbortReason::Misspeculation
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
    /// The waits before retries.
    delays: Delays,
}

impl<'s, T: Transport> Runner<'s, T> {
    pub fn new(
        session: &'s Session<T>,
        degree: DegreeChoice,
        room: ChainRoom,
        retry: RetryPolicy,
        commit_stats: CommitStats,
    ) -> Self {
        let delays = Delays::new(retry.backoff, session.transport().client_id());
        Runner {
            session,
            degree,
            room,
            retry,
            commit_stats,
            chain: VecDeque::new(),
            delays,
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
    /// only seconds later). A retry waits out the retry policy's [`Backoff`] first.
    pub async fn run(
        &mut self,
        mut procedure: Box<dyn Procedure>,
        started: Duration,
        observer: &mut impl RunObserver,
    ) {
        let stats = self.commit_stats.clone();
        // Consecutive aborts of this transaction: its backoff starts afresh, whatever the
        // previous transaction went through.
        let mut aborts = 0;
        loop {
            // Every attempt says how long the transaction has been trying (its wait-die age);
            // set afresh each time, since resolving the chain can run another's retries.
            let _trying = self.session.trying_since(started);
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
                    if backs_off(reason) {
                        aborts += 1;
                        self.back_off(aborts).await;
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

    /// Wait before the retry that follows the `aborts`th consecutive abort of a transaction,
    /// never past the retry policy's deadline.
    async fn back_off(&mut self, aborts: u32) {
        let mut wait = self.delays.after(aborts);
        if let Some(until) = self.retry.until {
            wait = wait.min(until.saturating_sub(self.now()));
        }
        if !wait.is_zero() {
            self.session.transport().sleep(wait).await;
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

#[cfg(test)]
mod tests {
    use super::*;
    use augur_contract::Ops;
    use augur_contract::TransportError;
    use augur_contract::TxnError;
    use augur_types::{ClientOp, ClientReply, Timestamp, TxnId};
    use futures::future::BoxFuture;
    use std::sync::{Arc, Mutex};

    const MS: Duration = Duration::from_millis(1);

    fn backoff(base_ms: u32, cap_ms: u32, seed: u64) -> Backoff {
        Backoff {
            base: base_ms * MS,
            cap: cap_ms * MS,
            seed,
        }
    }

    /// The waits after 1, 2, … `n` consecutive aborts.
    fn waits(delays: &mut Delays, n: u32) -> Vec<Duration> {
        (1..=n).map(|aborts| delays.after(aborts)).collect()
    }

    #[test]
    fn the_bound_doubles_from_the_base_up_to_the_cap() {
        let b = backoff(1, 20, 0);
        let bounds: Vec<u64> = (1..=8).map(|n| b.bound(n).as_millis() as u64).collect();
        assert_eq!(bounds, [1, 2, 4, 8, 16, 20, 20, 20]);
        // However many aborts, no overflow.
        assert_eq!(b.bound(u32::MAX), 20 * MS);
        assert_eq!(Backoff::NONE.bound(5), Duration::ZERO);
    }

    #[test]
    fn waits_are_drawn_within_their_bounds_and_repeat_with_the_seed() {
        let b = backoff(1, 20, 7);
        let mut one = Delays::new(b, ClientId(3));
        let drawn = waits(&mut one, 200);
        for (n, wait) in (1..).zip(&drawn) {
            assert!(*wait <= b.bound(n), "wait {n}: {wait:?} > {:?}", b.bound(n));
        }
        // Full jitter: the capped waits spread over [0, cap], not bunched at its top.
        let capped = &drawn[10..];
        assert!(capped.iter().any(|w| *w < 5 * MS), "{capped:?}");
        assert!(capped.iter().any(|w| *w > 15 * MS), "{capped:?}");
        assert_eq!(drawn, waits(&mut Delays::new(b, ClientId(3)), 200));
        // Another client, or another run's seed, draws other waits.
        assert_ne!(drawn, waits(&mut Delays::new(b, ClientId(4)), 200));
        assert_ne!(
            drawn,
            waits(&mut Delays::new(backoff(1, 20, 8), ClientId(3)), 200)
        );
    }

    #[test]
    fn no_backoff_waits_nothing_and_draws_nothing() {
        let mut none = Delays::new(Backoff::NONE, ClientId(1));
        assert!(waits(&mut none, 10).iter().all(|w| w.is_zero()));
        let untouched = Delays::new(Backoff::NONE, ClientId(1));
        assert_eq!(none.rng.get_word_pos(), untouched.rng.get_word_pos());
    }

    /// A coordinator that answers every begin and each commit (or final-outcome request) with
    /// the next of its scripted replies, on a clock that moves only by the client's sleeps.
    #[derive(Clone)]
    struct Scripted {
        id: ClientId,
        state: Arc<Mutex<Script>>,
    }

    #[derive(Default)]
    struct Script {
        replies: VecDeque<ClientReply>,
        now: Duration,
        sleeps: Vec<Duration>,
        begun: u64,
    }

    impl Scripted {
        fn new(id: u64, replies: impl IntoIterator<Item = ClientReply>) -> Self {
            let script = Script {
                replies: replies.into_iter().collect(),
                ..Script::default()
            };
            Scripted {
                id: ClientId(id),
                state: Arc::new(Mutex::new(script)),
            }
        }

        fn sleeps(&self) -> Vec<Duration> {
            self.state.lock().unwrap().sleeps.clone()
        }
    }

    impl Transport for Scripted {
        fn client_id(&self) -> ClientId {
            self.id
        }

        fn call(&self, op: ClientOp) -> BoxFuture<'_, Result<ClientReply, TransportError>> {
            let mut state = self.state.lock().unwrap();
            let reply = match op {
                ClientOp::Begin { .. } => {
                    state.begun += 1;
                    ClientReply::Begun {
                        txn: TxnId(state.begun),
                        snapshot: Timestamp(0),
                    }
                }
                ClientOp::Commit { .. } | ClientOp::AwaitOutcome { .. } => {
                    state.replies.pop_front().expect("a scripted reply")
                }
                other => panic!("unexpected {other:?}"),
            };
            Box::pin(async move { Ok(reply) })
        }

        fn now(&self) -> Duration {
            self.state.lock().unwrap().now
        }

        fn sleep(&self, d: Duration) -> BoxFuture<'_, ()> {
            let mut state = self.state.lock().unwrap();
            state.now += d;
            state.sleeps.push(d);
            Box::pin(async {})
        }
    }

    /// A transaction with nothing in it.
    struct Empty;

    impl Procedure for Empty {
        fn name(&self) -> &'static str {
            "empty"
        }

        fn read_only(&self) -> bool {
            false
        }

        fn run<'a>(&'a mut self, _ops: &'a mut dyn Ops) -> BoxFuture<'a, Result<(), TxnError>> {
            Box::pin(async { Ok(()) })
        }
    }

    #[derive(Default)]
    struct Count {
        committed: usize,
        aborted: usize,
    }

    impl RunObserver for Count {
        fn committed(&mut self, _: &'static str, _: Duration, _: Duration, _: Duration) {
            self.committed += 1;
        }

        fn aborted(&mut self, _: &'static str, _: AbortReason, _: Duration, _: Duration) {
            self.aborted += 1;
        }
    }

    fn conflict() -> ClientReply {
        ClientReply::Aborted(AbortReason::WriteWriteConflict)
    }

    fn committed() -> ClientReply {
        ClientReply::Committed {
            commit_ts: Timestamp(1),
        }
    }

    fn retry_all(backoff: Backoff, until: Option<Duration>) -> RetryPolicy {
        RetryPolicy {
            retryable: true,
            misspeculated: true,
            until,
            backoff,
        }
    }

    /// Run `transactions` empty transactions, one after another, through a runner over
    /// `transport` with `retry` and speculation `degree`; what the observer counted.
    fn run(transport: &Scripted, retry: RetryPolicy, degree: Degree, transactions: usize) -> Count {
        let session = Session::new(transport.clone());
        let mut runner = Runner::new(
            &session,
            DegreeChoice::Fixed(degree),
            ChainRoom::AfterSpecCommit,
            retry,
            CommitStats::new(),
        );
        let mut count = Count::default();
        futures::executor::block_on(async {
            for _ in 0..transactions {
                runner
                    .run(Box::new(Empty), Duration::ZERO, &mut count)
                    .await;
            }
            runner.resolve_all(&mut count).await;
        });
        count
    }

    #[test]
    fn the_runner_backs_off_between_retries_and_starts_afresh_after_a_commit() {
        let b = backoff(1, 4, 11);
        // Five aborts and a commit, then one abort and a commit.
        let script = || {
            let mut replies = vec![conflict(); 5];
            replies.extend([committed(), conflict(), committed()]);
            Scripted::new(2, replies)
        };
        let transport = script();
        let count = run(&transport, retry_all(b, None), Degree::NONE, 2);
        assert_eq!((count.committed, count.aborted), (2, 6));
        let sleeps = transport.sleeps();
        assert_eq!(sleeps.len(), 6, "{sleeps:?}");
        for (wait, bound) in sleeps.iter().zip([1u32, 2, 4, 4, 4, 1]) {
            assert!(*wait <= bound * MS, "{sleeps:?}");
        }
        // Exactly the client's draws after 1 to 5 aborts, then after 1 again: the second
        // transaction's backoff started afresh.
        let mut delays = Delays::new(b, ClientId(2));
        let mut expected = waits(&mut delays, 5);
        expected.push(delays.after(1));
        assert_eq!(sleeps, expected);
        // The same client in the same run waits the same.
        let again = script();
        run(&again, retry_all(b, None), Degree::NONE, 2);
        assert_eq!(sleeps, again.sleeps());

        // Without backoff, retries go at once, as they used to.
        let at_once = script();
        let count = run(&at_once, retry_all(Backoff::NONE, None), Degree::NONE, 2);
        assert_eq!((count.committed, count.aborted), (2, 6));
        assert!(at_once.sleeps().is_empty());
    }

    #[test]
    fn no_wait_runs_past_the_retry_deadline() {
        let transport = Scripted::new(1, [conflict(), conflict(), committed()]);
        let until = Duration::from_micros(10);
        let count = run(
            &transport,
            retry_all(backoff(1000, 1000, 3), Some(until)),
            Degree::NONE,
            1,
        );
        // The first wait ends at the deadline at the latest, and no retry starts after it.
        assert_eq!((count.committed, count.aborted), (0, 2));
        assert!(transport.sleeps().iter().sum::<Duration>() <= until);
    }

    #[test]
    fn a_misspeculated_transaction_runs_again_at_once() {
        let spec = ClientReply::SpecCommitted {
            local_commit_ts: Timestamp(1),
        };
        // Speculatively committed, aborted after all, run again and committed.
        let transport = Scripted::new(1, [spec, conflict(), committed()]);
        let degree = Degree {
            reads: false,
            chain: 1,
        };
        let count = run(&transport, retry_all(backoff(1, 4, 5), None), degree, 1);
        assert_eq!((count.committed, count.aborted), (1, 1));
        assert!(transport.sleeps().is_empty(), "{:?}", transport.sleeps());
    }
}
