//! One-shot transactions run at the coordinator.
//!
//! A one-shot request ([`ClientOp::Execute`]) carries a whole transaction: a registered procedure
//! and its arguments. Any protocol that serves interactive transactions with deferred updates
//! (reads through the coordinator, writes buffered and shipped with the commit) can serve it
//! by running the procedure at the node that received it: [`AtCoordinator`] wraps such a
//! protocol, rebuilds the procedure from the node's [`ProcedureCatalog`], and runs it as an
//! in-node client of the wrapped protocol. Each read becomes a `Read` request handed to the
//! protocol within the same handler, served locally or by the protocol's own messages to other
//! partitions; the commit is the protocol's own commit. The client pays one round trip instead of
//! one per operation, and the protocol, its messages and its guarantee are exactly those of the
//! interactive form.
//!
//! The in-node client is the requesting client: its requests carry the requester's
//! [`ClientId`], so per-client state a protocol keeps (STR's speculation chain and snapshot floor)
//! is the same in both forms. Its request ids are taken from a range real clients may not use
//! ([`INTERNAL_REQUESTS`]), which is how the wrapper tells the replies meant for a running
//! procedure from those meant for the client's other requests.
//!
//! The reply ([`ClientReply::Executed`]) carries every read, with the value it returned, and
//! every write of the attempt, in program order, so that the client can record the attempt in a
//! history and replay its own copy of the procedure.
//!
//! Execution state is volatile, like the interactive client's: after a crash, a procedure that
//! was running is gone and its client learns nothing (its request times out).

use crate::protocol::{Ctx, Effects, NodeEnv, Protocol};
use augur_client::{
    CommitProgress, CommitStats, Ops, Procedure, ProcedureCatalog, Session, Transport,
    TransportError, TxnError,
};
pub use augur_types::RequestForm;
use augur_types::{
    ClientId, ClientOp, ClientReply, ClientRequest, ClientResponse, ExecutedOp, Execution, Key,
    NodeId, RequestError, RequestId, Value,
};
use futures::future::BoxFuture;
use rustc_hash::FxHashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// The forms of a protocol that serves interactive transactions only.
pub const INTERACTIVE_ONLY: &[RequestForm] = &[RequestForm::Interactive];
/// The forms of a protocol wrapped in [`AtCoordinator`].
pub const INTERACTIVE_AND_ONE_SHOT: &[RequestForm] =
    &[RequestForm::Interactive, RequestForm::OneShot];
/// The forms of a protocol that must know a transaction whole before it runs it (the
/// order-then-execute protocols): one-shot transactions, and interactive ones only when they
/// read nothing (blind writes, which is how benchmarks load data). One-shot comes first: it is
/// the form such a protocol's clients use unless told otherwise.
pub const ONE_SHOT_AND_BLIND_WRITES: &[RequestForm] =
    &[RequestForm::OneShot, RequestForm::Interactive];

/// Request ids with this bit set are the in-node client's; a real client's request carrying one
/// is refused.
pub const INTERNAL_REQUESTS: u64 = 1 << 63;

/// The procedures a node runs one-shot transactions with (see [`NodeEnv::procedures`]).
#[derive(Clone, Default)]
pub struct Procedures(Option<Arc<dyn ProcedureCatalog>>);

impl Procedures {
    /// A node that runs the procedures of `catalog`.
    pub fn new(catalog: Arc<dyn ProcedureCatalog>) -> Procedures {
        Procedures(Some(catalog))
    }

    /// A node with no procedures: every one-shot request is refused.
    pub fn none() -> Procedures {
        Procedures(None)
    }

    /// The procedure `call` names, ready to run, or why there is none. Protocols that run
    /// procedures their own way (`rococo`'s pieces) rebuild them with it.
    pub fn instantiate(
        &self,
        call: &augur_types::ProcedureCall,
    ) -> Result<Box<dyn Procedure>, RequestError> {
        match &self.0 {
            Some(catalog) => catalog.instantiate(call),
            None => Err(RequestError::UnknownProcedure(format!(
                "{}/{} (this node has no procedures registered)",
                call.workload, call.procedure
            ))),
        }
    }

    /// The lock that guards `key` ([`ProcedureCatalog::lock_name`]): `key` itself unless the
    /// catalog names a coarser one.
    pub fn lock_name(&self, key: &augur_types::Key) -> augur_types::Key {
        self.0
            .as_ref()
            .and_then(|catalog| catalog.lock_name(key))
            .filter(|lock| lock.shard() == key.shard())
            .unwrap_or_else(|| key.clone())
    }
}

impl fmt::Debug for Procedures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            Some(_) => "Procedures(registered)",
            None => "Procedures(none)",
        })
    }
}

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
    link: Arc<Mutex<Link>>,
    future: Pin<Box<dyn Future<Output = Execution> + Send>>,
}

/// Between a running procedure and the wrapper: the request it waits on, and its reply.
#[derive(Default)]
struct Link {
    outgoing: Option<ClientOp>,
    incoming: Option<ClientReply>,
}

/// The in-node client's transport: a request is parked in the [`Link`] for the wrapper to hand
/// to the protocol, and resolves when the wrapper puts the protocol's reply there.
struct InNode {
    client: ClientId,
    link: Arc<Mutex<Link>>,
}

impl Transport for InNode {
    fn client_id(&self) -> ClientId {
        self.client
    }

    fn call(&self, op: ClientOp) -> BoxFuture<'_, Result<ClientReply, TransportError>> {
        self.link.lock().expect("link").outgoing = Some(op);
        Box::pin(std::future::poll_fn(move |_| {
            match self.link.lock().expect("link").incoming.take() {
                Some(reply) => Poll::Ready(Ok(reply)),
                None => Poll::Pending,
            }
        }))
    }

    /// Times only date history records, which the in-node client does not keep.
    fn now(&self) -> Duration {
        Duration::ZERO
    }

    fn sleep(&self, _d: Duration) -> BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }
}

/// [`Ops`] over an in-node transaction that notes every operation for the reply.
struct Recording<'t, T: Ops> {
    txn: &'t mut T,
    ops: Vec<ExecutedOp>,
}

impl<T: Ops> Ops for Recording<'_, T> {
    fn read<'a>(&'a mut self, key: &'a Key) -> BoxFuture<'a, Result<Option<Value>, TxnError>> {
        Box::pin(async move {
            let value = self.txn.read(key).await?;
            self.ops.push(ExecutedOp::Read {
                key: key.clone(),
                value: value.clone(),
            });
            Ok(value)
        })
    }

    fn write(&mut self, key: Key, value: Option<Value>) -> Result<(), TxnError> {
        self.txn.write(key.clone(), value.clone())?;
        self.ops.push(ExecutedOp::Write { key, value });
        Ok(())
    }

    fn note(&mut self, name: &str, value: f64) {
        self.txn.note(name, value);
    }
}

/// The reply an interactive client would have received for the error that ended an attempt
/// (also what a protocol that runs procedures itself answers, e.g. `rococo`).
pub fn reply_for(error: TxnError) -> ClientReply {
    match error {
        TxnError::Aborted(reason) => ClientReply::Aborted(reason),
        TxnError::Rejected(e) => ClientReply::Rejected(e),
        TxnError::Protocol(reply) => *reply,
        // The in-node transport never times out or disconnects.
        TxnError::Unavailable(e) => ClientReply::Rejected(RequestError::Invalid(e.to_string())),
    }
}

/// Run one attempt of `procedure` through `session`, as the interactive client would
/// (`augur_client::run_body` and `commit_attempt`), noting its operations. It follows those
/// steps rather than calling them because the reply needs what they do not return: the
/// transaction id and operations of an attempt that failed before its commit, and the reply
/// that ended it.
async fn execute(
    session: Session<InNode>,
    mut procedure: Box<dyn Procedure>,
    speculative_reads: bool,
    speculative_commit: bool,
    stats: CommitStats,
) -> Execution {
    let name = procedure.name();
    let begun = if speculative_reads {
        session.begin_speculative(name, procedure.read_only()).await
    } else {
        session.begin_named(name, procedure.read_only()).await
    };
    let mut txn = match begun {
        Ok(txn) => txn,
        Err(e) => {
            return Execution {
                txn: None,
                ops: Vec::new(),
                info: Default::default(),
                end: reply_for(e),
            };
        }
    };
    let id = txn.id();
    let mut recording = Recording {
        txn: &mut txn,
        ops: Vec::new(),
    };
    let ran = procedure.run(&mut recording).await;
    let ops = recording.ops;
    let info = txn.info().clone();
    let end = match ran {
        Err(e) => {
            if !txn.is_done() {
                txn.abort().await;
            }
            reply_for(e)
        }
        Ok(()) if speculative_commit && procedure.can_spec_commit(&info, &stats) => {
            match txn.commit_speculative().await {
                Ok(CommitProgress::Final(commit_ts)) => ClientReply::Committed { commit_ts },
                Ok(CommitProgress::Speculative(spec)) => ClientReply::SpecCommitted {
                    local_commit_ts: spec.local_commit_ts(),
                },
                Err(e) => reply_for(e),
            }
        }
        Ok(()) => match txn.commit().await {
            Ok(commit_ts) => ClientReply::Committed { commit_ts },
            Err(e) => reply_for(e),
        },
    };
    match end {
        ClientReply::Committed { .. } | ClientReply::SpecCommitted { .. } => {
            stats.record(name, true)
        }
        ClientReply::Aborted(augur_types::AbortReason::UserRollback) => {}
        _ => stats.record(name, false),
    }
    Execution {
        txn: Some(id),
        ops,
        info,
        end,
    }
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
    /// feed each back to its procedure and hand the protocol whatever request that procedure
    /// makes next, until no procedure can move.
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
                running.link.lock().expect("link").incoming = Some(answer.reply);
                self.advance(running, ctx, &mut effects);
            }
        }
    }

    /// Poll `running` once: it finishes (its reply goes to its client) or asks for its next
    /// request, which is handed to the protocol with effects collected into `effects`.
    fn advance(&mut self, mut running: Running, ctx: &mut Ctx<'_, Self>, effects: &mut Effects<P>) {
        let mut poll = Context::from_waker(Waker::noop());
        if let Poll::Ready(execution) = running.future.as_mut().poll(&mut poll) {
            self.executed += 1;
            let response = ClientResponse {
                id: running.request,
                reply: ClientReply::Executed(Box::new(execution)),
            };
            effects.replies.push((running.client, response));
            return;
        }
        let op = running
            .link
            .lock()
            .expect("link")
            .outgoing
            .take()
            .expect("a pending procedure waits on a request");
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

    /// Start running the procedure of an `Execute` request.
    fn start(&mut self, ctx: &mut Ctx<'_, Self>, request: ClientRequest) {
        let ClientOp::Execute {
            call,
            read_only,
            speculative_reads,
            speculative_commit,
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
        let link = Arc::new(Mutex::new(Link::default()));
        let session = Session::new(InNode {
            client: request.client,
            link: link.clone(),
        });
        let future = Box::pin(execute(
            session,
            procedure,
            speculative_reads,
            speculative_commit,
            self.stats.clone(),
        ));
        let running = Running {
            client: request.client,
            request: request.id,
            link,
            future,
        };
        let mut effects = Effects::default();
        self.advance(running, ctx, &mut effects);
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

    fn on_message(&mut self, ctx: &mut Ctx<'_, Self>, from: augur_types::NodeId, msg: P::Msg) {
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

    fn state_digests(&self) -> Vec<(augur_types::PartitionId, u64)> {
        self.inner.state_digests()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ProtocolOptions;
    use crate::sim::{SimConfig, Simulation};
    use augur_client::{HistoryRecorder, Outcome, run_once};
    use augur_types::history::{Op, RecordedOutcome};
    use augur_types::{LatencyProfile, NodeId, Placement, ProcedureCall, Timestamp, TxnId};
    use serde::{Deserialize, Serialize};
    use std::collections::BTreeMap;

    /// A toy deferred-update protocol: node 0 coordinates, node 1 stores. Reads and commits go
    /// to node 1 by message, so a procedure's requests are answered from `on_message`.
    struct Remote {
        id: NodeId,
        store: BTreeMap<Key, Value>,
        next_txn: u64,
        /// Requests waiting on node 1, by the tag sent with them.
        waiting: BTreeMap<u64, (ClientId, RequestId)>,
    }

    #[derive(Clone, Debug, Serialize, Deserialize)]
    enum Msg {
        Read(u64, Key),
        Value(u64, Option<Value>),
        Write(u64, Vec<(Key, Option<Value>)>),
        Written(u64),
    }

    impl crate::inbound::CheckMessage for Msg {
        fn check(&self, _: &crate::inbound::Inbound<'_>) -> Result<(), crate::inbound::BadMessage> {
            Ok(())
        }
    }

    impl Remote {
        fn answer(ctx: &mut Ctx<'_, Self>, to: (ClientId, RequestId), reply: ClientReply) {
            ctx.reply(to.0, ClientResponse { id: to.1, reply });
        }

        fn park(&mut self, request: &ClientRequest) -> u64 {
            let tag = self.waiting.len() as u64 + self.next_txn * 1000;
            self.waiting.insert(tag, (request.client, request.id));
            tag
        }
    }

    impl Protocol for Remote {
        type Msg = Msg;
        type Timer = ();
        type Record = ();

        fn new(env: &NodeEnv) -> Self {
            Remote {
                id: env.id,
                store: BTreeMap::new(),
                next_txn: 0,
                waiting: BTreeMap::new(),
            }
        }

        fn on_client(&mut self, ctx: &mut Ctx<'_, Self>, request: ClientRequest) {
            let to = (request.client, request.id);
            match &request.op {
                ClientOp::Begin { .. } => {
                    self.next_txn += 1;
                    let reply = ClientReply::Begun {
                        txn: TxnId::new(self.id, self.next_txn),
                        snapshot: Timestamp(0),
                    };
                    Self::answer(ctx, to, reply);
                }
                ClientOp::Read { key, .. } => {
                    let tag = self.park(&request);
                    ctx.send(NodeId(1), Msg::Read(tag, key.clone()));
                }
                ClientOp::Commit { writes, .. } => {
                    let tag = self.park(&request);
                    ctx.send(NodeId(1), Msg::Write(tag, writes.clone()));
                }
                _ => Self::answer(ctx, to, ClientReply::Aborted(AbortReason::UserRollback)),
            }
        }

        fn on_message(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, msg: Msg) {
            match msg {
                Msg::Read(tag, key) => {
                    ctx.send(from, Msg::Value(tag, self.store.get(&key).cloned()))
                }
                Msg::Write(tag, writes) => {
                    for (k, v) in writes {
                        match v {
                            Some(v) => self.store.insert(k, v),
                            None => self.store.remove(&k),
                        };
                    }
                    ctx.send(from, Msg::Written(tag));
                }
                Msg::Value(tag, value) => {
                    let to = self.waiting.remove(&tag).expect("parked");
                    Self::answer(ctx, to, ClientReply::Value(value));
                }
                Msg::Written(tag) => {
                    let to = self.waiting.remove(&tag).expect("parked");
                    let reply = ClientReply::Committed {
                        commit_ts: Timestamp(tag),
                    };
                    Self::answer(ctx, to, reply);
                }
            }
        }

        fn on_timer(&mut self, _ctx: &mut Ctx<'_, Self>, _timer: ()) {}
    }

    use augur_types::AbortReason;

    /// `incr`: read a counter, write it plus one; `seen` is what the read returned.
    struct Incr {
        key: Key,
        seen: Option<u64>,
    }

    impl Procedure for Incr {
        fn name(&self) -> &'static str {
            "incr"
        }

        fn read_only(&self) -> bool {
            false
        }

        fn run<'a>(&'a mut self, ops: &'a mut dyn Ops) -> BoxFuture<'a, Result<(), TxnError>> {
            Box::pin(async move {
                let old = ops.read(&self.key).await?;
                let n = old.map_or(0, |v| String::from_utf8_lossy(&v).parse().unwrap());
                self.seen = Some(n);
                ops.write(self.key.clone(), Some(Value::from((n + 1).to_string())))
            })
        }

        fn call(&self) -> Option<ProcedureCall> {
            Some(ProcedureCall::encode("toy", "incr", &self.key))
        }
    }

    struct Toy;

    impl ProcedureCatalog for Toy {
        fn instantiate(&self, call: &ProcedureCall) -> Result<Box<dyn Procedure>, RequestError> {
            match call.procedure.as_str() {
                "incr" => Ok(Box::new(Incr {
                    key: call.decode()?,
                    seen: None,
                })),
                other => Err(RequestError::UnknownProcedure(other.to_string())),
            }
        }
    }

    fn sim<P: Protocol>() -> Simulation<P> {
        let profile = LatencyProfile::named("lan").unwrap();
        let placement = Arc::new(Placement::ring(profile, 2, 1).unwrap());
        let config = SimConfig {
            procedures: Procedures::new(Arc::new(Toy)),
            ..SimConfig::new(1)
        };
        Simulation::new(placement, Arc::new(ProtocolOptions::default()), config)
    }

    fn execute(call: ProcedureCall) -> ClientOp {
        ClientOp::Execute {
            call,
            read_only: false,
            speculative_reads: false,
            speculative_commit: false,
        }
    }

    #[test]
    fn a_procedure_runs_at_the_coordinator_and_its_operations_come_back() {
        let mut s = sim::<AtCoordinator<Remote>>();
        let key = Key::numbered(0, 7);
        let replies = Arc::new(Mutex::new(Vec::new()));
        let (k, r) = (key.clone(), replies.clone());
        s.spawn_client(NodeId(0), move |t| async move {
            let call = ProcedureCall::encode("toy", "incr", &k);
            for _ in 0..2 {
                let reply = t.call(execute(call.clone())).await.unwrap();
                r.lock().unwrap().push(reply);
            }
            let unknown = ProcedureCall::encode("toy", "decr", &k);
            let reply = t.call(execute(unknown)).await.unwrap();
            r.lock().unwrap().push(reply);
        });
        s.run_for(Duration::from_secs(1));
        let replies = replies.lock().unwrap();
        let ClientReply::Executed(second) = &replies[1] else {
            panic!("{:?}", replies[1]);
        };
        assert_eq!(
            second.ops,
            [
                ExecutedOp::Read {
                    key: key.clone(),
                    value: Some(Value::from("1"))
                },
                ExecutedOp::Write {
                    key,
                    value: Some(Value::from("2"))
                },
            ]
        );
        assert!(matches!(second.end, ClientReply::Committed { .. }));
        assert!(second.txn.is_some());
        assert!(matches!(
            &replies[2],
            ClientReply::Rejected(RequestError::UnknownProcedure(p)) if p == "decr"
        ));
    }

    #[test]
    fn a_session_in_the_one_shot_form_records_and_replays_what_the_node_ran() {
        let mut s = sim::<AtCoordinator<Remote>>();
        let recorder = HistoryRecorder::new();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (rec, seen2) = (recorder.clone(), seen.clone());
        s.spawn_client(NodeId(0), move |t| async move {
            let session = Session::recorded(t, rec).with_form(RequestForm::OneShot);
            for _ in 0..3 {
                let mut incr = Incr {
                    key: Key::numbered(0, 1),
                    seen: None,
                };
                let outcome = run_once(&session, &mut incr).await;
                assert!(matches!(outcome, Outcome::Committed { .. }), "{outcome:?}");
                seen2.lock().unwrap().push(incr.seen);
            }
        });
        s.run_for(Duration::from_secs(1));
        // The client's copy saw what the node's run read.
        assert_eq!(*seen.lock().unwrap(), [Some(0), Some(1), Some(2)]);
        let records = recorder.records();
        assert_eq!(records.len(), 3);
        let last = &records[2];
        assert!(matches!(last.outcome, RecordedOutcome::Committed { .. }));
        assert!(matches!(&last.ops[0], Op::Read { value: Some(v), .. } if v == "2"));
        assert!(matches!(&last.ops[1], Op::Write { value: Some(v), .. } if v == "3"));
    }

    #[test]
    fn a_form_the_protocol_does_not_serve_and_reserved_request_ids_are_refused() {
        let replies = Arc::new(Mutex::new(Vec::new()));
        let mut plain = sim::<Remote>();
        let r = replies.clone();
        plain.spawn_client(NodeId(0), move |t| async move {
            let call = ProcedureCall::encode("toy", "incr", &Key::numbered(0, 1));
            let reply = t.call(execute(call)).await.unwrap();
            r.lock().unwrap().push(reply);
        });
        plain.run_for(Duration::from_secs(1));
        assert_eq!(
            replies.lock().unwrap()[0],
            ClientReply::Rejected(RequestError::UnsupportedForm("one-shot".into()))
        );

        // A reserved request id, sent by hand.
        let mut wrapped = AtCoordinator::<Remote>::new(&NodeEnv {
            id: NodeId(0),
            placement: Arc::new(
                Placement::ring(LatencyProfile::named("lan").unwrap(), 2, 1).unwrap(),
            ),
            options: Arc::new(ProtocolOptions::default()),
            procedures: Procedures::none(),
        });
        let mut effects = Effects::default();
        let mut rng = rand::SeedableRng::seed_from_u64(1);
        let mut ctx = Ctx::new(NodeId(0), Timestamp(1), &mut rng, &mut effects);
        let request = ClientRequest {
            client: ClientId(1),
            id: RequestId(INTERNAL_REQUESTS | 5),
            op: ClientOp::Begin {
                read_only: false,
                speculative: false,
            },
        };
        wrapped.on_client(&mut ctx, request);
        assert!(matches!(
            &effects.replies[0].1.reply,
            ClientReply::Rejected(RequestError::Invalid(why)) if why.contains("reserved")
        ));
    }
}
