//! Golden trace tests, and scenario tests of their own, for the protocols of the OAB study,
//! `oab-spec` and `sm-rep` (`common::replicated` with and without speculation): the same
//! scripts run under each, so that `diff tests/golden/{sm-rep,oab-spec}.X.trace` shows what
//! optimistic delivery and forking change. Transactions are one-shot calls of the scripted
//! catalogue (`common::one_shot`); the traces show the sequencer's Raft traffic decoded.
//!
//! Every scenario runs on "lan" (0.1 ms between nodes) with three nodes, each holding every
//! key (replication 3), all three Raft voters. n0 leads from ~100 ms; clients start at 200 ms.
//! Each node cuts its submissions into a batch every 10 ms (at 10, 20, … ms) and delivers a
//! committed batch finally `final_delay_ms` = 20 ms later, so that optimistic execution has
//! time to finish before final delivery, as in the paper's regime.
//!
//! ```text
//! AUGUR_BLESS=1 cargo test -p augur-protocols --test it golden_replicated::
//! git diff -- crates/augur-protocols/tests/golden/
//! ```

use crate::common;

use augur_contract::{Protocol, ProtocolOptions};
use augur_protocols::oab_spec::OabSpec;
use augur_protocols::sm_rep::SmRep;
use augur_runtime::sim::Simulation;
use augur_types::{Key, NodeId};
use common::one_shot::{self, Call, spawn_one_shot_client};
use common::{Golden, Observed, counter, ms, some};
use std::time::Duration;

const OAB_SPEC: Golden = Golden::readable("golden_replicated", "oab-spec", one_shot::readable);
const SM_REP: Golden = Golden::readable("golden_replicated", "sm-rep", one_shot::readable);

fn a() -> Key {
    Key::numbered(0, 1)
}

fn b() -> Key {
    Key::numbered(1, 1)
}

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

fn sim<P: Protocol>() -> Simulation<P> {
    let mut options = ProtocolOptions::default();
    options
        .settings
        .insert("final_delay_ms".into(), "20".into());
    let s = common::traced_sim_with::<P>("lan", 1, 3, 3, options, one_shot::procedures());
    assert_eq!(
        s.placement().replication_factor(),
        3,
        "every node holds every key"
    );
    s
}

/// Every node holds the same newest versions of every key.
fn assert_replicas_agree<P: Protocol>(s: &Simulation<P>) {
    let digests: Vec<_> = (0..3).map(|n| s.node(NodeId(n)).state_digests()).collect();
    assert!(
        digests.windows(2).all(|w| w[0] == w[1]),
        "replicas disagree: {digests:?}"
    );
}

fn sum<P: Protocol>(s: &Simulation<P>, name: &str) -> u64 {
    (0..3).map(|n| counter(s, n, name)).sum()
}

// ----- (a) The orders agree: a chain is exploited -----

/// `S` (n0) writes `a` and `b`; at 250 ms two clients of n0 swap them (`X1`, then `X2` 10 µs
/// later), cut into one batch, `X1` first: the optimistic order and the final order agree.
fn chain<P: Protocol>(golden: &Golden) -> (Observed, Simulation<P>) {
    let mut s = sim::<P>();
    let o = Observed::default();
    let setup = vec![Call::put("S", &[(&a(), "a0"), (&b(), "b0")])];
    spawn_one_shot_client(&mut s, 0, ms(200), setup, &o);
    spawn_one_shot_client(&mut s, 0, ms(250), vec![Call::swap("X1", &a(), &b())], &o);
    spawn_one_shot_client(
        &mut s,
        0,
        us(250_010),
        vec![Call::swap("X2", &a(), &b())],
        &o,
    );
    s.run_until(ms(330));
    golden.check(&s, &o, "chain");
    (o, s)
}

fn assert_chain(o: &Observed) {
    assert_eq!(
        o.of("X1"),
        r#"read 0/1 = "a0"; read 1/1 = "b0"; write 0/1 = "b0"; write 1/1 = "a0"; committed"#
    );
    assert_eq!(
        o.of("X2"),
        r#"read 0/1 = "b0"; read 1/1 = "a0"; write 0/1 = "a0"; write 1/1 = "b0"; committed"#
    );
}

/// `oab-spec`: every node delivers `X1` then `X2` optimistically and runs each at once. `X2`'s
/// first instance reads `X1`'s uncommitted versions (its first choice, the nearest earlier
/// request), and forks a child at its first read for the committed version. At final delivery
/// `X1`'s only instance is valid and commits; then `X2`'s first instance is (`X1`'s versions
/// are now the newest committed) and commits, its child aborted: nothing ran after final
/// delivery.
#[test]
fn oab_spec_chain() {
    let (o, s) = chain::<OabSpec>(&OAB_SPEC);
    assert_chain(&o);
    assert_replicas_agree(&s);
    assert_eq!(sum(&s, "re_executions"), 0);
    assert!(sum(&s, "forks") >= 3, "X2 forked at every node");
    assert_eq!(sum(&s, "final_order_inversions"), 0);
}

/// `sm-rep`: nothing runs before final delivery. Both swaps are delivered in one batch and start
/// at once over the committed `a0`/`b0`; `X1` commits, and `X2`, whose reads `X1` overwrote,
/// runs again at the head.
#[test]
fn sm_rep_chain() {
    let (o, s) = chain::<SmRep>(&SM_REP);
    assert_chain(&o);
    assert_replicas_agree(&s);
    assert_eq!(sum(&s, "re_executions"), 3, "X2 ran again at each node");
}

// ----- (b) The orders disagree: a child commits, and a request runs again at the head -----

/// `S` writes `a` and `b`. `X2` (a client of n2) swaps them, reaching n2 at 269.95 ms, just
/// before n2 cuts its batch at 270 ms; `X1` (a client of n0) swaps them, reaching n0 at
/// 270.01 ms, just after n0 cut its own: `X2` is ordered first, in n2's batch, `X1` in n0's
/// next one. But n0 delivered `X1` optimistically (at once) before `X2`'s copy arrived (about
/// 0.2 ms after it was sent): at n0 the optimistic order is the final one inverted.
fn inversion<P: Protocol>(golden: &Golden) -> (Observed, Simulation<P>) {
    let mut s = sim::<P>();
    let o = Observed::default();
    let setup = vec![Call::put("S", &[(&a(), "a0"), (&b(), "b0")])];
    spawn_one_shot_client(&mut s, 0, ms(200), setup, &o);
    spawn_one_shot_client(
        &mut s,
        2,
        us(269_930),
        vec![Call::swap("X2", &a(), &b())],
        &o,
    );
    spawn_one_shot_client(
        &mut s,
        0,
        us(269_990),
        vec![Call::swap("X1", &a(), &b())],
        &o,
    );
    let r = Call::get("R", &[&a(), &b()]);
    spawn_one_shot_client(&mut s, 1, ms(340), vec![r], &o);
    s.run_until(ms(400));
    golden.check(&s, &o, "inversion");
    (o, s)
}

fn assert_inversion(o: &Observed) {
    assert_eq!(
        o.of("X2"),
        r#"read 0/1 = "a0"; read 1/1 = "b0"; write 0/1 = "b0"; write 1/1 = "a0"; committed"#
    );
    assert_eq!(
        o.of("X1"),
        r#"read 0/1 = "b0"; read 1/1 = "a0"; write 0/1 = "a0"; write 1/1 = "b0"; committed"#
    );
    assert_eq!(o.reads("R"), vec![some("a0"), some("b0")]);
}

/// `oab-spec`: at n0, `X1` runs first over `a0`/`b0`; `X2`'s first instance reads `X1`'s
/// versions and its child the committed ones. Final delivery puts `X2` first: its first
/// instance read versions that never commit, its child is valid and commits (a fork that
/// commits a child); then `X1`'s only instance read versions `X2` has overwritten, so `X1`
/// runs again at the head (the family re-executes). At n1 and n2, which saw `X2` first, both
/// first instances commit. Every node commits the same reads and writes.
#[test]
fn oab_spec_inversion() {
    let (o, s) = inversion::<OabSpec>(&OAB_SPEC);
    assert_inversion(&o);
    assert_replicas_agree(&s);
    assert_eq!(
        counter(&s, 0, "final_order_inversions"),
        1,
        "n0 saw X1 first"
    );
    assert_eq!(counter(&s, 0, "re_executions"), 1, "X1 ran again at n0");
    assert_eq!(counter(&s, 2, "final_order_inversions"), 0);
    assert_eq!(counter(&s, 2, "re_executions"), 0, "n2 saw X2 first");
}

/// `sm-rep`: the optimistic order plays no part; both swaps start at their final delivery, in
/// two batches, and `X1` starts after `X2` committed, so nothing runs again.
#[test]
fn sm_rep_inversion() {
    let (o, s) = inversion::<SmRep>(&SM_REP);
    assert_inversion(&o);
    assert_replicas_agree(&s);
    assert_eq!(sum(&s, "re_executions"), 0);
}

// ----- (c) Final delivery before optimistic delivery -----

/// `S` writes `a` and `b`. At 250 ms n1 is cut off from the others for 30 ms, and at 251 ms a
/// client of n0 swaps `a` and `b` (`X`): its optimistic copy to n1 is lost, and its batch
/// reaches n1 only once the link heals, when Raft's leader sends n1 the entries it missed.
/// n1 finally delivers `X` without ever having delivered it optimistically, and runs it at once.
#[test]
fn oab_spec_final_delivery_before_optimistic_delivery() {
    let mut s = sim::<OabSpec>();
    let o = Observed::default();
    let setup = vec![Call::put("S", &[(&a(), "a0"), (&b(), "b0")])];
    spawn_one_shot_client(&mut s, 0, ms(200), setup, &o);
    spawn_one_shot_client(&mut s, 0, ms(251), vec![Call::swap("X", &a(), &b())], &o);
    let r = Call::get("R", &[&a(), &b()]);
    spawn_one_shot_client(&mut s, 1, ms(360), vec![r], &o);
    s.run_until(ms(250));
    s.partition(&[vec![NodeId(0), NodeId(2)], vec![NodeId(1)]]);
    s.run_until(ms(280));
    s.heal();
    s.run_until(ms(420));
    OAB_SPEC.check(&s, &o, "final_delivery_before_optimistic_delivery");
    assert_eq!(
        o.of("X"),
        r#"read 0/1 = "a0"; read 1/1 = "b0"; write 0/1 = "b0"; write 1/1 = "a0"; committed"#
    );
    assert_eq!(o.reads("R"), vec![some("b0"), some("a0")]);
    assert_replicas_agree(&s);
    // S and R reached n1 optimistically, X only finally.
    assert_eq!(counter(&s, 0, "optimistic_deliveries"), 3);
    assert_eq!(counter(&s, 1, "optimistic_deliveries"), 2);
    assert_eq!(counter(&s, 1, "requests_committed"), 3);
}
