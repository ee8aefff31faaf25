//! `augur check` end to end, through its library API: every protocol passes its own claim under
//! faults, every mutant is caught within its first 50 seeds, one seed always replays the same
//! history, and the protocols with a sequencer survive its leader's crashes.

use augur::check::{CheckArgs, CheckConfig};
use augur::faults::FaultSpec;
use augur_check::SolverBudget;
use augur_protocols::registry::{PROTOCOLS, Promise};

fn config(protocol: &str, workload: &str, seeds: &str, mutant: Option<&str>) -> CheckConfig {
    config_over(protocol, workload, seeds, mutant, "ring")
}

fn config_over(
    protocol: &str,
    workload: &str,
    seeds: &str,
    mutant: Option<&str>,
    placement: &str,
) -> CheckConfig {
    args(protocol, workload, seeds, mutant, placement)
        .validate()
        .expect("valid arguments")
}

/// [`config_over`] with one workload setting (`key=value`).
fn with_setting(
    protocol: &str,
    workload: &str,
    seeds: &str,
    mutant: Option<&str>,
    placement: &str,
    setting: &str,
) -> CheckConfig {
    let mut a = args(protocol, workload, seeds, mutant, placement);
    a.set = vec![setting.to_string()];
    a.validate().expect("valid arguments")
}

fn args(
    protocol: &str,
    workload: &str,
    seeds: &str,
    mutant: Option<&str>,
    placement: &str,
) -> CheckArgs {
    CheckArgs {
        protocol: protocol.into(),
        input: None,
        level: None,
        workload: workload.into(),
        seeds: seeds.into(),
        faults: "all".into(),
        history: None,
        mutant: mutant.map(str::to_string),
        nodes: 3,
        replication: None,
        placement: placement.into(),
        latency: "3dc".into(),
        clients: 3,
        duration: 4.0,
        set: Vec::new(),
        keep_going: false,
        verbose: false,
        solver_seconds: 10.0,
        solver_steps: 2_000_000,
        txn_form: None,
    }
}

/// The first seed of `config` that fails, if any.
fn first_failure(config: &CheckConfig) -> Option<(u64, String)> {
    for seed in config.seeds.clone() {
        let outcome = config.run_seed(seed).expect("seed runs");
        if !outcome.passed() {
            let why = outcome
                .report
                .violations()
                .next()
                .map(|a| a.to_string())
                .or_else(|| outcome.liveness.clone().err())
                .or_else(|| outcome.promises.clone().err())
                .unwrap_or_default();
            return Some((seed, why));
        }
    }
    None
}

#[test]
fn every_protocol_keeps_its_claim_under_faults() {
    for p in PROTOCOLS {
        for workload in ["list-append", "rw-register", "bank"] {
            let c = config(p.name, workload, "1..6", None);
            if let Some((seed, why)) = first_failure(&c) {
                panic!("{} on {workload}, seed {seed}: {why}", p.name);
            }
        }
    }
}

/// Consistent hashing spreads many partitions unevenly over the nodes, where the ring gave
/// each node one; no protocol may depend on the ring's layout.
#[test]
fn every_protocol_keeps_its_claim_over_a_hash_placement() {
    for p in PROTOCOLS {
        for workload in ["list-append", "rw-register", "bank"] {
            let c = config_over(p.name, workload, "1..6", None, "hash");
            if let Some((seed, why)) = first_failure(&c) {
                panic!("{} on {workload} over hash, seed {seed}: {why}", p.name);
            }
        }
    }
}

#[test]
fn nocc_shows_the_anomalies_it_allows() {
    let c = config("nocc", "list-append", "1..3", None);
    let mut allowed = 0;
    for seed in c.seeds.clone() {
        let outcome = c.run_seed(seed).unwrap();
        assert!(outcome.passed(), "nocc claims nothing, so nothing fails");
        allowed += outcome.report.anomalies.len();
    }
    assert!(allowed > 0, "nocc under contention must show anomalies");
}

/// `config` with `promises` lent to its protocol, which does not list them.
fn promising(mut config: CheckConfig, promises: &'static [Promise]) -> CheckConfig {
    let mut info = *config.info;
    info.promises = promises;
    config.info = Box::leak(Box::new(info));
    config
}

/// The timestamp promises reach `run_seed` with the run's clock skew. `2pl`'s commit timestamps
/// keep both: every node holding a lock votes a timestamp above every commit it has installed,
/// and holds its locks until the decision. `occ` validates its reads without locking them, so
/// under skew a reader stamped by a fast node's vote can be stamped above the writer that then
/// overwrote what it read (an `rw` edge backwards; seed 60 is the first, fail-over off). `walter` propagates commits
/// asynchronously, so its read-only transactions may miss long-acknowledged updates.
#[test]
fn timestamp_promises_are_checked_on_the_runs() {
    use Promise::{BoundedStaleness, TimestampsOrderDependencies};
    let both = &[TimestampsOrderDependencies, BoundedStaleness];
    let kept = promising(config("2pl", "list-append", "1..5", None), both);
    assert_eq!(first_failure(&kept), None);
    // Fail-over off: the backward edge is `occ`'s, not fail-over's, and without the lease
    // waits and master crashes the seeds it shows on stay as they were measured.
    let occ = with_setting(
        "occ",
        "list-append",
        "1..100",
        None,
        "ring",
        "protocol.failover=off",
    );
    let backwards = promising(occ, both);
    let (seed, why) = first_failure(&backwards).expect("occ's rw edges go backwards under skew");
    assert!(why.contains("go against commit timestamps"), "{why}");
    eprintln!("occ: seed {seed}: {why}");
    let mut stale = promising(
        config("walter", "list-append", "1..10", None),
        &[BoundedStaleness],
    );
    // Fault-free, so that what it misses is replication lag alone.
    stale.faults = FaultSpec::default();
    let (seed, why) = first_failure(&stale).expect("walter's reads are stale");
    assert!(why.contains("stale read"), "{why}");
    eprintln!("walter: seed {seed}: {why}");
}

#[test]
fn every_mutant_is_caught_within_50_seeds() {
    every_mutant_is_caught_over("ring");
}

/// As above over consistent hashing, whose uneven spread of the few keys the check workloads use
/// must not hide a broken protocol. As long as the test above, so run on demand.
#[test]
#[ignore = "as long as every_mutant_is_caught_within_50_seeds; run with --ignored"]
fn every_mutant_is_caught_within_50_seeds_over_a_hash_placement() {
    every_mutant_is_caught_over("hash");
}

/// Mutants whose anomaly needs a fault mix of its own: each is checked by its own test below.
const CAUGHT_UNDER_THEIR_OWN_FAULTS: &[(&str, &str)] = &[
    ("clocksi-rep", "no-lease"),
    ("clocksi-rep", "no-epoch-check"),
    ("calvin", "answer-below-floor"),
];

/// `clocksi-rep` with fail-over on, `list-append` from 4 clients for 10 s on a LAN, under
/// `faults`, running `mutant` if given: where fail-over's own mutants are caught.
fn failover_on_lan(faults: &str, seeds: &str, mutant: Option<&str>) -> CheckConfig {
    let mut a = args("clocksi-rep", "list-append", seeds, mutant, "ring");
    a.faults = faults.into();
    a.latency = "lan".into();
    a.clients = 4;
    a.duration = 10.0;
    a.set = vec!["protocol.failover=on".to_string()];
    a.validate().expect("valid arguments")
}

/// A master deposed while it was paused, and serving without a lease, is caught on a LAN, where
/// its clients' one-shot transactions mix its stale reads with fresh ones (on 3dc the window
/// is rarely reached).
#[test]
fn a_master_serving_without_a_lease_is_caught_under_pauses() {
    let (seed, why) = first_failure(&failover_on_lan("pause", "1..20", Some("no-lease")))
        .expect("no-lease is caught within 20 seeds");
    eprintln!("clocksi-rep no-lease caught at seed {seed}: {why}");
    assert_eq!(first_failure(&failover_on_lan("pause", "1..5", None)), None);
}

/// A master that certifies whatever epoch a prepare carries is caught once masters change
/// while both are alive: after a handback, the old master, until it applies it, certifies at
/// the old epoch while the new one certifies at the new, and each one's slave takes the
/// other's prepares (a lost update). It needs master crashes, their handbacks and
/// partitions together, on a LAN (caught at seed 43).
#[test]
fn a_master_certifying_at_an_old_epoch_is_caught_after_a_handback() {
    let (seed, why) = first_failure(&failover_on_lan("all", "1..50", Some("no-epoch-check")))
        .expect("no-epoch-check is caught within 50 seeds");
    eprintln!("clocksi-rep no-epoch-check caught at seed {seed}: {why}");
    assert_eq!(
        first_failure(&failover_on_lan("all", &format!("{seed}"), None)),
        None
    );
}

/// `calvin` with nodes left behind after half a second of silence (`left_behind_ms=500`),
/// `list-append` from 4 clients for 10 s on a LAN under every fault: a node crashed or cut off
/// longer than that is left behind, then installs a snapshot of the sequencer's log and copies
/// its partitions from a replica. A copy brings only the newest version of each key, so the
/// replica that took it must not answer a sibling's value from before it: the mutant that does
/// hands out a stale or absent value (caught at seed 7; found that way, at seed 4, as a bug of
/// the first version of the copy).
#[test]
fn a_replica_answering_from_below_its_copy_is_caught() {
    let run = |seeds: &str, mutant: Option<&str>| {
        let mut a = args("calvin", "list-append", seeds, mutant, "ring");
        a.latency = "lan".into();
        a.clients = 4;
        a.duration = 10.0;
        a.set = vec!["protocol.left_behind_ms=500".to_string()];
        a.validate().expect("valid arguments")
    };
    let (seed, why) = first_failure(&run("1..20", Some("answer-below-floor")))
        .expect("answer-below-floor is caught within 20 seeds");
    eprintln!("calvin answer-below-floor caught at seed {seed}: {why}");
    assert_eq!(first_failure(&run(&format!("1..{seed}"), None)), None);
}

/// Two seeds where a node was left behind with one partition far behind its replicas and the
/// other ahead of them: when catching up made every partition of the node wait for a copy
/// through a position past the one ahead, that partition stopped answering the values its
/// replicas needed to get there, and every client stopped committing. Both pass now that a
/// node's partitions already past the position run on.
#[test]
fn a_node_left_behind_with_a_partition_ahead_catches_up_without_stalling_the_cluster() {
    for seed in ["38", "95"] {
        let mut a = args("calvin", "bank", seed, None, "ring");
        a.latency = "lan".into();
        a.clients = 4;
        a.duration = 10.0;
        a.set = vec!["protocol.left_behind_ms=500".to_string()];
        let config = a.validate().expect("valid arguments");
        assert_eq!(first_failure(&config), None, "seed {seed}");
    }
}

fn every_mutant_is_caught_over(placement: &str) {
    use augur_protocols::registry::{MASKED, SCENARIO_ONLY, UNPROVEN};
    for p in PROTOCOLS {
        for (mutant, what) in p.mutants {
            if CAUGHT_UNDER_THEIR_OWN_FAULTS.contains(&(p.name, mutant)) {
                continue;
            }
            if what.starts_with(SCENARIO_ONLY)
                || what.starts_with(MASKED)
                || what.starts_with(UNPROVEN)
            {
                // Shown by the protocol's scenario tests, not by random histories; or a
                // mechanism whose hole another one closes too; or not shown caught yet.
                continue;
            }
            // The third is list-append with dependent appends (the key written chosen by a
            // list read first), which only a protocol that predicts its keys can get wrong.
            let workloads = [
                ("list-append", None),
                ("rw-register", None),
                ("list-append", Some("dependent_fraction=0.5")),
            ];
            // A protocol whose masters fail over runs its mechanism's mutants with fail-over
            // off, as they were found (fail-over's own mutants have tests of their own): with
            // it on, `all` adds pauses and master crashes, each a second or more without
            // commits on a partition, and this 4-second run keeps too few commits (27 per seed
            // against 47) for `no-clock-wait` to show within 50 seeds, though fail-over does
            // not hide it (docs/architecture/availability.md).
            let caught = workloads.iter().find_map(|(w, setting)| {
                let mut a = args(p.name, w, "1..50", Some(mutant), placement);
                a.set.extend(setting.map(str::to_string));
                if p.fails_over() {
                    a.set.push("protocol.failover=off".to_string());
                }
                let c = a.validate().expect("valid arguments");
                first_failure(&c).map(|(s, _)| (w, setting, s))
            });
            assert!(
                caught.is_some(),
                "{} mutant {mutant} ({what}) passed 50 seeds of list-append (with and without \
                 dependent appends) and rw-register over {placement}",
                p.name
            );
            eprintln!("{placement}: {} {mutant} caught by {caught:?}", p.name);
        }
    }
}

#[test]
fn one_seed_replays_the_same_history_byte_for_byte() {
    let c = config("clocksi-rep", "list-append", "7", None);
    let write = || {
        let mut out = Vec::new();
        augur_check::jsonl::write(&c.run_seed(7).unwrap().history, &mut out).unwrap();
        out
    };
    let (a, b) = (write(), write());
    assert!(a.len() > 1000, "a real history");
    assert!(a == b, "same seed, different history");
}

/// Each protocol with a sequencer (`s-smr`, `calvin`) with the `leader-crash` fault alone: in
/// each seed the node leading the sequencer's
/// Raft group is crashed at a random moment (its epochs are 10 ms, so mid-epoch, with batches
/// proposed and not yet committed) and restarted up to 1.5 s later, several times. A new leader
/// is elected and ordering resumes (the clients commit again: the liveness phase), nothing
/// acknowledged is lost (the history checks at strict serializability), and the replicas of
/// every partition end with the same state (the replicas-agree check).
#[test]
fn sequencers_survive_their_leader_crashing_mid_epoch() {
    for p in PROTOCOLS.iter().filter(|p| p.sequencer()) {
        let mut a = args(p.name, "list-append", "1..8", None, "ring");
        // On 3dc the sequencer's election timeouts are twice the LAN's (scaled to the voters'
        // round trips): the election after the crash takes a second or more of the run.
        a.duration = 8.0;
        let mut c = a.validate().expect("valid arguments");
        c.faults = FaultSpec::parse("leader-crash", c.info).expect("a sequencer");
        survives(&c);
    }
    let refused = FaultSpec::parse("leader-crash", &augur_protocols::occ::INFO);
    assert!(refused.is_err(), "occ has no sequencer");
}

/// `calvin` with dependent transactions (half the appends write the key a list read picks),
/// under every fault: the dry run mispredicts their keys, the run at their position ends with
/// no effect everywhere, and reconnaissance predicts them again, without losing or duplicating
/// anything (the history checks at strict serializability) and with commits.
///
/// On `lan`: on `3dc` a reconnoitred transaction pays wide-area round trips for its remote reads
/// and a second trip through the order, and the short run commits too few to say much.
#[test]
fn calvin_reconnoitres_dependent_transactions_under_faults() {
    let mut a = args("calvin", "list-append", "1..8", None, "ring");
    a.set = vec!["dependent_fraction=0.5".into()];
    a.latency = "lan".into();
    survives(&a.validate().expect("valid arguments"));
}

/// Every seed of `c` passes, with more than 50 commits each.
fn survives(c: &CheckConfig) {
    let name = c.info.name;
    for seed in c.seeds.clone() {
        let outcome = c.run_seed(seed).expect("seed runs");
        assert!(
            outcome.passed(),
            "{name} seed {seed}: {:?} {:?}",
            outcome.liveness,
            outcome.report.violations().next().map(|a| a.to_string())
        );
        let committed = outcome
            .history
            .txns
            .iter()
            .filter(|t| {
                matches!(
                    t.outcome,
                    augur_types::history::RecordedOutcome::Committed { .. }
                )
            })
            .count();
        assert!(
            committed > 50,
            "{name} seed {seed}: only {committed} commits"
        );
    }
}

/// The serial-replay oracle on the protocols that promise it: each committed procedure run
/// again in position order gives what its client was told, and the replicas end in the state
/// the replay ends in. Fault-free, so no outcome is lost and the whole history is replayed; and
/// a history altered three ways (a read's value, two conflicting positions swapped, two
/// attempts at one position) is refused.
#[test]
fn order_then_execute_histories_replay_serially() {
    use augur::serial_replay::replay;
    use augur_types::history::{Op, RecordedOutcome};
    let procedures = augur::procedures();
    for p in PROTOCOLS
        .iter()
        .filter(|p| p.promises.contains(&Promise::SerialReplay))
    {
        for workload in ["list-append", "bank"] {
            let mut c = config(p.name, workload, "1..3", None);
            c.faults = FaultSpec::default();
            for seed in c.seeds.clone() {
                let outcome = c.run_seed(seed).expect("seed runs");
                assert!(outcome.passed(), "{} {workload} seed {seed}", p.name);
                let replayed = replay(&outcome.history, &procedures).expect("replays");
                assert!(replayed.committed > 50, "{}", replayed.committed);
                assert_eq!(replayed.checked, replayed.committed);
                assert!(replayed.final_state.is_some());
            }
        }
        let mut c = config(p.name, "list-append", "1", None);
        c.faults = FaultSpec::default();
        let history = c.run_seed(1).expect("seed runs").history;
        let committed = |t: &&augur_types::history::TxnRecord| t.is_committed();
        // A read that returned something else.
        let mut altered = history.clone();
        let read = altered
            .txns
            .iter_mut()
            .filter(|t| t.is_committed())
            .flat_map(|t| t.ops.iter_mut())
            .find_map(|op| match op {
                Op::Read { value, .. } if value.is_some() => Some(value),
                _ => None,
            })
            .expect("a committed read of a value");
        *read = Some("9999".into());
        let why = replay(&altered, &procedures).err().expect("refused");
        assert!(why.contains("run again it issues"), "{why}");
        // Two attempts that touch one key, their positions swapped.
        let mut swapped = history.clone();
        let writers: Vec<usize> = swapped
            .txns
            .iter()
            .filter(committed)
            .filter(|t| t.ops.iter().any(|op| matches!(op, Op::Write { .. })))
            .map(|t| t.index)
            .collect();
        let key_of = |i: usize| {
            swapped.txns[i].ops.iter().find_map(|op| match op {
                Op::Write { key, .. } => Some(key.clone()),
                _ => None,
            })
        };
        let (a, b) = writers
            .iter()
            .flat_map(|a| writers.iter().map(move |b| (*a, *b)))
            .find(|(a, b)| a != b && key_of(*a) == key_of(*b))
            .expect("two writers of one key");
        let ts = |t: &augur_types::history::TxnRecord| match t.outcome {
            RecordedOutcome::Committed { commit_ts } => commit_ts,
            _ => unreachable!(),
        };
        let (ta, tb) = (ts(&swapped.txns[a]), ts(&swapped.txns[b]));
        swapped.txns[a].outcome = RecordedOutcome::Committed { commit_ts: tb };
        swapped.txns[b].outcome = RecordedOutcome::Committed { commit_ts: ta };
        assert!(replay(&swapped, &procedures).is_err(), "{} swapped", p.name);
        // Two attempts at one position.
        let mut twice = history.clone();
        twice.txns[b].outcome = RecordedOutcome::Committed { commit_ts: ta };
        let why = replay(&twice, &procedures).err().expect("refused");
        assert!(why.contains("both committed at position"), "{why}");
    }
}

/// A history from another tool: checked at the level `--level` names, else the one its header
/// names; with neither known, a clear error that asks for `--level`.
#[test]
fn a_history_from_elsewhere_is_checked_at_the_level_named() {
    let dir = tempfile::tempdir().unwrap();
    let write = |isolation: &str| {
        let path = dir
            .path()
            .join(format!("{}.jsonl", isolation.replace(' ', "-")));
        let header = format!(
            r#"{{"format":1,"protocol":"elsewhere","workload":"rw-register","seed":0,"isolation":"{isolation}","faults":"none"}}"#
        );
        // T0 and T1 each read x and y as nil and write one of them: write skew.
        let record = |i: usize, key: &str| {
            format!(
                r#"{{"index":{i},"client":{i},"txn":null,"name":"t","read_only":false,"invoke_us":0,"complete_us":10,"ops":[{{"op":"read","key":"x","value":null}},{{"op":"read","key":"y","value":null}},{{"op":"write","key":"{key}","value":"{i}"}}],"outcome":{{"status":"committed","commit_ts":{i}}}}}"#
            )
        };
        std::fs::write(
            &path,
            format!("{header}\n{}\n{}\n", record(0, "x"), record(1, "y")),
        )
        .unwrap();
        path
    };
    let skew = write("snapshot isolation");
    // The header's level: snapshot isolation allows write skew.
    augur::check::check_file(&skew, None, false, SolverBudget::default())
        .expect("valid at snapshot isolation");
    // A level named: serializability does not.
    let err = augur::check::check_file(&skew, Some("Serializable"), false, SolverBudget::default())
        .unwrap_err();
    assert!(
        err.to_string().contains("proscribed by serializable"),
        "{err}"
    );
    // Neither the protocol nor the header's level is known: the user is asked for --level.
    let unknown = write("whatever");
    let err = augur::check::check_file(&unknown, None, false, SolverBudget::default()).unwrap_err();
    assert!(
        err.downcast_ref::<augur::BadInput>().is_some() && err.to_string().contains("--level"),
        "{err}"
    );
    let err = augur::check::check_file(
        &unknown,
        Some("linearizable"),
        false,
        SolverBudget::default(),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("unknown isolation level 'linearizable'"),
        "{err}"
    );
}

/// A history whose verdict rests on placements of blind writes: with the solver's budget spent
/// before they are decided, `augur check --input` says undecided (exit status 3), never valid;
/// with the default budget it finds the violation.
#[test]
fn check_input_reports_an_undecided_history_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("blind.jsonl");
    let header = r#"{"format":1,"protocol":"elsewhere","workload":"rw-register","seed":0,"isolation":"serializable","faults":"none"}"#;
    // T0 and T1 write x blind; T2 reads T0's x and T1's y, T3 reads T1's x and T0's z: whichever
    // of the two x writes comes first, one reader missed it (a G-single in every placement).
    let op = |op: &str, key: &str, value: Option<&str>| match value {
        Some(v) => format!(r#"{{"op":"{op}","key":"{key}","value":"{v}"}}"#),
        None => format!(r#"{{"op":"{op}","key":"{key}","value":null}}"#),
    };
    let record = |i: usize, ops: Vec<String>| {
        format!(
            r#"{{"index":{i},"client":{i},"txn":null,"name":"t","read_only":false,"invoke_us":0,"complete_us":10,"ops":[{}],"outcome":{{"status":"committed","commit_ts":{i}}}}}"#,
            ops.join(",")
        )
    };
    let lines = [
        header.to_string(),
        record(
            0,
            vec![op("write", "x", Some("1")), op("write", "z", Some("1"))],
        ),
        record(
            1,
            vec![op("write", "x", Some("2")), op("write", "y", Some("2"))],
        ),
        record(
            2,
            vec![op("read", "x", Some("1")), op("read", "y", Some("2"))],
        ),
        record(
            3,
            vec![op("read", "x", Some("2")), op("read", "z", Some("1"))],
        ),
    ];
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let spent = SolverBudget {
        steps: 0,
        ..SolverBudget::default()
    };
    let err = augur::check::check_file(&path, None, false, spent).unwrap_err();
    assert!(
        err.downcast_ref::<augur::check::Undecided>().is_some(),
        "{err}"
    );
    let err = augur::check::check_file(&path, None, false, SolverBudget::default()).unwrap_err();
    assert!(
        err.downcast_ref::<augur::check::Undecided>().is_none()
            && err.to_string().contains("proscribed by serializable"),
        "{err}"
    );
}

/// `sparkle` in each variant of the paper's Fig. 9 and with each switch that must not break it
/// (the speculation window shrunk to 1; reads that do not wait for an earlier lock holder; no
/// preemption; read-only transactions ordered instead of served by the fast path, which makes
/// its claim strict serializability), under every fault: every seed passes the claim under
/// those settings.
#[test]
fn sparkle_passes_its_claim_in_every_variant_and_switch() {
    let settings = [
        "protocol.variant=cons",
        "protocol.variant=cc",
        "protocol.variant=sc",
        "protocol.window=1",
        "protocol.read_waits=off",
        "protocol.preemption=off",
        "protocol.read_only=ordered",
    ];
    for setting in settings {
        for workload in ["list-append", "rw-register"] {
            let c = with_setting("sparkle", workload, "1..6", None, "ring", setting);
            let claim = c.info.claim(&c.protocol_settings);
            if setting.ends_with("read_only=ordered") {
                assert_eq!(claim, augur_types::IsolationLevel::StrictSerializable);
            }
            let failed = first_failure(&c);
            assert!(
                failed.is_none(),
                "sparkle {setting} on {workload}: {failed:?}"
            );
        }
    }
}
