//! Handler tests for the lock-and-2PC engine (`common::lock_commit`, here under its `occ` and
//! `2pl` flavors): each test builds one node outside any simulation, hands it exactly one input
//! (a client request or a peer message, after the inputs that put the node in the state the test
//! needs) and asserts the exact effects of that input: the messages sent and their content, the
//! replies, the timers set and the records persisted, and nothing else.
//!
//! This is the model for the other engines' handler tests. A scenario test says what a protocol
//! achieves across a cluster; a handler test pins down what one step of one node does, so a
//! change to a handler shows up here as the effect that changed, not as an outcome three
//! messages later. The pieces are the runtime's own: [`Protocol::new`] with a [`NodeEnv`],
//! [`Ctx::new`] over an [`Effects`] to collect into, and [`deliver_client`] for client requests
//! (as every runtime delivers them). Messages and records have no `PartialEq`, so the tests
//! destructure them and compare every field.
//!
//! The cluster is three nodes on the `lan` profile with two replicas per partition: partition
//! `p` is mastered by node `p` and copied to node `p + 1 (mod 3)`. The tests use key `y`, in
//! partition 1 (master node 1, slave node 2), so node 0 coordinates without being a replica.

use augur_contract::forms::Procedures;
use augur_contract::{Ctx, Effects, NodeEnv, Protocol, ProtocolOptions, Work, deliver_client};
use augur_protocols::common::lock_commit::{Msg, Mutant, Record, Timer};
use augur_protocols::common::vclock::Deps;
use augur_protocols::occ::{self, OccNode};
use augur_protocols::protocol_info::Engine;
use augur_protocols::registry::PROTOCOLS;
use augur_protocols::replica;
use augur_protocols::two_pl::TwoPlNode;
use augur_types::{
    AbortReason, ClientId, ClientOp, ClientReply, ClientRequest, Key, LatencyProfile, NodeId,
    Placement, RequestId, Timestamp, TxnId, Value,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

// ---------------------------------------------------------------------------------------------
// One node, one input.

/// `y` lives in partition 1: master node 1, slave node 2.
fn y() -> Key {
    Key::numbered(1, 2)
}

/// Node `id` of the three-node cluster, with empty state and default options but fail-over
/// off: one node's handlers are driven alone here, with no configuration group to grant it a
/// lease (`failover.rs` tests fail-over).
fn node<P: Protocol>(id: u32) -> P {
    let lan = LatencyProfile::named("lan").expect("lan profile");
    P::new(&NodeEnv {
        id: NodeId(id),
        placement: Arc::new(Placement::ring(lan, 3, 2).expect("valid layout")),
        options: Arc::new(ProtocolOptions {
            settings: [("failover".to_string(), "off".to_string())].into(),
            ..ProtocolOptions::default()
        }),
        procedures: Procedures::none(),
    })
}

/// A node and its clock: each input is handed over at the node's current time, as a runtime
/// would, and returns the effects it asked for.
struct Node<P: Protocol> {
    id: NodeId,
    state: P,
    now: Timestamp,
    rng: ChaCha8Rng,
}

impl<P: Protocol> Node<P> {
    fn new(id: u32, now: u64) -> Node<P> {
        Node {
            id: NodeId(id),
            state: node(id),
            now: Timestamp(now),
            rng: ChaCha8Rng::seed_from_u64(1),
        }
    }

    /// Run one handler at the node's time and return what it asked for.
    fn input(&mut self, handler: impl FnOnce(&mut P, &mut Ctx<'_, P>)) -> Effects<P> {
        let mut effects = Effects::default();
        let mut ctx = Ctx::new(self.id, self.now, &mut self.rng, &mut effects);
        handler(&mut self.state, &mut ctx);
        effects
    }

    fn client(&mut self, client: u64, request: u64, op: ClientOp) -> Effects<P> {
        let request = ClientRequest {
            client: ClientId(client),
            id: RequestId(request),
            op,
        };
        self.input(|p, ctx| deliver_client(p, ctx, request))
    }

    fn message(&mut self, from: u32, msg: P::Msg) -> Effects<P> {
        self.input(|p, ctx| p.on_message(ctx, NodeId(from), msg))
    }
}

const CLIENT: u64 = 7;

fn begin() -> ClientOp {
    ClientOp::Begin {
        read_only: false,
        speculative: false,
        trying_for_us: 0,
    }
}

fn value(text: &str) -> Option<Value> {
    Some(Value::from(text.to_string()))
}

/// The only reply among `effects`, to `CLIENT`'s request `request`.
fn only_reply<P: Protocol>(effects: &Effects<P>, request: u64) -> &ClientReply {
    let [(client, response)] = &effects.replies[..] else {
        panic!("one reply expected, got {}", effects.replies.len());
    };
    assert_eq!(*client, ClientId(CLIENT));
    assert_eq!(response.id, RequestId(request));
    &response.reply
}

/// The only message among `effects`, with its destination.
fn only_send<P: Protocol>(effects: &Effects<P>) -> (NodeId, &P::Msg) {
    let [(to, msg)] = &effects.sends[..] else {
        panic!("one message expected, got {:?}", effects.sends);
    };
    (*to, msg)
}

/// The first transaction node 0 hands out.
fn first_txn_of_node_0() -> TxnId {
    TxnId::new(NodeId(0), 1)
}

// ---------------------------------------------------------------------------------------------
// The coordinator's side.

#[test]
fn begin_reserves_a_block_of_ids_and_answers_begun_at_the_begin_time() {
    let mut n = Node::<OccNode>::new(0, 1_000);
    let effects = n.client(CLIENT, 1, begin());

    let txn = first_txn_of_node_0();
    assert_eq!(
        *only_reply(&effects, 1),
        ClientReply::Begun {
            txn,
            snapshot: Timestamp(1_000)
        }
    );
    // The first id of a block is reserved in the log before it is handed out.
    let [Record::Kit(replica::Record::IdsReserved { below })] = &effects.persist[..] else {
        panic!("one IdsReserved record expected, got {:?}", effects.persist);
    };
    assert_eq!(*below, 1 + (1 << 16));
    assert!(effects.sends.is_empty(), "{:?}", effects.sends);
    assert!(effects.timers.is_empty(), "{:?}", effects.timers);
    assert!(effects.offloads.is_empty());

    // The next begin takes the next id of the block, logging nothing.
    n.now = Timestamp(1_100);
    let effects = n.client(CLIENT, 2, begin());
    assert_eq!(
        *only_reply(&effects, 2),
        ClientReply::Begun {
            txn: TxnId::new(NodeId(0), 2),
            snapshot: Timestamp(1_100)
        }
    );
    assert!(effects.persist.is_empty(), "{:?}", effects.persist);
}

#[test]
fn occ_read_of_a_remote_key_goes_to_its_master_under_a_timeout() {
    let mut n = Node::<OccNode>::new(0, 1_000);
    n.client(CLIENT, 1, begin());
    let txn = first_txn_of_node_0();

    n.now = Timestamp(1_050);
    let effects = n.client(CLIENT, 2, ClientOp::Read { txn, key: y() });

    // y's master is node 1: the read goes there, numbered 1, with the transaction's age (its
    // begin time), and no snapshot (occ reads the newest version).
    let (to, msg) = only_send(&effects);
    assert_eq!(to, NodeId(1));
    let Msg::Read {
        txn: read_txn,
        seq,
        key,
        prio,
        snapshot,
    } = msg
    else {
        panic!("a Read expected, got {msg:?}");
    };
    assert_eq!((*read_txn, *seq, key), (txn, 1, &y()));
    assert_eq!((*prio, *snapshot), (Timestamp(1_000), None));
    // The coordinator gives up on the read after the participant timeout.
    let [(after, Timer::Read(timer_txn, timer_seq))] = &effects.timers[..] else {
        panic!("one Read timer expected, got {:?}", effects.timers);
    };
    assert_eq!(*after, ProtocolOptions::default().participant_timeout);
    assert_eq!((*timer_txn, *timer_seq), (txn, 1));
    // The client waits for the value.
    assert!(effects.replies.is_empty());
    assert!(effects.persist.is_empty(), "{:?}", effects.persist);
}

#[test]
fn occ_commit_of_a_remote_write_prepares_every_replica_of_the_key() {
    let mut n = Node::<OccNode>::new(0, 1_000);
    n.client(CLIENT, 1, begin());
    let txn = first_txn_of_node_0();

    n.now = Timestamp(1_200);
    let writes = vec![(y(), value("y1"))];
    let op = ClientOp::Commit {
        txn,
        writes: writes.clone(),
        speculative: false,
    };
    let effects = n.client(CLIENT, 2, op);

    // Every replica of y (nodes 1 and 2) gets a prepare with the write and no reads (occ
    // validates reads in a later round, at their masters).
    let sends: Vec<NodeId> = effects.sends.iter().map(|(to, _)| *to).collect();
    assert_eq!(sends, [NodeId(1), NodeId(2)]);
    for (to, msg) in &effects.sends {
        let Msg::Prepare {
            txn: prepared,
            prio,
            reads,
            writes: sent,
            ..
        } = msg
        else {
            panic!("a Prepare to {to:?} expected, got {msg:?}");
        };
        assert_eq!((*prepared, *prio), (txn, Timestamp(1_000)));
        assert!(reads.is_empty(), "{reads:?}");
        assert_eq!(*sent, writes);
    }
    // The votes are awaited for the participant timeout; nothing is logged and nobody is
    // answered until they are in.
    let [(after, Timer::Votes(voting))] = &effects.timers[..] else {
        panic!("one Votes timer expected, got {:?}", effects.timers);
    };
    assert_eq!(
        (*after, *voting),
        (ProtocolOptions::default().participant_timeout, txn)
    );
    assert!(effects.replies.is_empty());
    assert!(effects.persist.is_empty(), "{:?}", effects.persist);
}

// ---------------------------------------------------------------------------------------------
// The participant's side.

#[test]
fn a_master_answers_a_read_with_its_newest_version() {
    let mut n = Node::<OccNode>::new(1, 5_000);
    let txn = first_txn_of_node_0();
    let read = Msg::Read {
        txn,
        seq: 3,
        key: y(),
        prio: Timestamp(1_000),
        snapshot: None,
    };
    let effects = n.message(0, read);

    // Nothing was ever written to y: no value, no version, timestamp zero, no tag.
    let (to, msg) = only_send(&effects);
    assert_eq!(to, NodeId(0));
    let Msg::ReadReply {
        txn: replied,
        seq,
        value,
        version,
        ts,
        tag,
    } = msg
    else {
        panic!("a ReadReply expected, got {msg:?}");
    };
    assert_eq!((*replied, *seq), (txn, 3));
    assert_eq!(
        (value, version, *ts, *tag),
        (&None, &None, Timestamp::ZERO, 0)
    );
    assert_eq!(effects.work, Work::reads(1));
    assert!(effects.timers.is_empty() && effects.persist.is_empty());
}

/// A prepare from node 0's first transaction writing `y = y1`.
fn prepare_y(txn: TxnId, prio: u64) -> occ::Msg {
    Msg::Prepare {
        txn,
        prio: Timestamp(prio),
        reads: Vec::new(),
        writes: vec![(y(), value("y1"))],
        epochs: Vec::new(),
    }
}

#[test]
fn occ_prepare_locks_logs_its_promise_and_votes_yes() {
    let mut n = Node::<OccNode>::new(1, 5_000);
    let txn = first_txn_of_node_0();
    let effects = n.message(0, prepare_y(txn, 1_000));

    // The promise is logged (it leaves with the vote only once durable)...
    let [
        Record::Prepared {
            txn: logged,
            reads,
            writes,
        },
    ] = &effects.persist[..]
    else {
        panic!("one Prepared record expected, got {:?}", effects.persist);
    };
    assert_eq!(*logged, txn);
    assert!(reads.is_empty());
    assert_eq!(*writes, vec![(y(), value("y1"))]);
    // ...and the vote proposes the node's clock reading, above every version applied here.
    let (to, msg) = only_send(&effects);
    assert_eq!(to, NodeId(0));
    let Msg::Vote {
        txn: voted,
        vote,
        deps,
        lease_end,
    } = msg
    else {
        panic!("a Vote expected, got {msg:?}");
    };
    assert_eq!((*voted, vote), (txn, &Ok(Timestamp(5_000))));
    assert_eq!(*deps, Deps::new());
    // No shared lock here, and no fail-over: no lease to tell.
    assert_eq!(*lease_end, Timestamp::ZERO);
    assert!(effects.timers.is_empty() && effects.replies.is_empty());
}

#[test]
fn occ_prepare_of_a_key_locked_by_another_votes_no_at_once() {
    let mut n = Node::<OccNode>::new(1, 5_000);
    n.message(0, prepare_y(first_txn_of_node_0(), 1_000));

    // A second writer of y, from node 2: under no-wait a held lock is a conflict, reported as
    // `lock_timeout`, with nothing logged and no timer (it never waits).
    let other = TxnId::new(NodeId(2), 1);
    n.now = Timestamp(5_010);
    let effects = n.message(2, prepare_y(other, 900));
    let (to, msg) = only_send(&effects);
    assert_eq!(to, NodeId(2));
    let Msg::Vote { txn, vote, .. } = msg else {
        panic!("a Vote expected, got {msg:?}");
    };
    assert_eq!((*txn, vote), (other, &Err(AbortReason::LockTimeout)));
    assert!(effects.persist.is_empty(), "{:?}", effects.persist);
    assert!(effects.timers.is_empty(), "{:?}", effects.timers);
}

#[test]
fn a_commit_decision_is_logged_installed_and_acknowledged() {
    let mut n = Node::<OccNode>::new(1, 5_000);
    let txn = first_txn_of_node_0();
    n.message(0, prepare_y(txn, 1_000));

    n.now = Timestamp(5_100);
    let decide = Msg::Decide {
        txn,
        commit: Some(Timestamp(5_050)),
        tag: 0,
    };
    let effects = n.message(0, decide);

    let [
        Record::Kit(replica::Record::Committed {
            txn: logged,
            commit_ts,
        }),
    ] = &effects.persist[..]
    else {
        panic!("one Committed record expected, got {:?}", effects.persist);
    };
    assert_eq!((*logged, *commit_ts), (txn, Timestamp(5_050)));
    let (to, msg) = only_send(&effects);
    assert_eq!(to, NodeId(0));
    assert!(
        matches!(msg, Msg::Applied { txn: t } if *t == txn),
        "{msg:?}"
    );
    assert_eq!(effects.work, Work::writes(1));
    assert!(effects.timers.is_empty() && effects.replies.is_empty());
    // The write is the newest version of y here.
    assert_eq!(n.state.latest(&y()), Some((txn, value("y1"))));
}

#[test]
fn two_pl_read_takes_a_shared_lock_that_a_younger_writer_dies_on() {
    let mut n = Node::<TwoPlNode>::new(1, 5_000);
    let reader = first_txn_of_node_0();
    let read = Msg::Read {
        txn: reader,
        seq: 1,
        key: y(),
        prio: Timestamp(1_000),
        snapshot: None,
    };
    // The master grants the shared lock at once and answers.
    let effects = n.message(0, read);
    let (to, msg) = only_send(&effects);
    assert_eq!(to, NodeId(0));
    assert!(
        matches!(msg, Msg::ReadReply { txn, seq: 1, .. } if *txn == reader),
        "{msg:?}"
    );
    assert!(effects.timers.is_empty() && effects.persist.is_empty());

    // A younger writer's prepare (prio 2,000 > 1,000) would wait for the older reader: under
    // wait-die it dies at once, with nothing logged and no timer.
    let writer = TxnId::new(NodeId(2), 1);
    let effects = n.message(2, prepare_y(writer, 2_000));
    let (to, msg) = only_send(&effects);
    assert_eq!(to, NodeId(2));
    let Msg::Vote { txn, vote, .. } = msg else {
        panic!("a Vote expected, got {msg:?}");
    };
    assert_eq!((*txn, vote), (writer, &Err(AbortReason::WaitDie)));
    assert!(effects.persist.is_empty(), "{:?}", effects.persist);
    assert!(effects.timers.is_empty(), "{:?}", effects.timers);
}

// ---------------------------------------------------------------------------------------------
// The flavors' registry entries.

/// Every mutant a flavor of the engine lists is one the engine knows, and a flavor is offered
/// only its own. The flavors are the registry's protocols on this engine, so a new one is
/// checked without being named here (the engine itself names no protocol).
#[test]
fn every_listed_mutant_is_known() {
    let flavors: Vec<_> = PROTOCOLS
        .iter()
        .filter(|info| info.engine == Engine::LockCommit)
        .collect();
    let built = [
        "2pc-baseline",
        "occ",
        "2pl",
        "rc",
        "dst-occ",
        "dst-2pl",
        "gts",
        "vts",
    ];
    for name in built {
        assert!(flavors.iter().any(|info| info.name == name), "{name}");
    }
    for info in flavors {
        for (name, _) in info.mutants {
            assert_eq!(Mutant::offered(info, name), Mutant::named(name), "{name}");
            assert!(Mutant::named(name).is_some(), "{}: {name}", info.name);
        }
    }
    assert_eq!(Mutant::offered(&occ::INFO, "early-read-unlock"), None);
}
