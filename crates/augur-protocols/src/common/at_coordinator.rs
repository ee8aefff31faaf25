//! One-shot transactions run at the coordinator, for every protocol with deferred updates.
//!
//! A one-shot request ([`ClientOp::Execute`]) carries a whole transaction: a registered procedure
//! and its arguments. Any protocol that serves interactive transactions with deferred updates
//! (reads through the coordinator, writes buffered and shipped with the commit) can serve it
//! by running the procedure at the node that received it: [`AtCoordinator`] wraps such a
//! protocol, rebuilds the procedure from the node's catalogue ([`Procedures`]), and runs its
//! body with the contract's [`Driver`], turning each step into the request an interactive
//! client would have sent, handed to the protocol within the same handler: `Begin`, a `Read`
//! for each key the body reads (served locally or by the protocol's own messages to other
//! partitions; a key the body wrote reads its own write, as in the client), then the commit
//! with the writes in first-write order, or an `Abort` when the body failed while the
//! transaction was still open. The client pays one round trip instead of one per operation,
//! and the protocol, its messages and its guarantee are exactly those of the interactive form.
//!
//! The requests carry the requester's [`ClientId`], so per-client state a protocol keeps
//! (STR's speculation chain and snapshot floor) is the same in both forms. Their ids are taken
//! from a range real clients may not use ([`INTERNAL_REQUESTS`]), which is how the wrapper
//! tells the replies meant for a running procedure from those meant for the client's other
//! requests.
//!
//! The reply ([`ClientReply::Executed`]) carries every read, with the value it returned, and
//! every write of the attempt, in program order, so that the client can record the attempt in a
//! history and replay its own copy of the procedure.
//!
//! Execution state is volatile, like the interactive client's: after a crash, a procedure that
//! was running is gone and its client learns nothing (its request times out).

use augur_contract::driver::{Driver, Progress, Run};
use augur_contract::forms::{INTERACTIVE_AND_ONE_SHOT, INTERNAL_REQUESTS, Procedures, RequestForm};
use augur_contract::{CommitStats, Ctx, Effects, NodeEnv, Protocol, TxnError, reply_for};
use augur_types::{
    AbortReason, ClientId, ClientOp, ClientReply, ClientRequest, ClientResponse, Execution, NodeId,
    PartitionId, RequestError, RequestId, TxnId,
};
use rustc_hash::FxHashMap;

/// A protocol that serves interactive transactions with deferred updates, also serving the
/// one-shot form by running each procedure at the node that received it (see the module docs).
pub struct AtCoordinator<P: Protocol> {
    inner: P,
    procedures: Procedures,
    /// Running procedures, by the id of the request each waits on.
    waiting: FxHashMap<RequestId, Running>,
    /// The next in-node request id (below [`INTERNAL_REQUESTS`], which is or-ed in).
    next_request: u64,
    /// Per-type commit statistics for `Procedure::can_spec_commit`, as a client process keeps.
    stats: CommitStats,
    executed: u64,
}

/// One procedure running at this node.
struct Running {
    /// The requesting client and its `Execute` request.
    client: ClientId,
    request: RequestId,
    /// The procedure's type, for the commit statistics.
    name: &'static str,
    read_only: bool,
    speculative_commit: bool,
    driver: Driver<'static>,
    stage: Stage,
}

/// The request a running procedure waits on the answer to.
enum Stage {
    Begin,
    /// A read of the body, in open transaction `txn`. `ended` once a read was answered
    /// `Aborted`: the protocol has ended the transaction, so a failed body sends no `Abort`.
    Read {
        txn: TxnId,
        ended: bool,
    },
    /// The commit of a body that ran to its end.
    Commit {
        txn: TxnId,
        run: Run,
    },
    /// The `Abort` of a body that failed; the procedure's answer is `end`.
    Abort {
        txn: TxnId,
        run: Run,
        end: ClientReply,
    },
}

impl<P: Protocol> AtCoordinator<P> {
    fn wrap(inner: P, env: &NodeEnv) -> Self {
        assert!(
            P::FORMS.contains(&RequestForm::Interactive),
            "only a protocol that serves interactive transactions runs procedures at its coordinator"
        );
        AtCoordinator {
            inner,
            procedures: env.procedures.clone(),
            waiting: FxHashMap::default(),
            next_request: 0,
            stats: CommitStats::new(),
            executed: 0,
        }
    }

    /// Run `handler` on the wrapped protocol, then [`settle`](Self::settle) its effects.
    fn with_inner(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        handler: impl FnOnce(&mut P, &mut Ctx<'_, P>),
    ) {
        let mut effects = Effects::<P>::default();
        handler(&mut self.inner, &mut ctx.for_inner(&mut effects));
        self.settle(ctx, effects);
    }

    /// Pass the wrapped protocol's `effects` on, except the replies it gave running procedures:
    /// feed each to its procedure and hand the protocol whatever request that procedure makes
    /// next, until no procedure can move.
    fn settle(&mut self, ctx: &mut Ctx<'_, Self>, mut effects: Effects<P>) {
        loop {
            // With no procedure running (always, in the interactive form) there is nothing to
            // sort out.
            if self.waiting.is_empty() {
                return ctx.absorb(effects);
            }
            let (answers, others): (Vec<_>, Vec<_>) = std::mem::take(&mut effects.replies)
                .into_iter()
                .partition(|(client, response)| {
                    self.waiting
                        .get(&response.id)
                        .is_some_and(|r| r.client == *client)
                });
            effects.replies = others;
            ctx.absorb(effects);
            if answers.is_empty() {
                return;
            }
            effects = Effects::default();
            for (_, answer) in answers {
                let running = self.waiting.remove(&answer.id).expect("waiting");
                self.answered(running, answer.reply, ctx, &mut effects);
            }
        }
    }

    /// Hand `op`, the next request of `running`, to the protocol, its effects collected into
    /// `effects`.
    fn send(
        &mut self,
        running: Running,
        op: ClientOp,
        ctx: &mut Ctx<'_, Self>,
        effects: &mut Effects<P>,
    ) {
        // The procedure's own work, for the simulator's CPU model: the wrapped protocol
        // charges what serving the request costs it.
        effects.work.steps = effects.work.steps.saturating_add(1);
        let id = RequestId(INTERNAL_REQUESTS | self.next_request);
        self.next_request += 1;
        let request = ClientRequest {
            client: running.client,
            id,
            op,
        };
        self.waiting.insert(id, running);
        self.inner.on_client(&mut ctx.for_inner(effects), request);
    }

    /// The protocol answered the request `running` waited on.
    fn answered(
        &mut self,
        mut running: Running,
        reply: ClientReply,
        ctx: &mut Ctx<'_, Self>,
        effects: &mut Effects<P>,
    ) {
        match std::mem::replace(&mut running.stage, Stage::Begin) {
            Stage::Begin => match reply {
                ClientReply::Begun { txn, .. } => {
                    if running.read_only {
                        let refused = RequestError::WriteInReadOnly(txn);
                        running.driver.refuse_writes(TxnError::Rejected(refused));
                    }
                    running.stage = Stage::Read { txn, ended: false };
                    self.run_body(running, ctx, effects);
                }
                // Refused before it began: no transaction, nothing ran.
                end => self.finish(running, None, None, end, effects),
            },
            Stage::Read { txn, ended } => {
                let (answer, ended) = match reply {
                    ClientReply::Value(value) => (Ok(value), ended),
                    ClientReply::Aborted(reason) => (Err(TxnError::Aborted(reason)), true),
                    ClientReply::Rejected(e) => (Err(TxnError::Rejected(e)), ended),
                    other => (Err(TxnError::Protocol(Box::new(other))), ended),
                };
                running.driver.answer(answer);
                running.stage = Stage::Read { txn, ended };
                self.run_body(running, ctx, effects);
            }
            // The commit's answer is the procedure's, whatever it is.
            Stage::Commit { txn, run } => self.ended(running, txn, run, reply, effects),
            // The abort's answer does not matter: the procedure had already failed.
            Stage::Abort { txn, run, end } => self.ended(running, txn, run, end, effects),
        }
    }

    /// Resume the body of `running` (its transaction open): send its next read, or, once it
    /// has ended, its commit or abort.
    fn run_body(
        &mut self,
        mut running: Running,
        ctx: &mut Ctx<'_, Self>,
        effects: &mut Effects<P>,
    ) {
        let Stage::Read { txn, ended } = running.stage else {
            unreachable!("a body runs in an open transaction")
        };
        match running.driver.resume() {
            Progress::Needs(key) => self.send(running, ClientOp::Read { txn, key }, ctx, effects),
            Progress::Ended(run) => match &run.end {
                Ok(()) => {
                    let procedure = running.driver.take_procedure().expect("the driver owns it");
                    let speculative = running.speculative_commit
                        && procedure.can_spec_commit(&run.info, &self.stats);
                    let op = ClientOp::Commit {
                        txn,
                        writes: run.writes_in_order(),
                        speculative,
                    };
                    running.stage = Stage::Commit { txn, run };
                    self.send(running, op, ctx, effects);
                }
                Err(e) => {
                    let end = reply_for(e.clone());
                    if ended {
                        return self.ended(running, txn, run, end, effects);
                    }
                    running.stage = Stage::Abort { txn, run, end };
                    self.send(running, ClientOp::Abort { txn }, ctx, effects);
                }
            },
        }
    }

    /// The attempt of `running` as transaction `txn` ended with `end`: note it in the commit
    /// statistics and answer the client.
    fn ended(
        &mut self,
        running: Running,
        txn: TxnId,
        run: Run,
        end: ClientReply,
        effects: &mut Effects<P>,
    ) {
        match end {
            ClientReply::Committed { .. } | ClientReply::SpecCommitted { .. } => {
                self.stats.record(running.name, true)
            }
            ClientReply::Aborted(AbortReason::UserRollback) => {}
            _ => self.stats.record(running.name, false),
        }
        self.finish(running, Some(txn), Some(run), end, effects);
    }

    /// Answer the `Execute` request of `running`.
    fn finish(
        &mut self,
        running: Running,
        txn: Option<TxnId>,
        run: Option<Run>,
        end: ClientReply,
        effects: &mut Effects<P>,
    ) {
        self.executed += 1;
        let (ops, info) = run.map(|r| (r.ops, r.info)).unwrap_or_default();
        let execution = Execution {
            txn,
            ops,
            info,
            end,
        };
        let response = ClientResponse {
            id: running.request,
            reply: ClientReply::Executed(Box::new(execution)),
        };
        effects.replies.push((running.client, response));
    }

    /// Start running the procedure of an `Execute` request.
    fn start(&mut self, ctx: &mut Ctx<'_, Self>, request: ClientRequest) {
        let ClientOp::Execute {
            call,
            read_only,
            speculative_reads,
            speculative_commit,
            trying_for_us,
        } = request.op
        else {
            unreachable!("start is called for Execute requests")
        };
        let refuse = |ctx: &mut Ctx<'_, Self>, error: RequestError| {
            let response = ClientResponse {
                id: request.id,
                reply: ClientReply::Rejected(error),
            };
            ctx.reply(request.client, response);
        };
        let procedure = match self.procedures.instantiate(&call) {
            Ok(p) => p,
            Err(e) => return refuse(ctx, e),
        };
        if procedure.read_only() != read_only {
            let why = format!(
                "procedure {}/{} is {}read-only",
                call.workload,
                call.procedure,
                if read_only { "not " } else { "" }
            );
            return refuse(ctx, RequestError::Invalid(why));
        }
        let running = Running {
            client: request.client,
            request: request.id,
            name: procedure.name(),
            read_only,
            speculative_commit,
            driver: Driver::start(procedure),
            stage: Stage::Begin,
        };
        let begin = ClientOp::Begin {
            read_only,
            speculative: speculative_reads,
            trying_for_us,
        };
        let mut effects = Effects::default();
        self.send(running, begin, ctx, &mut effects);
        self.settle(ctx, effects);
    }
}

impl<P: Protocol> Protocol for AtCoordinator<P> {
    type Msg = P::Msg;
    type Timer = P::Timer;
    type Record = P::Record;
    const FORMS: &'static [RequestForm] = INTERACTIVE_AND_ONE_SHOT;

    fn new(env: &NodeEnv) -> Self {
        Self::wrap(P::new(env), env)
    }

    fn recover(env: &NodeEnv, records: &mut dyn Iterator<Item = Self::Record>) -> Self {
        Self::wrap(P::recover(env, records), env)
    }

    fn checkpoint(&self, emit: &mut dyn FnMut(Self::Record)) {
        self.inner.checkpoint(emit);
    }

    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        self.with_inner(ctx, |p, c| p.on_start(c));
    }

    fn on_client(&mut self, ctx: &mut Ctx<'_, Self>, request: ClientRequest) {
        if request.id.0 & INTERNAL_REQUESTS != 0 {
            let response = ClientResponse {
                id: request.id,
                reply: ClientReply::Rejected(RequestError::Invalid(format!(
                    "request id {} is in the range reserved for the node (at least 2^63)",
                    request.id.0
                ))),
            };
            return ctx.reply(request.client, response);
        }
        match request.op {
            ClientOp::Execute { .. } => self.start(ctx, request),
            _ => self.with_inner(ctx, |p, c| p.on_client(c, request)),
        }
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, msg: P::Msg) {
        self.with_inner(ctx, |p, c| p.on_message(c, from, msg));
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, Self>, timer: P::Timer) {
        self.with_inner(ctx, |p, c| p.on_timer(c, timer));
    }

    fn on_client_gone(&mut self, ctx: &mut Ctx<'_, Self>, client: ClientId) {
        self.with_inner(ctx, |p, c| p.on_client_gone(c, client));
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut counters = self.inner.counters();
        counters.push(("one_shot_executed", self.executed));
        counters
    }

    fn leftovers(&self) -> Vec<(&'static str, u64)> {
        self.inner.leftovers()
    }

    fn leader(&self) -> Option<NodeId> {
        self.inner.leader()
    }

    fn master_of(&self, partition: PartitionId) -> Option<NodeId> {
        self.inner.master_of(partition)
    }

    fn state_digests(&self) -> Vec<(PartitionId, u64)> {
        self.inner.state_digests()
    }
}
