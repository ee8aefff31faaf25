//! Scenario tests for `gts` (DST, NSDI '21, §2.2, Fig. 2 and Fig. 3; the digest
//! `shared/papers/dst.md` §3–§4), in the deterministic simulator on "3dc" cut to two data
//! centres (VA, OR: about 33.5 ms apart one way) with no replication: keys `A`, `B` and `D`
//! live on node 1, `C` and `K` on node 0, which is the oracle.
//!
//! * **Fig. 3**: three set-up writes take timestamps 1–3; TX1 (node 0: reads D, writes A and C)
//!   fetches 4 and TX2 (node 1: writes B) fetches 5, and TX2 is applied everywhere before TX1;
//!   read-only TX4 (node 0) begins while 4 is pending, reads at stable = 3 and sees neither.
//!   The mutant `read-at-global-ts` reads at 5: A before TX1 applies it there, C after, B
//!   from TX2, a fractured read the checker rejects at serializability.
//! * **Abort after the fetch**: T fetches its timestamp, then fails validation; its abort
//!   releases the timestamp at once, and a read-only transaction that begins shortly after sees
//!   a later commit.
//! * **Oracle restart**: T holds a timestamp, waiting for a validation lost in the oracle
//!   node's crash; the restarted oracle learns from T's coordinator that it holds it, and stable
//!   stays below it (a reader misses a later commit) until T's timeout releases it.
//! * **Coordinator crash between fetch and decision**: the oracle asks the restarted
//!   coordinator about the pending timestamp after `participant_timeout`, which releases it.

use crate::common;

use augur_contract::ProtocolOptions;
use augur_protocols::gts::{GtsNode, INFO};
use augur_types::{IsolationLevel, NodeId, Timestamp};
use common::scripted::Scripted;
use common::scripted::keys::{a, b, c, d, k};
use common::{Txn, assert_replicas, counter, ms, some};

/// A scripted run of `gts`.
type Run = Scripted<GtsNode>;

fn run(mutant: Option<&str>) -> Run {
    let options = ProtocolOptions {
        mutant: mutant.map(str::to_string),
        ..ProtocolOptions::default()
    };
    let s = common::traced_sim::<GtsNode>("3dc", 2, 2, 1, options);
    assert_replicas(&s, &a(), &[1]);
    assert_replicas(&s, &c(), &[0]);
    Scripted::new(s, INFO)
}

/// The oracle's pending timestamps.
fn pending(r: &Run) -> Vec<Timestamp> {
    r.node(0).oracle().expect("node 0").pending()
}

/// Fig. 3. TX1 (node 0, 1 s) reads D on node 1 (back at ~1,067 ms), then commits: its locks
/// are granted at ~1,134 ms and it fetches 4 at once (the oracle is local), validates D on
/// node 1 (~1,201 ms), installs C at node 0 then and A at node 1 at ~1,234 ms. TX2 (node 1,
/// 1,110 ms) writes B: it fetches 5 (~1,144 ms at the oracle) and installs B at ~1,177 ms. TX4
/// (node 0, 1,160 ms) reads A (at node 1 at ~1,194 ms, before TX1's A), then C (at node 0 at
/// ~1,228 ms, after TX1's C), then B.
fn fig3(mutant: Option<&str>) -> Run {
    let mut r = run(mutant);
    r.client(0, 0, Txn::new("S1").write(&a(), "a0"));
    r.client(0, 200, Txn::new("S2").write(&b(), "b0"));
    r.client(0, 400, Txn::new("S3").write(&c(), "c0"));
    r.client(
        0,
        1_000,
        Txn::new("TX1")
            .read(&a())
            .write(&a(), "a1")
            .write(&c(), "c1"),
    );
    r.client(1, 1_110, Txn::new("TX2").write(&b(), "b2"));
    r.client(0, 1_160, Txn::new("TX4").read(&a()).read(&c()).read(&b()));
    r.finish(3_000)
}

#[test]
fn fig3_a_reader_at_the_stable_timestamp_sees_neither_commit_and_global_ts_fractures() {
    let r = fig3(None);
    for t in ["S1", "S2", "S3", "TX1", "TX2", "TX4"] {
        assert!(r.o.committed(t), "{}", r.o.render());
    }
    assert_eq!(r.commit_ts("S3"), Timestamp(3));
    assert_eq!(r.commit_ts("TX1"), Timestamp(4));
    assert_eq!(r.commit_ts("TX2"), Timestamp(5));
    assert_eq!(
        r.commit_ts("TX4"),
        Timestamp(3),
        "4 was pending: stable = 3"
    );
    assert_eq!(r.o.reads("TX4"), vec![some("a0"), some("c0"), some("b0")]);
    assert!(r.valid_at(IsolationLevel::Serializable));
    assert!(pending(&r).is_empty());
    assert_eq!(counter(&r.s, 0, "read_only_aborted"), 0);

    let r = fig3(Some("read-at-global-ts"));
    assert_eq!(r.commit_ts("TX4"), Timestamp(5), "GlobalTS");
    assert_eq!(
        r.o.reads("TX4"),
        vec![some("a0"), some("c1"), some("b2")],
        "A before TX1 applied it, C after: a fractured read"
    );
    assert!(!r.valid_at(IsolationLevel::Serializable));
}

/// T (node 1, 100 ms) reads K on node 0, then writes D at 400 ms: its lock is local, it fetches
/// a timestamp (~434 ms at the oracle), and its validation of K (~500 ms at node 0) fails,
/// because U (node 0, 200 ms) overwrote K. W (node 0, 700 ms) then writes C; R (node 0,
/// 800 ms) reads C.
#[test]
fn an_abort_after_the_fetch_releases_the_timestamp() {
    let mut r = run(None);
    r.client(
        1,
        100,
        Txn::new("T").read(&k()).sleep(ms(230)).write(&d(), "d1"),
    );
    r.client(0, 200, Txn::new("U").write(&k(), "k1"));
    r.client(0, 700, Txn::new("W").write(&c(), "c1"));
    r.client(0, 800, Txn::new("R").read(&c()));
    let r = r.finish(1_500);
    assert!(!r.o.committed("T"), "{}", r.o.render());
    assert_eq!(
        counter(&r.s, 1, "ts_fetches"),
        1,
        "T fetched before validating"
    );
    assert!(r.o.committed("W") && r.o.committed("R"), "{}", r.o.render());
    assert_eq!(
        r.commit_ts("R"),
        r.commit_ts("W"),
        "nothing pending below W"
    );
    assert_eq!(r.o.reads("R"), vec![some("c1")]);
    assert!(pending(&r).is_empty());
    assert!(r.valid_at(IsolationLevel::Serializable));
}

/// T (node 1, 100 ms) reads K on node 0 and writes D: it fetches its timestamp at ~200 ms and
/// sends K's validation to node 0, which crashes at 250 ms (losing it) and restarts at 300 ms.
/// W0 (node 1, 310 ms) writes B: its timestamp is issued before the oracle asks what the nodes
/// hold, and must not be refused as one of the old incarnation's. W (node 0, 500 ms) writes C;
/// R1 (node 0, 600 ms) reads C; T times out ~2.1 s; R2 (node 0, 2,500 ms) reads C.
#[test]
fn a_restarted_oracle_holds_stable_below_a_timestamp_a_running_transaction_holds() {
    let mut r = run(None);
    r.client(0, 0, Txn::new("S").write(&c(), "c0"));
    r.client(1, 100, Txn::new("T").read(&k()).write(&d(), "d1"));
    r.client(1, 310, Txn::new("W0").write(&b(), "b1"));
    r.client(0, 500, Txn::new("W").write(&c(), "c1"));
    r.client(0, 600, Txn::new("R1").read(&c()));
    r.client(0, 2_500, Txn::new("R2").read(&c()));
    r.run(250);
    let held = pending(&r);
    assert_eq!(held.len(), 1, "T's timestamp is pending");
    r.s.crash(NodeId(0));
    r.run(300);
    r.s.restart(NodeId(0));
    r.run(450);
    let oracle = r.s.node(NodeId(0)).oracle().expect("node 0");
    assert!(oracle.recovering().is_none(), "every node answered");
    assert_eq!(pending(&r), held, "node 1 said T holds its timestamp");
    let r = r.finish(4_000);
    assert!(!r.o.committed("T"), "{}", r.o.render());
    for t in ["S", "W0", "W", "R1", "R2"] {
        assert!(r.o.committed(t), "{}", r.o.render());
    }
    assert!(r.commit_ts("W") > r.commit_ts("W0") && r.commit_ts("W0") > held[0]);
    assert!(
        r.commit_ts("R1") < held[0],
        "stable stays below T's timestamp"
    );
    assert_eq!(r.o.reads("R1"), vec![some("c0")]);
    assert_eq!(r.commit_ts("R2"), r.commit_ts("W"), "released by T's abort");
    assert_eq!(r.o.reads("R2"), vec![some("c1")]);
    assert!(pending(&r).is_empty());
    assert!(r.valid_at(IsolationLevel::Serializable));
}

/// T (node 1, 50 ms) writes C on node 0 and D: its locks are held at ~117 ms and its
/// timestamp issued at ~150 ms; node 1 crashes at 165 ms (before the answer arrives) and
/// restarts at 300 ms, having forgotten T. W (node 0, 600 ms) writes B on node 1; R1 (node 0,
/// 1,000 ms) reads B; the oracle asks node 1 about T's timestamp at ~2.15 s, which releases
/// it; R2 (node 0, 2,800 ms) reads B.
#[test]
fn the_oracle_query_releases_a_timestamp_whose_coordinator_crashed_before_deciding() {
    let mut r = run(None);
    r.client(0, 0, Txn::new("S").write(&b(), "b0"));
    r.client(1, 50, Txn::new("T").write(&c(), "c1").write(&d(), "d1"));
    r.client(0, 600, Txn::new("W").write(&b(), "b1"));
    r.client(0, 1_000, Txn::new("R1").read(&b()));
    r.client(0, 2_800, Txn::new("R2").read(&b()));
    r.run(165);
    let held = pending(&r);
    assert_eq!(held.len(), 1, "T's timestamp is pending: {}", r.o.render());
    r.s.crash(NodeId(1));
    r.run(300);
    r.s.restart(NodeId(1));
    r.run(1_500);
    assert_eq!(pending(&r), held, "nobody released it yet");
    // T's client, on node 1, lost its request in the crash and never hears back.
    r.run(4_000);
    assert!(!r.o.finished("T"));
    for t in ["S", "W", "R1", "R2"] {
        assert!(r.o.committed(t), "{}", r.o.render());
    }
    assert!(r.commit_ts("R1") < held[0]);
    assert_eq!(r.o.reads("R1"), vec![some("b0")]);
    assert_eq!(r.commit_ts("R2"), r.commit_ts("W"));
    assert_eq!(r.o.reads("R2"), vec![some("b1")]);
    assert!(pending(&r).is_empty());
    assert!(r.valid_at(IsolationLevel::Serializable));
}
