//! Golden trace tests, and scenario tests of their own, for the order-then-execute protocols
//! `calvin`, `s-smr` and `sparkle` (`common::ordered` under three schedules): the same three
//! scripts run under each, so that `diff tests/golden/{calvin,s-smr}.X.trace` shows what
//! locking by footprint changes against one executor per partition, and
//! `diff tests/golden/{s-smr,sparkle}.X.trace` what speculative runs on workers change. Transactions that read are one-shot
//! calls of the scripted catalogue (`common::one_shot`); the traces show the sequencer's Raft
//! traffic decoded (see the `common` module docs).
//!
//! Every scenario runs on "lan" (0.1 ms between nodes) with three nodes, all three Raft voters,
//! and a ring placement with two replicas per partition: `a = 0/1` in p0 (n0, n1), `b = 1/1` in
//! p1 (n1, n2), `c = 2/1` in p2 (n2, n0), and the pointer `P = 0/9` in p0. n0 has the shortest
//! election timeout and leads from ~100 ms (term 1); clients start at 200 ms. Each node cuts
//! its submissions into a batch every 10 ms (the epoch) and the leader heartbeats every 20 ms.
//!
//! ```text
//! AUGUR_BLESS=1 cargo test -p augur-protocols --test it golden_ordered::
//! git diff -- crates/augur-protocols/tests/golden/
//! ```

use crate::common;

use augur_contract::{Protocol, ProtocolOptions};
use augur_protocols::calvin::Calvin;
use augur_protocols::s_smr::SSmr;
use augur_protocols::sparkle::Sparkle;
use augur_runtime::sim::{Simulation, TraceEvent};
use augur_types::{Key, NodeId};
use common::one_shot::{self, Call, spawn_one_shot_client};
use common::{Golden, Observed, assert_replicas, counter, ms, some};
use std::time::Duration;

const CALVIN: Golden = Golden::readable("golden_ordered", "calvin", one_shot::readable);
const S_SMR: Golden = Golden::readable("golden_ordered", "s-smr", one_shot::readable);
const SPARKLE: Golden = Golden::readable("golden_ordered", "sparkle", one_shot::readable);

fn a() -> Key {
    Key::numbered(0, 1)
}

fn b() -> Key {
    Key::numbered(1, 1)
}

fn c() -> Key {
    Key::numbered(2, 1)
}

/// The pointer `follow` reads.
fn pointer() -> Key {
    Key::numbered(0, 9)
}

fn sim<P: Protocol>() -> Simulation<P> {
    let options = ProtocolOptions::default();
    let s = common::traced_sim_with::<P>("lan", 1, 3, 2, options, one_shot::procedures());
    assert_replicas(&s, &a(), &[0, 1]);
    assert_replicas(&s, &b(), &[1, 2]);
    assert_replicas(&s, &c(), &[2, 0]);
    assert_replicas(&s, &pointer(), &[0, 1]);
    s
}

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

// ----- (a) A multi-partition transaction with a value exchange -----

/// One client of n0 writes `a` and `b` (`S`, blind writes to p0 and p1), then swaps them
/// (`X`: reads both and writes each the other's value), then reads `a`, `b` and `c` (`R`,
/// read-only, three partitions). Each is ordered in n0's next batch and run at every replica of
/// every partition it touches, at its position. `X`'s participants need each other's value:
/// the replicas of p0 send `a` to those of p1 and the other way round (`Value` messages; n1,
/// which holds both, takes its own copies locally), and each runs the swap over both values
/// and applies its own partition's write; the replicas of p0, the reporter, send the outcome to
/// n0, which answers once.
fn value_exchange<P: Protocol>(golden: &Golden) -> (Observed, Simulation<P>) {
    let mut s = sim::<P>();
    let o = Observed::default();
    let calls = vec![
        Call::put("S", &[(&a(), "a0"), (&b(), "b0")]),
        Call::swap("X", &a(), &b()),
        Call::get("R", &[&a(), &b(), &c()]),
    ];
    spawn_one_shot_client(&mut s, 0, ms(200), calls, &o);
    s.run_until(ms(300));
    golden.check(&s, &o, "multi_partition_value_exchange");
    (o, s)
}

fn assert_value_exchange<P: Protocol>(o: &Observed, s: &Simulation<P>) {
    assert_eq!(
        o.of("S"),
        r#"write 0/1 = "a0"; write 1/1 = "b0"; committed"#
    );
    assert_eq!(
        o.of("X"),
        r#"read 0/1 = "a0"; read 1/1 = "b0"; write 0/1 = "b0"; write 1/1 = "a0"; committed"#
    );
    assert_eq!(o.reads("R"), vec![some("b0"), some("a0"), None]);
    assert!(o.committed("R"));
    // Every replica of every participant ran S and X; nothing was mispredicted or resubmitted.
    for n in 0..3 {
        assert_eq!(counter(s, n, "mispredicted"), 0);
        assert_eq!(counter(s, n, "resubmitted_undeclared"), 0);
    }
}

/// `calvin`: the dry runs over absent values predict each footprint exactly (`S` writes `a`
/// and `b`, `X` reads and writes both, `R` reads all three). At each replica the lock thread
/// grants `X` its locks (`S` has finished) and a worker runs it (`Ran` timers): each participant
/// reads its part of the footprint up front and sends it to the replicas of the other, which
/// writes too (both are active). `R` writes nothing: it runs at its lowest participant p0
/// only (n0, n1), to which p1 and p2 — passive — send `b` and `c`, and p0's replicas report.
#[test]
fn calvin_multi_partition_value_exchange() {
    let (o, s) = value_exchange::<Calvin>(&CALVIN);
    assert_value_exchange(&o, &s);
    // p1 and p2 only read for R: the procedure ran at p0's replicas (and for S and X at both
    // partitions of each node).
    assert_eq!(
        counter(&s, 2, "runs_handed_off"),
        2,
        "n2 (p1, p2) ran S and X"
    );
}

/// `s-smr`: no footprint, just the partitions a dry run touched. Each partition's executor runs
/// one transaction at a time, in order, inline; `X` at p1 blocks until `a` arrives from p0 (and
/// p0 until `b` arrives), and every participant of `R` runs it, sending its values to the
/// others; the replicas of p0 report.
#[test]
fn s_smr_multi_partition_value_exchange() {
    let (o, s) = value_exchange::<SSmr>(&S_SMR);
    assert_value_exchange(&o, &s);
    assert_eq!(counter(&s, 2, "runs_handed_off"), 0, "runs are inline");
}

/// `sparkle`: like `s-smr`, every participant runs the procedure; the runs go to workers
/// (`Ran` timers) and read through the partition's speculative state. `X` is the first
/// transaction not final at both of its partitions when it reads, so each sends its value at
/// once; `R`'s participants do the same, each once every earlier transaction is final there.
#[test]
fn sparkle_multi_partition_value_exchange() {
    let (o, s) = value_exchange::<Sparkle>(&SPARKLE);
    assert_value_exchange(&o, &s);
    for n in 0..3 {
        assert_eq!(counter(&s, n, "speculative_aborts"), 0, "n{n}");
    }
}

// ----- (b) A dependent transaction, mispredicted and ordered again -----

/// `S` (n0) sets the pointer `P` to `b` and gives `b` and `c` values; then `F1` (same client)
/// follows `P`: it reads `P`, then the key `P` names, and writes that key `followed`. Its
/// keys depend on what it reads, and a dry run over absent values sees only `P`. At 300 ms
/// `F2`, another client of n0, follows `P` again, and 50 µs later `W`, a third client of n0,
/// points `P` at `c`.
fn dependent<P: Protocol>(golden: &Golden) -> (Observed, Simulation<P>) {
    let mut s = sim::<P>();
    let o = Observed::default();
    let setup = vec![
        Call::put("S", &[(&pointer(), "1/1"), (&b(), "b0"), (&c(), "c0")]),
        Call::follow("F1", &pointer()),
    ];
    spawn_one_shot_client(&mut s, 0, ms(200), setup, &o);
    spawn_one_shot_client(&mut s, 0, ms(300), vec![Call::follow("F2", &pointer())], &o);
    let w = Call::put("W", &[(&pointer(), "2/1")]);
    spawn_one_shot_client(&mut s, 0, us(300_050), vec![w], &o);
    let r = Call::get("R", &[&pointer(), &b(), &c()]);
    spawn_one_shot_client(&mut s, 2, ms(380), vec![r], &o);
    s.run_until(ms(420));
    golden.check(&s, &o, "dependent_transaction_mispredicted");
    (o, s)
}

fn assert_dependent(o: &Observed) {
    assert!(o.committed("S") && o.committed("W"), "{}", o.render());
    // F1 ran (in the end) with P naming b, F2 with P naming c: W was ordered before it.
    assert_eq!(
        o.of("F1"),
        r#"read 0/9 = "1/1"; read 1/1 = "b0"; write 1/1 = "followed"; committed"#
    );
    assert_eq!(
        o.of("F2"),
        r#"read 0/9 = "2/1"; read 2/1 = "c0"; write 2/1 = "followed"; committed"#
    );
    assert_eq!(
        o.reads("R"),
        vec![some("2/1"), some("followed"), some("followed")]
    );
}

/// `calvin` (OLLP). `F1`'s dry-run footprint is `{P}`, so it is ordered at p0 alone; its run
/// reads `P` = `1/1` and then `b`, outside the footprint, and ends `Mispredicted` at both
/// replicas of p0, which report it. n0 marks `follow` dependent and reconnoitres `F1`: it reads
/// `P` from its own store and asks n1 for `b` (`ReconRead`), then orders `F1` again with
/// footprint reads `{P, b}`, writes `{b}`: p0 passive (sends `P`), p1 runs it and reports.
/// `F2`, of a type now known dependent, is reconnoitred before it is ordered at all — `P` is
/// still `1/1`, so n0 asks n1 for `b` — and while that answer travels `W` is submitted and
/// cut into the same batch ahead of `F2`. `W` runs first (it writes `P`); `F2`'s run at p1
/// receives `P` = `2/1` from p0 and reads `c`, outside the reconnoitred footprint: the
/// reconnaissance mispredicted it, and it ends `Mispredicted`. Reconnoitred again (`P` and `c`
/// are both in n0's store now) it is ordered with footprint `{P, c}` and commits.
#[test]
fn calvin_dependent_transaction_mispredicted_and_reconnoitred() {
    let (o, s) = dependent::<Calvin>(&CALVIN);
    assert_dependent(&o);
    assert_eq!(counter(&s, 0, "mispredicted"), 2, "F1 once, F2 once");
    assert_eq!(counter(&s, 0, "reconnaissances"), 3, "F1 once, F2 twice");
    assert_eq!(
        counter(&s, 0, "recon_reads"),
        2,
        "b for F1 and for F2's first"
    );
    assert_eq!(counter(&s, 0, "resubmitted_undeclared"), 0);
}

/// `s-smr` has no footprints and no reconnaissance: a dry run declares partitions, and a run
/// that reaches an undeclared partition ends `Undeclared` at every participant and is ordered
/// again with that partition added. `F1`'s dry run declares p0; its run reads `P` = `1/1` and
/// reaches p1: resubmitted as p0 + p1, it commits. `F2` is ordered at once (declared p0, ahead
/// of `W`, which n0 received after it) and ends `Undeclared` (p1) like `F1`; resubmitted as
/// p0 + p1, it is now ordered after `W`, reads `P` = `2/1` and reaches p2: resubmitted again as
/// p0 + p1 + p2, it commits writing `c`.
#[test]
fn s_smr_dependent_transaction_resubmitted_with_its_partitions() {
    let (o, s) = dependent::<SSmr>(&S_SMR);
    assert_dependent(&o);
    assert_eq!(
        counter(&s, 0, "resubmitted_undeclared"),
        3,
        "F1 once, F2 twice"
    );
    assert_eq!(counter(&s, 0, "mispredicted"), 0);
    assert_eq!(counter(&s, 0, "reconnaissances"), 0);
}

/// `sparkle` has no footprints either: it declares, runs and resubmits as `s-smr` does.
#[test]
fn sparkle_dependent_transaction_resubmitted_with_its_partitions() {
    let (o, s) = dependent::<Sparkle>(&SPARKLE);
    assert_dependent(&o);
    assert_eq!(
        counter(&s, 0, "resubmitted_undeclared"),
        3,
        "F1 once, F2 twice"
    );
}

// ----- (c) A leader change of the Raft sequencer mid-batch -----

/// Whether nodes n1 and n2 have both received from n0 a Raft append carrying a batch of n1.
fn batch_of_n1_reached_both_followers<P: Protocol>(s: &Simulation<P>) -> bool {
    let mut reached = [false; 2];
    for e in s.trace().entries() {
        if let TraceEvent::Deliver { from, msg } = &e.event
            && *from == NodeId(0)
            && (e.node == NodeId(1) || e.node == NodeId(2))
            && one_shot::readable(msg.clone()).contains("batch n1#1 ")
        {
            reached[e.node.0 as usize - 1] = true;
        }
    }
    reached == [true, true]
}

/// `S` (a client of n1, 200 ms) writes `b` and `c`. At 250 ms two clients of n1 submit `X`
/// (swaps `b` and `c`: p1 and p2) and `Y` (writes `a`: p0); n1's next epoch cuts both into one
/// batch (n1's second, `n1#1`) and forwards it to the leader n0 (`MsgPropose`), which appends
/// it to its log and sends it to n1 and n2 (`MsgAppend`). The moment both have received it,
/// n0 crashes — before their acknowledgements reach it, so the batch is in every surviving log
/// but committed nowhere. n1, whose election timeout comes first, pre-votes and is elected in
/// term 2 with n2's vote; as new leader it appends an empty entry of its term, and once n2 has
/// it both commit it and, below it, the batch of term 1. Both run `X` and `Y` (n0's replicas
/// of p0 and p2 being down, n1 alone runs `Y` and reports it, and n2 alone holds p2 for `X`);
/// n1 answers both clients, and its batch is never proposed again. `Z` (n2, 200 ms after the
/// crash) reads all three keys under the new leader.
fn leader_crash<P: Protocol>(golden: &Golden) -> (Observed, Simulation<P>) {
    let mut s = sim::<P>();
    let o = Observed::default();
    spawn_one_shot_client(
        &mut s,
        1,
        ms(200),
        vec![Call::put("S", &[(&b(), "b0"), (&c(), "c0")])],
        &o,
    );
    spawn_one_shot_client(&mut s, 1, ms(250), vec![Call::swap("X", &b(), &c())], &o);
    spawn_one_shot_client(
        &mut s,
        1,
        ms(250),
        vec![Call::put("Y", &[(&a(), "a1")])],
        &o,
    );
    s.run_until(ms(250));
    assert_eq!(s.node(NodeId(0)).leader(), Some(NodeId(0)));
    assert!(o.committed("S"), "{}", o.render());
    let mut now = ms(250);
    while !batch_of_n1_reached_both_followers(&s) {
        assert!(now < ms(300), "n1's batch never reached both followers");
        now += us(10);
        s.run_until(now);
    }
    s.crash(NodeId(0));
    // Spawned now, the client sleeps from now.
    let z = Call::get("Z", &[&a(), &b(), &c()]);
    spawn_one_shot_client(&mut s, 2, ms(200), vec![z], &o);
    s.run_until(ms(500));
    golden.check(&s, &o, "leader_crash_mid_batch");
    (o, s)
}

fn assert_leader_crash<P: Protocol>(o: &Observed, s: &Simulation<P>) {
    assert_eq!(
        o.of("X"),
        r#"read 1/1 = "b0"; read 2/1 = "c0"; write 1/1 = "c0"; write 2/1 = "b0"; committed"#
    );
    assert_eq!(o.of("Y"), r#"write 0/1 = "a1"; committed"#);
    assert_eq!(o.reads("Z"), vec![some("a1"), some("c0"), some("b0")]);
    assert!(o.committed("Z"));
    assert!(!s.is_up(NodeId(0)));
    for n in [1, 2] {
        assert_eq!(s.node(NodeId(n)).leader(), Some(NodeId(1)), "n{n}");
    }
    // The batch survived in the followers' logs: its origin never had to propose it again.
    assert_eq!(counter(s, 1, "batches_reproposed"), 0);
}

#[test]
fn calvin_leader_crash_mid_batch() {
    let (o, s) = leader_crash::<Calvin>(&CALVIN);
    assert_leader_crash(&o, &s);
}

#[test]
fn s_smr_leader_crash_mid_batch() {
    let (o, s) = leader_crash::<SSmr>(&S_SMR);
    assert_leader_crash(&o, &s);
}

#[test]
fn sparkle_leader_crash_mid_batch() {
    let (o, s) = leader_crash::<Sparkle>(&SPARKLE);
    assert_leader_crash(&o, &s);
}

// ----- (d) Speculation: a later run that missed an earlier write runs again (`sparkle`) -----

/// [`sim`]'s cluster running `sparkle` with `variant`.
fn sparkle_sim(variant: &str) -> Simulation<Sparkle> {
    sparkle_sim_on(variant, 3)
}

fn sparkle_sim_on(variant: &str, nodes: usize) -> Simulation<Sparkle> {
    let mut options = ProtocolOptions::default();
    options.settings.insert("variant".into(), variant.into());
    common::traced_sim_with::<Sparkle>("lan", 1, nodes, 2, options, one_shot::procedures())
}

/// `S` writes `a` and `b`; at 250 ms two clients of n0 swap them (`X1`, `X2`), cut into one
/// batch, `X1` first. At each partition both start at once: `X2`'s run reads its partition's
/// key speculatively (the version `S` wrote, with a read dependency) while `X1` is still
/// running. When `X1` installs its write, `X2` has missed it: it is aborted and runs again, now
/// over `X1`'s versions, and commits after it. Two swaps are the identity.
///
/// How `X2` gets its sibling's value depends on the variant. `cons`: only once `X2` is first
/// at the sibling's partition, so it never consumes a wrong one. `cc`: at once, speculatively,
/// from the replica of the sibling partition in its plane — the stale value its first instance
/// read (the paper's Fig. 5 situation): the sibling's next instance sends another value, and
/// the run that consumed the stale one is aborted too (a remote abort) and runs again; it
/// commits finally only once the final values confirm what it consumed.
#[test]
fn sparkle_a_later_run_that_missed_a_write_runs_again() {
    for variant in ["cons", "cc", "sc"] {
        let mut s = sparkle_sim(variant);
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
        let r = Call::get("R", &[&a(), &b()]);
        spawn_one_shot_client(&mut s, 2, ms(400), vec![r], &o);
        s.run_until(ms(450));
        assert_eq!(
            o.of("X1"),
            r#"read 0/1 = "a0"; read 1/1 = "b0"; write 0/1 = "b0"; write 1/1 = "a0"; committed"#,
            "{variant}"
        );
        assert_eq!(
            o.of("X2"),
            r#"read 0/1 = "b0"; read 1/1 = "a0"; write 0/1 = "a0"; write 1/1 = "b0"; committed"#,
            "{variant}"
        );
        assert_eq!(o.reads("R"), vec![some("a0"), some("b0")], "{variant}");
        let sum = |name| (0..3).map(|n| counter(&s, n, name)).sum::<u64>();
        assert!(
            sum("speculative_aborts") >= 1,
            "{variant}: X2 missed X1's write somewhere"
        );
        if variant == "cons" {
            assert_eq!(sum("speculative_values_sent"), 0);
            assert_eq!(sum("remote_aborts"), 0);
        } else {
            assert!(sum("speculative_values_sent") >= 1);
            assert!(
                sum("remote_aborts") >= 1,
                "a sibling consumed X2's stale value"
            );
        }
    }
}

/// Five swaps of distinct pairs of keys of p0 and p2 (`X1` … `X5`), cut into one batch, on four
/// nodes where no node holds both partitions (one that did would exchange the values with
/// itself at once, and its final values would outrun every confirmation):
/// nothing conflicts, so every run is right the first time, and what differs between the
/// variants is when a sub-transaction may commit finally. `cons`: only once each sibling is
/// the first not final at its partition and sends its reads then. `cc`: the runs consumed their
/// siblings' values speculatively at once, but still wait for them to come final. `sc`: once
/// `X1` and `X2` (or more) are speculatively committed at a partition, `X2` (and the later
/// ones) confirm their reads there conditionally (given what the ones before consumed); a
/// sibling that committed `X1` finally knows `X1`'s final inputs, so it can commit `X2` in the
/// same pass, before `X2`'s final values come (on "lan" they race the confirmations: some
/// commits go one way, some the other).
#[test]
fn sparkle_speculative_confirmation_commits_before_the_final_values() {
    let pair = |n| (Key::numbered(0, n), Key::numbered(2, n));
    for variant in ["cons", "cc", "sc"] {
        let mut s = sparkle_sim_on(variant, 4);
        common::assert_replicas(&s, &pair(1).0, &[0, 1]);
        common::assert_replicas(&s, &pair(1).1, &[2, 3]);
        let o = Observed::default();
        let mut setup = Vec::new();
        for (n, name) in [(1, "S1"), (2, "S2"), (3, "S3"), (4, "S4"), (5, "S5")] {
            let (x, y) = pair(n);
            setup.push(Call::put(name, &[(&x, "x"), (&y, "y")]));
        }
        spawn_one_shot_client(&mut s, 0, ms(200), setup, &o);
        for (n, name) in [(1, "X1"), (2, "X2"), (3, "X3"), (4, "X4"), (5, "X5")] {
            let (x, y) = pair(n);
            let at = us(250_000 + 10 * n);
            spawn_one_shot_client(&mut s, 0, at, vec![Call::swap(name, &x, &y)], &o);
        }
        s.run_until(ms(450));
        for name in ["X1", "X2", "X3", "X4", "X5"] {
            assert!(o.committed(name), "{variant}: {name}");
        }
        let sum = |name| (0..3).map(|n| counter(&s, n, name)).sum::<u64>();
        assert_eq!(sum("speculative_aborts"), 0, "{variant}");
        let early = sum("committed_before_final_values");
        match variant {
            "sc" => {
                assert!(sum("confirmations_sent") >= 2, "{variant}");
                assert!(early >= 1, "{variant}");
            }
            _ => {
                assert_eq!(sum("confirmations_sent"), 0, "{variant}");
                assert_eq!(early, 0, "{variant}");
            }
        }
    }
}

// ----- A node left behind (`common::horizons`) -----

/// `calvin` with `left_behind_ms=500`. n1 (a follower of the sequencer; replica of p0 and p1)
/// crashes at 300 ms, after `S` wrote `a` and `b`; a client of n0 then swaps them 40 times.
/// Unheard for half a second, n1 is left behind: n0 and n2 cut their logs and collect old
/// versions without it. Restarted at 2.5 s, n1's log ends below the leader's cut, so it
/// installs a snapshot of the cut and copies p0 and p1 from their other replicas instead of
/// running what it missed; then it runs the order from there like the others. A client of n1
/// reads both keys at the end: 40 swaps leave them as `S` wrote them, and every replica of
/// every partition holds the same state.
#[test]
fn calvin_a_node_left_behind_installs_a_snapshot_and_copies_its_partitions() {
    let mut options = ProtocolOptions::default();
    options
        .settings
        .insert("left_behind_ms".into(), "500".into());
    let mut s = common::traced_sim_with::<Calvin>("lan", 1, 3, 2, options, one_shot::procedures());
    let o = Observed::default();
    let mut calls = vec![Call::put("S", &[(&a(), "a0"), (&b(), "b0")])];
    for i in 0..40 {
        let name: &'static str = Box::leak(format!("X{i}").into_boxed_str());
        calls.push(Call::swap(name, &a(), &b()));
    }
    spawn_one_shot_client(&mut s, 0, ms(200), calls, &o);
    spawn_one_shot_client(&mut s, 1, ms(3500), vec![Call::get("R", &[&a(), &b()])], &o);
    s.run_until(ms(300));
    assert!(o.committed("S"));
    s.crash(NodeId(1));
    s.run_until(ms(2500));
    assert!(o.committed("X39"), "the swaps commit while n1 is down");
    let cut_while_down = counter(&s, 0, "raft_entries_compacted");
    assert!(cut_while_down > 0, "n0 cut its log without n1");
    s.restart(NodeId(1));
    s.run_until(ms(4000));
    assert_eq!(counter(&s, 1, "raft_snapshots_installed"), 1);
    assert_eq!(counter(&s, 1, "partitions_copied"), 2);
    assert!(counter(&s, 0, "raft_snapshots_sent") >= 1);
    assert_eq!(o.reads("R"), vec![some("a0"), some("b0")]);
    assert!(o.committed("R"));
    for (p, nodes) in [(0, [0, 1]), (1, [1, 2])] {
        let digest = |n: u32| {
            s.node(NodeId(n))
                .state_digests()
                .into_iter()
                .find(|(q, _)| q.0 == p)
                .map(|(_, d)| d)
        };
        assert_eq!(digest(nodes[0]), digest(nodes[1]), "p{p}'s replicas differ");
    }
}
