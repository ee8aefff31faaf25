//! Scenario tests for `vts` (DST, NSDI '21, §2.2, Fig. 4 and Fig. 5; the digest
//! `shared/papers/dst.md` §3, §4 and trap T-8), in the deterministic simulator on "3dc" cut to
//! two data centres (VA, OR: about 33.5 ms apart one way) with no replication: keys `A`, `B`
//! and `D` live on node 1, `C`, `K` and `E` on node 0, which is the oracle (Fig. 5 uses three
//! data centres and nodes).
//!
//! * **T-8** (Fig. 4 records only ww and wr deps): A (node 1) reads C and writes D; B (node 0)
//!   overwrites C after A validated it, so A →rw B, which no dep records. B is installed at the
//!   oracle at once, A one round trip later; a reader in between sees B's C and not A's D: a
//!   G2 cycle through the reader with two adjacent anti-dependencies. Not serializable;
//!   snapshot isolation allows it.
//! * **A reader of an unstable version**: A (node 1) writes K on node 0; T (node 0) reads A's
//!   K before A is stable, reads C, and writes E; W (node 0) then overwrites C (T →rw W) and is
//!   stable at once; a reader sees W's C and not A's K. The cycle reader →rw A →wr T →rw W
//!   →wr reader has two anti-dependencies that are not adjacent (G-nonadjacent), which
//!   snapshot isolation forbids too: faithful Fig. 4 is not SI, and `vts` claims read
//!   committed (see [`augur_protocols::vts`]).
//! * **Fig. 5**: workers' counters (3, 2, 5) and StableVTS = (3, 2, 5); a version ⟨i:t⟩ is
//!   readable iff t ≤ StableVTS[i]; TX2 reads C, written by ⟨1:4⟩ (worker 1 = node 0) and not
//!   yet stable, so its own entry waits at the oracle for that dep.
//! * **Oracle restart**: the oracle crashes before a tag's `Install` arrives; the restarted
//!   oracle keeps its logged vector and asks the nodes to install again.
//! * **Coordinator crash after its commit, before its `Install`**: the restarted coordinator
//!   sends its decision again, hears the replica's acknowledgement and installs.

use crate::common;

use augur_contract::ProtocolOptions;
use augur_protocols::vts::{INFO, VtsNode};
use augur_types::{IsolationLevel, Key, NodeId};
use common::scripted::Scripted;
use common::scripted::keys::{a, c, d, e, k};
use common::{Txn, assert_replicas, counter, some};

/// A scripted run of `vts`.
type Run = Scripted<VtsNode>;

fn run() -> Run {
    let s = common::traced_sim::<VtsNode>("3dc", 2, 2, 1, ProtocolOptions::default());
    assert_replicas(&s, &a(), &[1]);
    assert_replicas(&s, &d(), &[1]);
    assert_replicas(&s, &c(), &[0]);
    assert_replicas(&s, &k(), &[0]);
    assert_replicas(&s, &e(), &[0]);
    Scripted::new(s, INFO)
}

/// The oracle's stable vector.
fn stable(r: &Run) -> Vec<u64> {
    let oracle = r.node(0).vector_oracle().expect("node 0 is the oracle");
    oracle.stable().entries().to_vec()
}

/// T-8. A (node 1, 1 s) reads C on node 0 (back at ~1,067 ms) and D (local), and overwrites D:
/// its lock on D is local, its validation of C reaches node 0 at ~1,100 ms and comes back at
/// ~1,134 ms, when it commits and applies D at node 1; its `Install` reaches the oracle at
/// ~1,167 ms. B (node 0, 1,110 ms) reads and overwrites C: local lock, validation, commit and
/// `Install`, stable at once. R (node 0, 1,120 ms) fetches the vector (B in, A out), reads C
/// (B's) and D (at node 1 at ~1,153 ms, after A applied it, but A's tag is not in R's vector).
/// Writers read what they overwrite, so the checker knows the version orders.
#[test]
fn t8_an_anti_dependency_the_oracle_cannot_see_makes_a_g2_through_a_reader() {
    let mut r = run();
    r.client(0, 0, Txn::new("S1").write(&c(), "c0"));
    r.client(0, 200, Txn::new("S2").write(&d(), "d0"));
    r.client(
        1,
        1_000,
        Txn::new("A").read(&c()).read(&d()).write(&d(), "d1"),
    );
    r.client(0, 1_110, Txn::new("B").read(&c()).write(&c(), "c1"));
    r.client(0, 1_120, Txn::new("R").read(&c()).read(&d()));
    let r = r.finish(3_000);
    for t in ["S1", "S2", "A", "B", "R"] {
        assert!(r.o.committed(t), "{}", r.o.render());
    }
    assert_eq!(r.o.reads("A"), vec![some("c0"), some("d0")]);
    assert_eq!(
        r.o.reads("R"),
        vec![some("c1"), some("d0")],
        "B's C is stable, A's D is applied but not stable: {}",
        r.o.render()
    );
    assert!(
        !r.valid_at(IsolationLevel::Serializable),
        "R →rw A →rw B →wr R"
    );
    assert!(r.valid_at(IsolationLevel::SnapshotIsolation));
    // Everything settles: both tags stable, nothing owed, nothing queued.
    assert_eq!(stable(&r), vec![3, 1]);
    assert_eq!(r.node(1).tags_owed(), 0);
    assert_eq!(counter(&r.s, 0, "read_only_aborted"), 0);
}

/// A reader of an unstable version. A (node 1, 1 s) reads K on node 0 (back at ~1,067 ms) and
/// overwrites it: locked at ~1,100 ms, voted back at ~1,134, applied at node 0 at ~1,167; its
/// `Applied` returns at ~1,201 ms and its `Install` reaches the oracle at ~1,234 ms. T (node 0,
/// 1,175 ms, read-write but writing nothing, so it has no tag that could queue W's behind it)
/// reads A's K and C, validates locally and commits. W (node 0, 1,180 ms) reads and overwrites
/// C, stable at once. R (node 0, 1,190 ms) reads K and C.
#[test]
fn a_reader_of_an_unstable_version_makes_a_non_adjacent_cycle() {
    let mut r = run();
    r.client(0, 0, Txn::new("S1").write(&k(), "k0"));
    r.client(0, 200, Txn::new("S2").write(&c(), "c0"));
    r.client(1, 1_000, Txn::new("A").read(&k()).write(&k(), "k1"));
    r.client(0, 1_240, Txn::new("T").read(&k()).read(&c()).read_write());
    r.client(0, 1_245, Txn::new("W").read(&c()).write(&c(), "c1"));
    r.client(0, 1_255, Txn::new("R").read(&k()).read(&c()));
    let r = r.finish(3_000);
    for t in ["S1", "S2", "A", "T", "W", "R"] {
        assert!(r.o.committed(t), "{}", r.o.render());
    }
    assert_eq!(r.o.reads("T"), vec![some("k1"), some("c0")]);
    assert_eq!(
        r.o.reads("R"),
        vec![some("k0"), some("c1")],
        "{}",
        r.o.render()
    );
    assert!(!r.valid_at(IsolationLevel::Serializable));
    assert!(
        !r.valid_at(IsolationLevel::SnapshotIsolation),
        "R →rw A →wr T →rw W →wr R: G-nonadjacent"
    );
    assert!(r.valid_at(IsolationLevel::ReadCommitted));
}

/// Fig. 5 on three data centres (VA, OR, IE: nodes 0, 1, 2, the paper's workers 1, 2, 3; node 0
/// is the oracle), one node per partition. The set-up commits 3, 2 and 5 times on the three
/// workers, worker 1's second commit writing C, so StableVTS = (3, 2, 5) and C carries ⟨1:2⟩,
/// readable since 2 ≤ 3. Then TX1 (worker 2, 1.5 s) writes C on node 0 and Z on node 2: it
/// commits at ~1,620 ms and C is applied at node 0 at ~1,654 ms, but its `Install` waits for
/// node 2's acknowledgement (~1,800 ms). TX2 (worker 1, 1,660 ms) reads C there, collecting the
/// dep ⟨2:3⟩, writes X and installs ⟨1:4⟩ at once: its entry waits at the oracle for its dep.
/// R1 (1,700 ms) reads at (3, 2, 5): neither. R2 (2 s) reads both.
#[test]
fn fig5_a_tag_is_readable_iff_within_the_stable_vector_and_deps_hold_entries_back() {
    let s = common::traced_sim::<VtsNode>("3dc", 3, 3, 1, ProtocolOptions::default());
    let (x, c, y, z) = (
        Key::numbered(0, 1),
        Key::numbered(0, 3),
        Key::numbered(1, 1),
        Key::numbered(2, 1),
    );
    assert_replicas(&s, &c, &[0]);
    assert_replicas(&s, &y, &[1]);
    assert_replicas(&s, &z, &[2]);
    let mut r = Scripted::new(s, INFO);
    r.session(
        0,
        0,
        vec![
            Txn::new("S1a").write(&x, "x1"),
            Txn::new("S1b").write(&c, "c12"),
            Txn::new("S1c").write(&x, "x13"),
        ],
    );
    r.session(
        1,
        0,
        vec![
            Txn::new("S2a").write(&y, "y1"),
            Txn::new("S2b").write(&y, "y2"),
        ],
    );
    let writes: Vec<Txn> = ["S3a", "S3b", "S3c", "S3d", "S3e"]
        .into_iter()
        .map(|name| Txn::new(name).write(&z, "z"))
        .collect();
    r.session(2, 0, writes);
    r.client(2, 1_000, Txn::new("TX4").read(&c).read(&x));
    r.client(1, 1_500, Txn::new("TX1").write(&c, "c23").write(&z, "z23"));
    r.client(0, 1_660, Txn::new("TX2").read(&c).write(&x, "x14"));
    r.client(0, 1_700, Txn::new("R1").read(&c).read(&x));
    r.client(0, 2_000, Txn::new("R2").read(&c).read(&x));
    r.run(1_000);
    assert_eq!(stable(&r), vec![3, 2, 5], "Fig. 5's StableVTS");
    assert_eq!(r.node(0).tag_of(&c), Some((NodeId(0), 2)), "C is ⟨1:2⟩");
    r.run(1_720);
    assert_eq!(r.node(0).tag_of(&c), Some((NodeId(1), 3)), "TX1's C");
    assert_eq!(r.node(0).tag_of(&x), Some((NodeId(0), 4)), "TX2's X");
    let oracle = r.node(0).vector_oracle().expect("node 0");
    assert_eq!(oracle.queued(), 1, "TX2's entry waits for its dep ⟨2:3⟩");
    assert_eq!(stable(&r), vec![3, 2, 5]);
    let r = r.finish(3_000);
    for t in ["TX4", "TX1", "TX2", "R1", "R2"] {
        assert!(r.o.committed(t), "{}", r.o.render());
    }
    assert_eq!(r.o.reads("TX4"), vec![some("c12"), some("x13")]);
    assert_eq!(r.o.reads("TX2"), vec![some("c23")]);
    assert_eq!(
        r.o.reads("R1"),
        vec![some("c12"), some("x13")],
        "⟨2:3⟩ and ⟨1:4⟩ are above (3, 2, 5)"
    );
    assert_eq!(r.o.reads("R2"), vec![some("c23"), some("x14")]);
    assert_eq!(stable(&r), vec![4, 3, 5]);
    assert!(r.valid_at(IsolationLevel::Serializable));
}

/// Oracle restart. S (node 0) writes C and R0 (node 0, 100 ms) reads it: StableVTS (1, 0) is
/// logged before R0 gets it. T (node 1, 300 ms) writes D: applied at once, its `Install`
/// reaches node 0 at ~334 ms, which crashes at 320 ms (losing it) and restarts at 400 ms with
/// (1, 0) and empty queues. Its first tick asks node 1 to install again; R1 (node 0, 700 ms)
/// sees T.
#[test]
fn a_restarted_oracle_keeps_its_vector_and_has_lost_installs_sent_again() {
    let mut r = run();
    r.client(0, 0, Txn::new("S").write(&c(), "c0"));
    r.client(0, 100, Txn::new("R0").read(&c()));
    r.client(1, 300, Txn::new("T").write(&d(), "d1"));
    r.client(0, 700, Txn::new("R1").read(&c()).read(&d()));
    r.run(320);
    assert_eq!(stable(&r), vec![1, 0]);
    r.s.crash(NodeId(0));
    r.run(400);
    r.s.restart(NodeId(0));
    r.run(401);
    assert_eq!(stable(&r), vec![1, 0], "logged: it never goes back");
    let r = r.finish(2_000);
    for t in ["S", "R0", "T", "R1"] {
        assert!(r.o.committed(t), "{}", r.o.render());
    }
    assert_eq!(r.o.reads("R0"), vec![some("c0")]);
    assert_eq!(r.o.reads("R1"), vec![some("c0"), some("d1")]);
    assert_eq!(stable(&r), vec![1, 1]);
    assert_eq!(counter(&r.s, 1, "installs"), 2, "T's install, and again");
    assert_eq!(r.node(1).tags_owed(), 0);
    assert!(r.valid_at(IsolationLevel::Serializable));
}

/// Coordinator crash after its commit, before its `Install`. T (node 1, 100 ms) writes K on
/// node 0: voted at ~167 ms, when node 1 decides (logging the tag with the decision) and sends
/// the decision; node 1 crashes at 190 ms, and the decision in flight is lost with it.
/// Restarted at 300 ms, node 1 replays the decision and the tag it owes and, at its first
/// tick, sends the decision again; node 0 applies and acknowledges, and node 1 installs ⟨2:1⟩.
/// R (node 0, 1 s) sees T.
#[test]
fn a_coordinator_that_crashed_after_its_commit_still_installs_its_tag() {
    let mut r = run();
    r.client(0, 0, Txn::new("S").write(&k(), "k0"));
    r.client(1, 100, Txn::new("T").write(&k(), "k1"));
    r.client(0, 1_000, Txn::new("R").read(&k()));
    r.run(190);
    assert_eq!(r.node(1).tags_owed(), 1, "T decided, not yet installed");
    r.s.crash(NodeId(1));
    r.run(300);
    assert_eq!(
        r.node(0).tag_of(&k()),
        Some((NodeId(0), 1)),
        "the decision in flight was lost in the crash: S's K"
    );
    assert_eq!(stable(&r), vec![1, 0], "T not installed");
    r.s.restart(NodeId(1));
    r.run(2_000);
    assert!(r.s.clients_done(), "{}", r.o.render());
    assert_eq!(r.o.reads("R"), vec![some("k1")], "{}", r.o.render());
    assert_eq!(stable(&r), vec![1, 1]);
    assert_eq!(r.node(1).tags_owed(), 0);
    assert_eq!(counter(&r.s, 1, "installs"), 1, "once, after the restart");
    assert!(r.valid_at(IsolationLevel::ReadCommitted));
}
