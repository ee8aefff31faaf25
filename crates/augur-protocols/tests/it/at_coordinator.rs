//! The one-shot form at the coordinator (`common::at_coordinator`), over a toy deferred-update
//! protocol whose reads and commits travel by message.

use augur_client::{HistoryRecorder, Outcome, Session, Transport, run_once};
use augur_contract::forms::{INTERNAL_REQUESTS, Procedures, RequestForm};
use augur_contract::{
    BoxFuture, Ctx, Effects, NodeEnv, Ops, Procedure, ProcedureCatalog, Protocol, ProtocolOptions,
    TxnError,
};
use augur_protocols::common::at_coordinator::AtCoordinator;
use augur_runtime::sim::{SimConfig, Simulation};
use augur_types::history::{Op, RecordedOutcome};
use augur_types::{
    ClientId, ClientOp, ClientReply, ClientRequest, ClientResponse, ExecutedOp, Key, RequestError,
    RequestId, Value,
};
use augur_types::{LatencyProfile, NodeId, Placement, ProcedureCall, Timestamp, TxnId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

impl augur_contract::inbound::CheckMessage for Msg {
    fn check(
        &self,
        _: &augur_contract::inbound::Inbound<'_>,
    ) -> Result<(), augur_contract::inbound::BadMessage> {
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
            Msg::Read(tag, key) => ctx.send(from, Msg::Value(tag, self.store.get(&key).cloned())),
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
        trying_for_us: 0,
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
        placement: Arc::new(Placement::ring(LatencyProfile::named("lan").unwrap(), 2, 1).unwrap()),
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
            trying_for_us: 0,
        },
    };
    wrapped.on_client(&mut ctx, request);
    assert!(matches!(
        &effects.replies[0].1.reply,
        ClientReply::Rejected(RequestError::Invalid(why)) if why.contains("reserved")
    ));
}
