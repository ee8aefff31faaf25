//! Fuzzing what a node takes off the wire: arbitrary bytes, and valid frames with bytes
//! overwritten, go through the frame decoder and then the checks a node runs before a handler
//! sees a message (`augur_contract::inbound`). Neither may panic, whatever the input; the
//! simulator's forgery runs (`crates/augur/tests/forgery.rs`) take what passes on to the
//! handlers themselves.

use augur_contract::inbound::{CheckMessage, Inbound, check_request};
use augur_protocols::common::dispatch::Body as RequestBody;
use augur_protocols::common::vclock::{Deps, VClock};
use augur_protocols::common::{ordered, replicated};
use augur_protocols::dst_occ::DstMsg;
use augur_protocols::gts::GtsMsg;
use augur_protocols::vts::VtsMsg;
use augur_protocols::{
    clocksi_rep, dst_2pl, dst_occ, gts, nocc, occ, rc, rococo, str as str_protocol, two_pl,
    twopc_baseline, vts, walter,
};
use augur_runtime::tcp::{Body, ClusterIdentity, decode_frame, encode_frame};
use augur_types::{
    ClientId, ClientOp, ClientRequest, Key, LatencyProfile, NodeId, PartitionId, Placement,
    RequestId, Timestamp, TxnId,
};
use bytes::Bytes;
use proptest::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// How many frames [`corpus`] holds.
const CORPUS_LEN: usize = 37;

fn placement() -> Placement {
    Placement::ring(LatencyProfile::named("lan").unwrap(), 3, 2).unwrap()
}

/// Decode `frame` as a frame of protocol messages `M`, and check what decodes at every pair of
/// nodes and as a client request.
fn take_off_the_wire<M: DeserializeOwned + CheckMessage>(frame: &[u8], placement: &Placement) {
    match decode_frame::<M>(frame) {
        Ok(Body::Peer { msg, .. }) => {
            for me in placement.nodes() {
                for from in placement.nodes() {
                    let _ = msg.check(&Inbound {
                        me,
                        from,
                        placement,
                    });
                }
            }
        }
        Ok(Body::Request(request)) => {
            let _ = check_request(&request.op);
        }
        Ok(_) | Err(_) => {}
    }
}

fn frame<M: Serialize>(msg: M) -> Vec<u8> {
    encode_frame(&Body::Peer {
        from: NodeId(0),
        msg,
    })
    .unwrap()
    .to_vec()
}

/// Valid frames of every kind of message, to be altered.
fn corpus() -> Vec<Vec<u8>> {
    let txn = TxnId::new(NodeId(1), 7);
    let key = Key::numbered(2, 42);
    let writes = vec![(key.clone(), Some(Bytes::from_static(b"v")))];
    let ts = Timestamp(1_000);
    let read = augur_protocols::replica::ReadRequest {
        txn,
        seq: 0,
        key: key.clone(),
        snapshot: ts,
        speculative: false,
    };
    vec![
        frame(clocksi_rep::Msg::Read(read.clone())),
        frame(clocksi_rep::Msg::Prepare {
            txn,
            snapshot: ts,
            partitions: vec![(PartitionId(2), 0, writes.clone())],
        }),
        frame(clocksi_rep::Msg::ReplicatePrepare {
            txn,
            snapshot: ts,
            partition: PartitionId(2),
            epoch: 0,
            writes: writes.clone(),
        }),
        frame(clocksi_rep::Msg::Prepared {
            txn,
            partition: PartitionId(2),
            epoch: 0,
            ts,
        }),
        frame(clocksi_rep::Msg::CatchUpState {
            partition: PartitionId(2),
            epoch: 0,
            watermark: ts,
            versions: vec![(key.clone(), vec![(txn, ts, None)])],
        }),
        frame(clocksi_rep::Msg::CatchUpAsk {
            partition: PartitionId(2),
        }),
        frame(clocksi_rep::Msg::Commit { txn, decision: ts }),
        frame(str_protocol::Msg::Read(read)),
        frame(nocc::Msg::Apply {
            txn,
            ts,
            writes: writes.clone(),
        }),
        frame(twopc_baseline::Msg::Prepare {
            txn,
            prio: ts,
            reads: vec![(key.clone(), Some(txn))],
            writes: writes.clone(),
            epochs: vec![(PartitionId(0), 1)],
        }),
        // occ's validation round (the lock-and-2PC engine's message shared by `2pc-baseline`,
        // `occ` and `2pl`).
        frame(occ::Msg::Validate {
            txn,
            reads: vec![(key.clone(), None)],
            ts,
            epochs: vec![(PartitionId(0), 1)],
        }),
        // DST's read-only read (a snapshot to claim at) and read horizon, on the same engine.
        frame(dst_occ::Msg::Read {
            txn,
            seq: 2,
            key: key.clone(),
            prio: ts,
            snapshot: Some(ts),
        }),
        frame(dst_2pl::Msg::Scheme(DstMsg::Horizon { ts })),
        // GTS's oracle traffic: a restarted oracle's question and a node's list of the
        // timestamps its transactions hold (an altered length must be refused, not trusted).
        frame(gts::Msg::Scheme(GtsMsg::AskHeld { bound: ts })),
        frame(gts::Msg::Scheme(GtsMsg::Held {
            bound: ts,
            held: vec![(txn, ts), (TxnId::new(NodeId(1), 8), Timestamp(1_001))],
        })),
        // VTS's vectors and deps: a read at a vector, a vote with the tags it overwrites, an
        // install, the oracle's vector and a horizon (an altered length, or a dep naming a
        // node outside the cluster, must be refused, not indexed).
        frame(vts::Msg::Scheme(VtsMsg::ReadAt {
            txn,
            seq: 2,
            key: key.clone(),
            at: VClock::from(vec![4, 1, 2]),
        })),
        frame(vts::Msg::Vote {
            txn,
            vote: Ok(ts),
            deps: deps(),
            lease_end: ts,
        }),
        frame(vts::Msg::Scheme(VtsMsg::Install { t: 9, deps: deps() })),
        frame(vts::Msg::Scheme(VtsMsg::StableVector {
            txn: Some(txn),
            at: VClock::from(vec![3, 1, 2]),
        })),
        frame(vts::Msg::Scheme(VtsMsg::HorizonVector {
            at: VClock::from(vec![3, 0, 2]),
        })),
        // The oracle telling a worker the vector its tags are stable in, and a node telling a
        // new oracle the vector it heard of (fail-over).
        frame(vts::Msg::Scheme(VtsMsg::Stabilized {
            at: VClock::from(vec![2, 1, 2]),
        })),
        frame(vts::Msg::Scheme(VtsMsg::Heard {
            at: VClock::from(vec![2, 1, 1]),
        })),
        // Vector timestamps: an altered length byte must be refused, not compared.
        frame(walter::Msg::Propagate {
            txn,
            seq: 3,
            start: VClock::from(vec![1, 0, 2]),
            writes: writes.clone(),
        }),
        // A piece with reads, writes and a commit with dependencies.
        frame(rococo::Msg::Start {
            txn,
            age: Timestamp(5_000),
            reads: vec![(key.clone(), Some(txn))],
            writes: writes.clone(),
        }),
        frame(rococo::Msg::Commit {
            txn,
            deps: vec![txn, TxnId::new(NodeId(2), 9)],
        }),
        frame(walter::Msg::Status {
            applied: VClock::from(vec![4, 1, 2]),
            low: VClock::from(vec![3, 1, 2]),
        }),
        // The order-then-execute executors (`calvin`, `s-smr`, `sparkle` share one message
        // type): a sibling's value and the ask for it, a horizon, and a node left behind
        // catching up (a copy naming a partition outside the cluster, or a key outside the
        // partition, must be refused, not indexed).
        frame(ordered::Msg::Value {
            at: ts,
            key: key.clone(),
            value: Some(Bytes::from_static(b"v")),
        }),
        frame(ordered::Msg::NeedValue {
            at: ts,
            key: key.clone(),
        }),
        frame(ordered::Msg::Horizon {
            through: Timestamp(2_000),
            collected: ts,
        }),
        frame(ordered::Msg::CopyAsk {
            partition: PartitionId(2),
            at: ts,
        }),
        frame(ordered::Msg::CopyOf {
            partition: PartitionId(2),
            through: ts,
            versions: vec![(key.clone(), txn, Timestamp(900), None)],
        }),
        frame(ordered::Msg::ValueGone {
            at: ts,
            key: key.clone(),
            floor: Timestamp(900),
        }),
        frame(ordered::Msg::CopyRefused {
            partition: PartitionId(2),
            floor: ts,
        }),
        // The replicated executors (`oab-spec`, `sm-rep`): an optimistic copy of a request.
        frame(replicated::Msg::Optimistic(replicated::Request {
            txn,
            body: RequestBody::Writes(writes.clone()),
        })),
        encode_frame(&Body::<()>::Request(ClientRequest {
            client: ClientId(3),
            id: RequestId(9),
            op: ClientOp::Commit {
                txn,
                writes,
                speculative: false,
            },
        }))
        .unwrap()
        .to_vec(),
        encode_frame(&Body::<()>::Hello {
            from: NodeId(2),
            cluster: ClusterIdentity {
                cluster_id: "augur-1".into(),
                settings: vec![("replication".into(), "3".into())],
            },
        })
        .unwrap()
        .to_vec(),
        encode_frame(&Body::<()>::ClientHello {
            cluster_id: "augur-1".into(),
            fingerprint: "0123456789abcdef".into(),
            token: Some("secret".into()),
        })
        .unwrap()
        .to_vec(),
    ]
}

/// Deps on two nodes.
fn deps() -> Deps {
    let mut deps = Deps::new();
    deps.add(NodeId(0), 3);
    deps.add(NodeId(2), 7);
    deps
}

fn decode_everywhere(frame: &[u8], placement: &Placement) {
    take_off_the_wire::<clocksi_rep::Msg>(frame, placement);
    take_off_the_wire::<str_protocol::Msg>(frame, placement);
    take_off_the_wire::<nocc::Msg>(frame, placement);
    take_off_the_wire::<twopc_baseline::Msg>(frame, placement);
    // `occ` and `2pl` run the same engine as `2pc-baseline`, with the same message type; named
    // here so that a protocol given its own messages later cannot be left out.
    take_off_the_wire::<occ::Msg>(frame, placement);
    take_off_the_wire::<two_pl::Msg>(frame, placement);
    take_off_the_wire::<rc::Msg>(frame, placement);
    take_off_the_wire::<dst_occ::Msg>(frame, placement);
    take_off_the_wire::<dst_2pl::Msg>(frame, placement);
    take_off_the_wire::<gts::Msg>(frame, placement);
    take_off_the_wire::<vts::Msg>(frame, placement);
    take_off_the_wire::<walter::Msg>(frame, placement);
    take_off_the_wire::<rococo::Msg>(frame, placement);
    take_off_the_wire::<ordered::Msg>(frame, placement);
    take_off_the_wire::<replicated::Msg>(frame, placement);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        decode_everywhere(&bytes, &placement());
    }

    #[test]
    fn altered_frames_never_panic(
        which in 0usize..CORPUS_LEN,
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let mut frame = corpus().swap_remove(which);
        for (at, byte) in edits {
            let i = at.index(frame.len());
            frame[i] = byte;
        }
        decode_everywhere(&frame, &placement());
    }
}

#[test]
fn the_corpus_decodes_and_passes_where_it_is_sent() {
    let placement = placement();
    assert_eq!(corpus().len(), CORPUS_LEN);
    // Partition 2's replicas; the transaction is coordinated by n1.
    let replicas = placement.replicas(PartitionId(2)).to_vec();
    let frames = corpus();
    let Ok(Body::Peer { msg, .. }) = decode_frame::<clocksi_rep::Msg>(&frames[1]) else {
        panic!("the prepare frame decodes");
    };
    let at = Inbound {
        me: replicas[0],
        from: NodeId(1),
        placement: &placement,
    };
    assert_eq!(msg.check(&at), Ok(()));
    // The same prepare sent to a node that does not replicate the partition is refused (whether
    // a replica is the master is the configuration's, which the handler checks by epoch).
    let elsewhere = placement.nodes().find(|n| !replicas.contains(n)).unwrap();
    let at = Inbound {
        me: elsewhere,
        ..at
    };
    assert!(msg.check(&at).is_err());
}

#[test]
fn vts_vectors_of_another_length_and_deps_on_unknown_nodes_are_refused() {
    let placement = placement();
    let master = placement.replicas(PartitionId(2))[0];
    let at = Inbound {
        me: master,
        from: NodeId(1),
        placement: &placement,
    };
    let read = |v: Vec<u64>| {
        vts::Msg::Scheme(VtsMsg::ReadAt {
            txn: TxnId::new(NodeId(1), 7),
            seq: 1,
            key: Key::numbered(2, 42),
            at: VClock::from(v),
        })
    };
    assert_eq!(read(vec![1, 2, 3]).check(&at), Ok(()));
    assert!(read(vec![1, 2]).check(&at).is_err());
    assert!(read(vec![1, 2, 3, 4]).check(&at).is_err());
    let horizon = |v: Vec<u64>| {
        vts::Msg::Scheme(VtsMsg::HorizonVector {
            at: VClock::from(v),
        })
    };
    assert_eq!(horizon(vec![0, 0, 0]).check(&at), Ok(()));
    assert!(horizon(vec![]).check(&at).is_err());
    let stable = vts::Msg::Scheme(VtsMsg::StableVector {
        txn: None,
        at: VClock::from(vec![5]),
    });
    assert!(stable.check(&at).is_err());
    let told = vts::Msg::Scheme(VtsMsg::Stabilized {
        at: VClock::from(vec![1, 1]),
    });
    assert!(told.check(&at).is_err());
    let heard = vts::Msg::Scheme(VtsMsg::Heard {
        at: VClock::from(vec![1, 1, 1, 1]),
    });
    assert!(heard.check(&at).is_err());
    let install = vts::Msg::Scheme(VtsMsg::Install { t: 1, deps: deps() });
    assert_eq!(install.check(&at), Ok(()));
    let mut unknown = Deps::new();
    unknown.add(NodeId(9), 1);
    let install = vts::Msg::Scheme(VtsMsg::Install {
        t: 1,
        deps: unknown.clone(),
    });
    assert!(install.check(&at).is_err());
    let vote = vts::Msg::Vote {
        txn: TxnId::new(NodeId(master.0), 3),
        vote: Ok(Timestamp(1)),
        deps: unknown,
        lease_end: Timestamp::ZERO,
    };
    assert!(vote.check(&at).is_err());
}
