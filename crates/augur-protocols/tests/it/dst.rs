//! Scenario tests for `dst-occ` and `dst-2pl` (DST, NSDI '21, §3–§4; the digest
//! `shared/papers/dst.md` §3), each run under both flavors in the deterministic simulator on
//! "3dc" cut to two data centres (VA, OR: about 33.5 ms apart one way) with no replication
//! (`common::two_sites`): keys `A` and `B` live on node 1, `C` on node 0. Node clocks are
//! shifted where a scenario needs a transaction's timestamp below or above another's (the
//! paper's "clock=c").
//!
//! * **Fig. 8, steps 1–6**: TX1 writes A and reads B; TX3 (on node 0) reads A and writes A and
//!   B; while TX3 holds its locks on node 1, read-only TX4 (on node 1, a later clock) reads C,
//!   then A and B: it claims them, waits for TX3 (whose floor is below its timestamp) and sees
//!   TX3's writes. A's read timestamp stays at TX4's (max, not overwrite).
//! * **8b**: TX4 claims A and B before TX3 (whose clock lags) locks them: TX3 commits at TX4's
//!   timestamp + 1 (a logical step) and TX4 sees neither of its writes.
//! * **8c**: TX4 reads A, TX3 (clock behind) then commits A and B, TX4 reads B: the old B,
//!   because TX3 committed above TX4's claim. The mutant `no-dep-read` shows the fractured
//!   read (a G-single at serializability).
//! * **8d**: two read-only transactions meet a locked tuple; the later one (Y) claims A and
//!   waits; the earlier (X) finds A's timestamp above its own. With the holder rule X waits
//!   too; `literal-fig9-wait` (Fig. 9 as written) skips the wait and reads a G-single.
//! * **8e**: an RO with a clock far ahead claims P; A reads O and writes P (so commits above
//!   the claim); W then overwrites O; an RO R reads O and P. With RW2 for reads W commits above
//!   A and R sees neither; `no-read-set-install` lets W commit below R, which sees W but not A:
//!   valid at snapshot isolation, invalid at serializability.
//! * **8f**: W on a node whose clock is 10 ms ahead commits; R on the other node begins after
//!   W's acknowledgement and misses it: valid at serializability, invalid at strict
//!   serializability (the claim is tight). Staleness stays within the skew.
//! * **Fig. 8 follow-up**: TX5, clock behind, writes A and B after TX3; it commits above TX4
//!   (whose claim on A survived TX3's install) and TX4 reads TX3's B; `overwrite-ts` loses the
//!   claim, TX5 lands inside TX4's snapshot, and TX4 reads a G-single.
//! * **Crash**: a claim, the node that holds it crashes and restarts, a writer then commits
//!   there: its timestamp is above the claim (the durable claim ceiling), so the reader's
//!   snapshot stays consistent.
//! * **GC**: a read-only transaction that reads for seconds keeps the versions it may read
//!   while writers overwrite the key, and collection resumes once it ends.
//! * **Sessions (§6)**: a reader on a node whose clock is 1 s ahead claims C; a client on
//!   node 0 then writes C (committing above the claim, far above its own clock) and reads C
//!   read-only: without the session rule it misses its own write (a G-single-process:
//!   serializable, not session serializable); with `session=on` it reads it.

use crate::common;

use augur_protocols::common::lock_commit::{Flavor, LockCommit};
use augur_protocols::dst_2pl::Dst2Pl;
use augur_protocols::dst_occ::DstOcc;
use augur_types::{Hybrid, IsolationLevel, Key, NodeId};
use common::scripted::Scripted;
use common::scripted::keys::{a, b, c};
use common::two_sites::{sim, sim_with};
use common::{Txn, counter, ms, some};
use std::time::Duration;

/// A scripted run of a DST flavor.
type Run<F> = Scripted<LockCommit<F>>;

fn run<F: Flavor>(mutant: Option<&str>) -> Run<F> {
    Scripted::new(sim::<LockCommit<F>>(mutant), F::INFO)
}

fn run_with<F: Flavor>(settings: &[(&str, &str)]) -> Run<F> {
    Scripted::new(sim_with::<LockCommit<F>>(None, settings), F::INFO)
}

/// The initial state (T0, on node 1 at 0 ms: A = a0, B = b0, C = c0) and TX1 (node 1, 100 ms:
/// A := a5, reads B).
fn setup<F: Flavor>(r: &mut Run<F>) {
    let t0 = Txn::new("T0")
        .write(&a(), "a0")
        .write(&b(), "b0")
        .write(&c(), "c0");
    r.client(1, 0, t0);
    r.client(1, 100, Txn::new("TX1").write(&a(), "a5").read(&b()));
}

/// TX3 on node 0 at 400 ms: reads A, writes A := a3, B := b2. Its commit locks A and B on
/// node 1 from about 500 ms until its decision arrives (about 567 ms under 2PL, 634 ms under
/// OCC, whose validation of A adds a round trip).
fn tx3() -> Txn {
    Txn::new("TX3")
        .read(&a())
        .write(&a(), "a3")
        .write(&b(), "b2")
}

fn fig8<F: Flavor>() {
    let mut r = run::<F>(None);
    setup(&mut r);
    r.client(0, 400, tx3());
    // TX4 (node 1, 450 ms): C's read (node 0) returns at ~517 ms, inside TX3's lock window.
    r.client(1, 450, Txn::new("TX4").read(&c()).read(&a()).read(&b()));
    let r = r.finish(2_000);
    for t in ["T0", "TX1", "TX3", "TX4"] {
        assert!(r.o.committed(t), "{}", r.o.render());
    }
    assert_eq!(
        r.o.reads("TX4"),
        vec![some("c0"), some("a3"), some("b2")],
        "TX4 waited for TX3 and sees its writes"
    );
    assert!(
        r.commit_ts("TX3") <= r.commit_ts("TX4"),
        "TS3 ≤ TX4's timestamp"
    );
    assert!(r.commit_ts("TX1") < r.commit_ts("TX3"), "TX1 →wr TX3");
    assert!(counter(&r.s, 1, "read_only_waits") >= 1);
    assert!(counter(&r.s, 1, "claims") >= 2);
    // Step 5: TX3's install left TX4's claim on A and B (max, not overwrite).
    assert_eq!(r.node(1).read_timestamp_of(&a()), r.commit_ts("TX4"));
    assert_eq!(r.node(1).read_timestamp_of(&b()), r.commit_ts("TX4"));
    assert!(r.valid_at(IsolationLevel::Serializable));
    assert_eq!(counter(&r.s, 1, "read_only_aborted"), 0);
}

#[test]
fn fig8_the_reader_waits_for_the_one_writer_holding_its_keys() {
    fig8::<DstOcc>();
    fig8::<Dst2Pl>();
}

fn fig8b<F: Flavor>() {
    // TX3's clock lags 300 ms: without the claims it would commit below TX4.
    let mut r = run::<F>(None).clock(0, -300);
    setup(&mut r);
    r.client(1, 350, Txn::new("TX4").read(&a()).read(&b()).read(&c()));
    r.client(0, 450, tx3());
    let r = r.finish(2_000);
    assert!(
        r.o.committed("TX3") && r.o.committed("TX4"),
        "{}",
        r.o.render()
    );
    assert_eq!(r.o.reads("TX4"), vec![some("a5"), some("b0"), some("c0")]);
    assert_eq!(
        r.commit_ts("TX3"),
        r.commit_ts("TX4").next(),
        "the claims push TX3 one logical step above TX4"
    );
    assert_eq!(counter(&r.s, 1, "read_only_waits"), 0);
    assert!(r.valid_at(IsolationLevel::Serializable));
}

#[test]
fn fig8b_a_claim_pushes_a_later_writer_above_the_reader() {
    fig8b::<DstOcc>();
    fig8b::<Dst2Pl>();
}

/// 8c: TX4 (node 1) reads A at 350 ms and B at 900 ms; TX3 (node 0, clock 300 ms behind)
/// commits A and B in between.
fn fig8c<F: Flavor>(mutant: Option<&str>) -> Run<F> {
    let mut r = run::<F>(mutant).clock(0, -300);
    setup(&mut r);
    r.client(1, 350, Txn::new("TX4").read(&a()).sleep(ms(550)).read(&b()));
    r.client(0, 400, tx3());
    r.finish(2_000)
}

fn fig8c_both<F: Flavor>() {
    let r = fig8c::<F>(None);
    assert!(
        r.o.committed("TX3") && r.o.committed("TX4"),
        "{}",
        r.o.render()
    );
    assert_eq!(r.o.reads("TX4"), vec![some("a5"), some("b0")]);
    assert!(r.commit_ts("TX3") > r.commit_ts("TX4"));
    assert!(r.valid_at(IsolationLevel::Serializable));

    let r = fig8c::<F>(Some("no-dep-read"));
    assert!(
        r.o.committed("TX3") && r.o.committed("TX4"),
        "{}",
        r.o.render()
    );
    assert_eq!(
        r.o.reads("TX4"),
        vec![some("a5"), some("b2")],
        "without the claim TX3 commits below TX4: a fractured read"
    );
    assert!(r.commit_ts("TX3") < r.commit_ts("TX4"));
    assert!(!r.valid_at(IsolationLevel::Serializable));
}

#[test]
fn fig8c_a_writer_between_two_reads_stays_out_and_no_dep_read_fractures() {
    fig8c_both::<DstOcc>();
    fig8c_both::<Dst2Pl>();
}

/// 8d: TX3 (node 0, clock 300 ms behind) locks A and B on node 1 at ~500 ms with a low
/// timestamp. X (node 1, 450 ms) reads C on node 0 first and reaches A at ~517 ms; Y (node 1,
/// 505 ms) reads A at once, claiming it above X's timestamp, and waits.
fn fig8d<F: Flavor>(mutant: Option<&str>) -> Run<F> {
    let mut r = run::<F>(mutant).clock(0, -300);
    setup(&mut r);
    r.client(0, 400, tx3());
    r.client(1, 450, Txn::new("X").read(&c()).read(&a()).read(&b()));
    r.client(1, 505, Txn::new("Y").read(&a()).read(&b()));
    r.finish(2_000)
}

fn fig8d_both<F: Flavor>() {
    let r = fig8d::<F>(None);
    for t in ["TX3", "X", "Y"] {
        assert!(r.o.committed(t), "{}", r.o.render());
    }
    assert!(r.commit_ts("TX3") <= r.commit_ts("X") && r.commit_ts("X") < r.commit_ts("Y"));
    assert_eq!(r.o.reads("X"), vec![some("c0"), some("a3"), some("b2")]);
    assert_eq!(r.o.reads("Y"), vec![some("a3"), some("b2")]);
    assert!(r.valid_at(IsolationLevel::Serializable));

    let r = fig8d::<F>(Some("literal-fig9-wait"));
    assert_eq!(
        r.o.reads("X"),
        vec![some("c0"), some("a5"), some("b2")],
        "Fig. 9 as written: X skips A's wait, then sees TX3's B"
    );
    assert!(!r.valid_at(IsolationLevel::Serializable));
}

#[test]
fn fig8d_the_wait_depends_on_the_holder_not_on_the_tuple_timestamp() {
    fig8d_both::<DstOcc>();
    fig8d_both::<Dst2Pl>();
}

/// 8e: O on node 0, P on node 1 (whose clock is 1 s ahead), Q on node 0; all absent at first.
/// Z (node 1, 100 ms) claims P far ahead; A (node 0, 200 ms) reads O and writes P; W (node 0,
/// 400 ms) writes O and Q; R (node 0, 600 ms) reads O and P.
fn fig8e<F: Flavor>(mutant: Option<&str>) -> Run<F> {
    let (o, p, q) = (
        Key::numbered(0, 1),
        Key::numbered(1, 1),
        Key::numbered(0, 2),
    );
    let mut r = run::<F>(mutant).clock(1, 1_000);
    r.client(1, 100, Txn::new("Z").read(&p));
    r.client(0, 200, Txn::new("A").read(&o).write(&p, "p1"));
    r.client(0, 400, Txn::new("W").write(&o, "o1").write(&q, "q1"));
    r.client(0, 600, Txn::new("R").read(&o).read(&p));
    r.finish(2_000)
}

fn fig8e_both<F: Flavor>() {
    let r = fig8e::<F>(None);
    for t in ["Z", "A", "W", "R"] {
        assert!(r.o.committed(t), "{}", r.o.render());
    }
    assert!(r.commit_ts("A") < r.commit_ts("W"), "A →rw W");
    assert_eq!(r.o.reads("R"), vec![None, None], "R sees neither");
    assert!(r.valid_at(IsolationLevel::Serializable));

    let r = fig8e::<F>(Some("no-read-set-install"));
    assert!(r.commit_ts("W") < r.commit_ts("R") && r.commit_ts("R") < r.commit_ts("A"));
    assert_eq!(
        r.o.reads("R"),
        vec![some("o1"), None],
        "R sees W but not A, which W depends on"
    );
    assert!(r.valid_at(IsolationLevel::SnapshotIsolation));
    assert!(!r.valid_at(IsolationLevel::Serializable));
}

#[test]
fn fig8e_rw2_for_reads_and_no_read_set_install_is_caught_only_at_serializability() {
    fig8e_both::<DstOcc>();
    fig8e_both::<Dst2Pl>();
}

/// 8f: node 0's clock is 10 ms ahead; W (node 0, 100 ms) writes C (on node 0) and commits at
/// once; R (node 1, 102 ms, after W's acknowledgement) reads C.
fn fig8f<F: Flavor>() {
    let mut r = run::<F>(None).clock(0, 10);
    r.client(0, 100, Txn::new("W").write(&c(), "c1"));
    r.client(1, 102, Txn::new("R").read(&c()));
    let r = r.finish(1_000);
    assert!(r.o.committed("W") && r.o.committed("R"));
    assert_eq!(
        r.o.reads("R"),
        vec![None],
        "R's clock is behind W's timestamp"
    );
    assert!(r.valid_at(IsolationLevel::Serializable));
    assert!(!r.valid_at(IsolationLevel::StrictSerializable));
    let stale = Hybrid::physical(r.commit_ts("W")).since(Hybrid::physical(r.commit_ts("R")));
    assert!(stale <= Duration::from_millis(10), "staleness {stale:?}");
}

#[test]
fn fig8f_serializable_not_strict_under_clock_skew() {
    fig8f::<DstOcc>();
    fig8f::<Dst2Pl>();
}

/// A claim survives a crash as the durable claim ceiling: R (node 1, clock 1 s ahead) reads C
/// on node 0 at 100 ms; node 0 crashes at 200 ms and restarts at 300 ms; W (node 0, 400 ms)
/// writes C and A; R reads A at 800 ms.
fn crash<F: Flavor>() {
    let mut r = run::<F>(None).clock(1, 1_000);
    r.client(1, 100, Txn::new("R").read(&c()).sleep(ms(700)).read(&a()));
    r.client(0, 400, Txn::new("W").write(&c(), "c1").write(&a(), "a1"));
    r.run(200);
    assert!(counter(&r.s, 0, "ceiling_writes") >= 1);
    r.s.crash(NodeId(0));
    r.run(300);
    r.s.restart(NodeId(0));
    let r = r.finish(3_000);
    assert!(r.o.committed("W") && r.o.committed("R"), "{}", r.o.render());
    assert!(
        r.commit_ts("W") > r.commit_ts("R"),
        "W's timestamp is above the recovered ceiling, hence above R's claim"
    );
    assert_eq!(r.o.reads("R"), vec![None, None]);
    assert!(r.valid_at(IsolationLevel::Serializable));
}

#[test]
fn a_claim_lost_in_a_crash_is_covered_by_the_ceiling() {
    crash::<DstOcc>();
    crash::<Dst2Pl>();
}

/// R (node 1, 100 ms) reads A, then B at 3 s; writers on node 1 overwrite B every 200 ms from
/// 300 ms.
fn gc<F: Flavor>() {
    let mut r = run::<F>(None);
    r.client(1, 0, Txn::new("T0").write(&a(), "a0").write(&b(), "b0"));
    r.client(1, 100, Txn::new("R").read(&a()).sleep(ms(2_900)).read(&b()));
    let names = ["W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8"];
    let values = ["b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8"];
    for (i, (name, value)) in names.into_iter().zip(values).enumerate() {
        r.client(1, 300 + 200 * i as u64, Txn::new(name).write(&b(), value));
    }
    r.run(2_500);
    assert!(
        r.node(1).versions_kept(&b()) >= 2,
        "R's version of B stays while R runs"
    );
    let r = r.finish(4_000);
    assert!(r.o.committed("R"), "{}", r.o.render());
    assert_eq!(r.o.reads("R"), vec![some("a0"), some("b0")]);
    assert_eq!(r.node(1).versions_kept(&b()), 1, "collected once R ended");
    assert!(r.valid_at(IsolationLevel::Serializable));
}

#[test]
fn garbage_collection_keeps_what_a_long_reader_may_read() {
    gc::<DstOcc>();
    gc::<Dst2Pl>();
}

/// Fig. 8's follow-up (TX5 "clock=3" writes A and gets TS ≥ 8): after TX3's install kept TX4's
/// claim on A, TX5 (node 0, clock 300 ms behind) reads A and writes A and B while TX4 sleeps between its
/// read of A and its read of B. TX5 commits above TX4, which reads TX3's B. Under
/// `overwrite-ts` TX3's install lowered A's timestamp to TS3, TX5 commits inside TX4's snapshot
/// and TX4 reads TX5's B after TX3's A: a G-single.
fn fig8_follow_up<F: Flavor>(mutant: Option<&str>) -> Run<F> {
    let mut r = run::<F>(mutant).clock(0, -300);
    setup(&mut r);
    r.client(0, 400, tx3());
    let tx4 = Txn::new("TX4")
        .read(&c())
        .read(&a())
        .sleep(ms(400))
        .read(&b());
    r.client(1, 450, tx4);
    let tx5 = Txn::new("TX5")
        .read(&a())
        .write(&a(), "a9")
        .write(&b(), "b9");
    r.client(0, 700, tx5);
    r.finish(2_000)
}

fn fig8_follow_up_both<F: Flavor>() {
    let r = fig8_follow_up::<F>(None);
    assert_eq!(r.o.reads("TX4"), vec![some("c0"), some("a3"), some("b2")]);
    assert!(r.commit_ts("TX5") > r.commit_ts("TX4"));
    assert!(r.valid_at(IsolationLevel::Serializable));

    let r = fig8_follow_up::<F>(Some("overwrite-ts"));
    assert!(r.o.committed("TX5"), "{}", r.o.render());
    assert!(
        r.commit_ts("TX5") < r.commit_ts("TX4"),
        "TX4's claim on A was lost"
    );
    assert_eq!(r.o.reads("TX4"), vec![some("c0"), some("a3"), some("b9")]);
    assert!(!r.valid_at(IsolationLevel::Serializable));
}

#[test]
fn fig8_follow_up_the_claim_outlives_the_install_and_overwrite_ts_loses_it() {
    fig8_follow_up_both::<DstOcc>();
    fig8_follow_up_both::<Dst2Pl>();
}

/// The session rule: X (node 1, clock 1 s ahead) claims C at 50 ms; a client on node 0 then
/// writes C (W, 200 ms: above X's claim) and reads it back read-only (R).
fn session<F: Flavor>(rule: &str) -> Run<F> {
    let mut r = run_with::<F>(&[("session", rule)]).clock(1, 1_000);
    r.client(1, 50, Txn::new("X").read(&c()));
    r.session(
        0,
        200,
        vec![Txn::new("W").write(&c(), "c1"), Txn::new("R").read(&c())],
    );
    let r = r.finish(2_000);
    assert!(r.o.committed("W") && r.o.committed("R"), "{}", r.o.render());
    assert!(
        r.commit_ts("W") > r.commit_ts("X"),
        "W commits above X's claim"
    );
    assert!(r.valid_at(IsolationLevel::Serializable));
    r
}

fn session_both<F: Flavor>() {
    let off = session::<F>("off");
    assert_eq!(off.o.reads("R"), vec![None], "R reads below its own write");
    assert!(!off.valid_at(IsolationLevel::SessionSerializable));
    let on = session::<F>("on");
    assert_eq!(on.o.reads("R"), vec![some("c1")]);
    assert!(on.commit_ts("R") >= on.commit_ts("W"));
    assert!(on.valid_at(IsolationLevel::SessionSerializable));
}

#[test]
fn the_session_rule_lets_a_client_read_its_own_write_above_a_claim() {
    session_both::<DstOcc>();
    session_both::<Dst2Pl>();
}
