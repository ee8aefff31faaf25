//! The `augur` command as a user meets it: bad input is refused with the valid choices and exit
//! status 2, and a short benchmark writes the documented `summary.json`.

use crate::{augur, output_bounded};
use std::process::Command;

#[test]
fn bad_names_exit_2_and_list_the_valid_choices() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["bench", "--protocol", "spanner"],
            "valid protocols: nocc, clocksi-rep",
        ),
        (
            &["check", "--protocol", "spanner"],
            "valid protocols: nocc, clocksi-rep",
        ),
        (
            &["check", "--protocol", "nocc", "--workload", "synthetic-str"],
            "checkable workloads: list-append, rw-register, bank",
        ),
        (
            &["check", "--protocol", "nocc", "--faults", "meteor"],
            "valid: none, all, or a list of delay",
        ),
        (
            &["check", "--protocol", "clocksi-rep", "--mutant", "typo"],
            "valid mutants: no-prepared-wait",
        ),
        (
            &["check", "--protocol", "nocc", "--seeds", "9..3"],
            "the range is empty",
        ),
        (
            &["check", "--input", "/nonexistent/history.jsonl"],
            "cannot read",
        ),
        (
            &["bench", "--placement", "chord"],
            "unknown placement 'chord'; valid placements: ring, hash",
        ),
        (
            &[
                "check",
                "--protocol",
                "nocc",
                "--placement",
                "hash:vnodes=0",
            ],
            "vnodes must be a number in 1..=4096",
        ),
        (
            &["nemesis", "--placement", "chord"],
            "valid placements: ring, hash",
        ),
        (
            &[
                "cluster",
                "init",
                "--dir",
                "/nonexistent/augur-cluster",
                "--nodes",
                "3",
                "--placement",
                "hash:partitions=2",
            ],
            "master of no partition",
        ),
        (
            &["bench", "--workload", "tpcx"],
            "valid workloads: synthetic-str",
        ),
        (
            &["bench", "--latency", "mars"],
            "valid profiles: lan, 3dc, ec2-9dc",
        ),
        (
            &["bench", "--set", "hotness=1"],
            "valid settings: contention",
        ),
        (
            &["bench", "--set", "contention=extreme"],
            "none, low, high-local, high-both",
        ),
        (
            &[
                "bench",
                "--nodes",
                "2",
                "--latency",
                "ec2-9dc",
                "--dcs",
                "3",
            ],
            "data centres",
        ),
    ];
    for (args, expected) in cases {
        let out = augur(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
    }
}

#[test]
fn protocols_lists_each_with_its_isolation_level_and_request_forms() {
    let out = augur(&["protocols"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("clocksi-rep") && text.contains("snapshot isolation"),
        "{text}"
    );
    assert!(text.contains("nocc") && text.contains("none"), "{text}");
    // Every protocol says which request forms it serves: both, or, for an order-then-execute
    // protocol, one-shot with interactive transactions only as blind writes.
    let both = text.matches("requests: interactive, one-shot\n").count();
    let blind = text
        .matches("requests: one-shot; interactive for blind writes only\n")
        .count();
    let protocols = augur_protocols::registry::PROTOCOLS;
    assert_eq!(both + blind, protocols.len(), "{text}");
    assert_eq!(
        blind,
        protocols.iter().filter(|p| p.reads_only_one_shot()).count(),
        "{text}"
    );
    assert!(text.contains("engine: common::lock_commit\n"), "{text}");
    // The PostgreSQL peers `bench` accepts are listed too.
    assert!(text.contains("postgres-serializable"), "{text}");
}

#[test]
fn protocols_markdown_prints_the_registrys_table() {
    let out = augur(&["protocols", "--markdown"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        augur_protocols::registry::markdown_table()
    );
}

#[test]
fn a_short_bench_writes_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().to_str().unwrap();
    let out = augur(&[
        "bench",
        "--protocol",
        "nocc,clocksi-rep",
        "--nodes",
        "2",
        "--duration",
        "1",
        "--warmup",
        "0.2",
        "--clients",
        "2",
        "--out",
        out_dir,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("summary.json")).unwrap()).unwrap();
    let per_txn = std::fs::read_to_string(dir.path().join("per_txn.csv")).unwrap();
    assert!(per_txn.starts_with("protocol,type,committed,aborted,user_rollbacks"));
    assert!(per_txn.lines().count() >= 2, "{per_txn}");
    let samples = std::fs::read_to_string(dir.path().join("samples.csv")).unwrap();
    assert!(samples.starts_with("protocol,second,warmup,committed"));
    let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("Committed transactions per second"));
    let results = summary["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    for (r, name) in results.iter().zip(["nocc", "clocksi-rep"]) {
        assert_eq!(r["protocol"], name);
        assert_eq!(r["workload"], "synthetic-str");
        assert!(r["committed"].as_u64().unwrap() > 0, "{r}");
        for field in [
            "aborted",
            "throughput_tps",
            "abort_rate",
            "aborts_by_reason",
        ] {
            assert!(!r[field].is_null(), "{field} missing in {r}");
        }
        for p in ["p50", "p90", "p99", "p999", "max"] {
            assert!(r["latency_ms"][p].as_f64().unwrap() > 0.0, "{p} in {r}");
        }
    }
    assert_eq!(summary["seed"], 1);
    assert_eq!(summary["config"]["nodes"], 2);
    assert_eq!(summary["config"]["workload_settings"]["contention"], "low");
}

/// Speculating protocols report STR §8's metrics: perceived latency, misspeculations, the
/// nodes' speculation counters (read over the client protocol, so over TCP too) and the
/// degrees the clients used.
#[test]
fn a_speculating_bench_reports_perceived_latency_and_speculation_counters() {
    for transport in ["inproc", "tcp", "sim"] {
        let dir = tempfile::tempdir().unwrap();
        let out = augur(&[
            "bench",
            "--protocol",
            "clocksi-rep,str:speculation=reads+commits:2,planet",
            "--latency",
            "3dc",
            // Low contention: under high contention a CPU-starved runner (CI runs these tests
            // side by side on two cores) once committed nothing at all over TCP in 2.5 s, so
            // there was no latency to compare.
            "--set",
            "contention=low",
            "--duration",
            "3",
            "--warmup",
            "0.5",
            "--clients",
            "3",
            "--runtime",
            transport,
            "--out",
            dir.path().to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("summary.json")).unwrap())
                .unwrap();
        let results = summary["results"].as_array().unwrap();
        assert!(results[0]["speculation_stats"].is_null(), "clocksi-rep");
        let str_run = &results[1];
        assert_eq!(str_run["protocol"], "str:speculation=reads+commits:2");
        assert_eq!(str_run["speculation"], "reads+commits:2");
        let s = &str_run["speculation_stats"];
        assert!(s["spec_commits"].as_u64().unwrap() > 0, "{transport}: {s}");
        assert!(
            s["counters"]["spec_commits"].as_u64().unwrap() > 0,
            "{transport}: {s}"
        );
        assert!(s["counters"]["speculative_reads"].as_u64().is_some(), "{s}");
        let perceived = s["perceived_latency_ms"]["p50"].as_f64().unwrap();
        let final_p50 = str_run["latency_ms"]["p50"].as_f64().unwrap();
        assert!(perceived > 0.0 && perceived < final_p50, "{transport}: {s}");
        assert_eq!(s["degree_timeline"][0][1], "reads+commits:2");
        assert_eq!(results[2]["speculation"], "commits:1");
    }
}

/// `--runtime sim` runs the benchmark in virtual time with a CPU model: its results say they
/// are modelled, carry the model's accounts, pass the workload's audit, and repeat exactly
/// with the same seed; fewer cores model less throughput; bad model settings are refused.
#[test]
fn a_simulated_bench_is_modelled_checked_and_repeatable() {
    let run = |cores: &str| {
        let dir = tempfile::tempdir().unwrap();
        let out = augur(&[
            "bench",
            "--runtime",
            "sim",
            "--protocol",
            "clocksi-rep",
            "--workload",
            "bank",
            "--check",
            "--duration",
            "2",
            "--warmup",
            "0.5",
            "--clients",
            "4",
            "--set",
            &format!("sim.cores={cores}"),
            "--out",
            dir.path().to_str().unwrap(),
        ]);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("MODELLED in virtual time"), "{stdout}");
        let summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("summary.json")).unwrap())
                .unwrap();
        assert_eq!(summary["config"]["runtime"], "sim");
        summary["results"][0].clone()
    };
    // Everything but the real time the handlers took in this process is modelled.
    let modelled = |mut result: serde_json::Value| {
        if let Some(inputs) = result["modelled_cpu"]["inputs"].as_object_mut() {
            for kind in inputs.values_mut() {
                kind.as_object_mut().unwrap().remove("measured_us");
            }
        }
        result
    };
    let one = modelled(run("1"));
    assert_eq!(one, modelled(run("1")), "the same seed models the same run");
    assert!(
        one["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["passed"] == true)
    );
    let cpu = &one["modelled_cpu"];
    assert_eq!(cpu["model"]["cores"], 1);
    assert!(
        cpu["inputs"]["request"]["count"].as_u64().unwrap() > 0,
        "{cpu}"
    );
    assert!(
        cpu["inputs"]["message"]["writes"].as_u64().unwrap() > 0,
        "{cpu}"
    );
    let busy = cpu["utilization"][0].as_f64().unwrap();
    assert!(busy > 0.0 && busy <= 1.0, "{cpu}");
    let unlimited = run("unlimited");
    assert!(unlimited["modelled_cpu"].is_null());
    assert!(
        unlimited["throughput_tps"].as_f64().unwrap() > one["throughput_tps"].as_f64().unwrap(),
        "one core per node models less throughput than unlimited ones"
    );

    for (args, says) in [
        (
            &["--runtime", "sim", "--set", "sim.cores=0"][..],
            "sim.cores",
        ),
        (
            &["--runtime", "sim", "--set", "sim.cost.disk=1"][..],
            "unknown simulator setting",
        ),
        (&["--set", "sim.cores=4"][..], "need --runtime sim"),
    ] {
        let out = augur(&[&["bench"][..], args].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// Two no-wait optimistic clients on the same ten keys used to abort each other's retries
/// forever in the simulator (96–100% of attempts aborted, nothing committed under `rc` and
/// `dst-occ`): the randomized backoff before a retry breaks the tie, and the run still repeats
/// exactly with its seed. Without backoff (`--backoff-base-ms 0`) the livelock is back. Fail-over
/// is off: the configuration group's lease traffic jostles the two clients out of step by
/// chance (`rc` then aborts 75% of its attempts without backoff, not all), which is not what is
/// tested here.
#[test]
fn retries_back_off_so_two_conflicting_clients_do_not_livelock() {
    let run = |backoff: &[&str]| {
        let dir = tempfile::tempdir().unwrap();
        let args = [
            &[
                "bench",
                "--runtime",
                "sim",
                "--protocol",
                "occ:failover=off,rc:failover=off,dst-occ",
                "--workload",
                "ycsb-t",
                "--set",
                "keys=10",
                "--nodes",
                "2",
                "--clients",
                "1",
                "--duration",
                "2",
                "--warmup",
                "1",
                "--latency",
                "lan",
                "--out",
                dir.path().to_str().unwrap(),
            ][..],
            backoff,
        ]
        .concat();
        let out = augur(&args);
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let mut summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("summary.json")).unwrap())
                .unwrap();
        // Everything but the real time the handlers took in this process is modelled.
        for result in summary["results"].as_array_mut().unwrap() {
            if let Some(inputs) = result["modelled_cpu"]["inputs"].as_object_mut() {
                for kind in inputs.values_mut() {
                    kind.as_object_mut().unwrap().remove("measured_us");
                }
            }
        }
        summary
    };
    let summary = run(&[]);
    assert_eq!(summary["config"]["backoff_base_ms"], 0.25);
    assert_eq!(summary["config"]["backoff_cap_ms"], 20.0);
    let results = summary["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    for result in results {
        let committed = result["committed"].as_u64().unwrap();
        let abort_rate = result["abort_rate"].as_f64().unwrap();
        assert!(
            committed > 1000 && abort_rate < 0.5,
            "{}: {committed} committed, {abort_rate} aborted",
            result["protocol"]
        );
        assert!(result["retries"].as_u64().unwrap() > 0, "{result}");
    }
    assert_eq!(summary, run(&[]), "the same seed backs off alike");
    let at_once = run(&["--backoff-base-ms", "0", "--backoff-cap-ms", "0"]);
    let rc = &at_once["results"][1];
    assert_eq!(rc["protocol_name"], "rc");
    assert!(rc["abort_rate"].as_f64().unwrap() > 0.9, "{rc}");
}

#[test]
fn check_exits_1_on_an_anomaly_with_a_replay_command_and_0_when_valid() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("h.jsonl");
    let history = history.to_str().unwrap();
    let caught = augur(&[
        "check",
        "--protocol",
        "clocksi-rep",
        "--mutant",
        "no-ww-certification",
        "--seeds",
        "1..20",
        "--history",
        history,
    ]);
    let stdout = String::from_utf8_lossy(&caught.stdout);
    assert_eq!(caught.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("proscribed by snapshot isolation"),
        "{stdout}"
    );
    let replay = stdout
        .lines()
        .find_map(|l| l.strip_prefix("replay: augur "))
        .expect("a replay command");
    // The replay command reproduces the failure, and its history file is checkable on its own.
    let args: Vec<&str> = replay.split_whitespace().collect();
    let again = augur(&args);
    assert_eq!(again.status.code(), Some(1));
    let path = args[args.iter().position(|a| *a == "--history").unwrap() + 1];
    let checked = augur(&["check", "--input", path]);
    assert_eq!(checked.status.code(), Some(1));
    // The verdict comes right after the summary line, before any anomaly.
    let out = String::from_utf8_lossy(&checked.stdout);
    let second = out.lines().nth(1).unwrap_or_default();
    assert!(second.starts_with("  INVALID: "), "{out}");

    let valid = augur(&[
        "check",
        "--protocol",
        "clocksi-rep",
        "--workload",
        "bank",
        "--seeds",
        "1..3",
        "--faults",
        "all",
    ]);
    assert_eq!(
        valid.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&valid.stdout)
    );
}

/// `rococo` runs one-shot transactions as pieces whose keys it must know before running them.
/// RUBiS's interactions read keys that depend on what they read (an item's seller, the bids of
/// an index page): those run interactively, so the types commit and the audit holds (it once
/// committed nothing, every attempt refused as a read-only procedure that "writes").
#[test]
fn rococo_runs_rubis_interactions_whose_keys_depend_on_their_reads() {
    let (result, _) = sim_rubis_rococo("0");
    let per_type = result["per_type"].as_object().unwrap();
    for name in [
        "view-item",
        "view-user-info",
        "search-items-in-category",
        "browse-categories",
        "about-me",
        "store-bid",
    ] {
        let committed = per_type[name]["committed"].as_u64().unwrap();
        assert!(committed > 0, "rococo committed no {name}: {per_type:?}");
    }
    for (name, counts) in per_type {
        assert_eq!(
            counts["aborts_by_reason"].get("invalid_request"),
            None,
            "{name} was refused: {per_type:?}"
        );
    }
    assert!(
        result["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["passed"] == true),
        "{result}"
    );
    assert!(
        result["protocol_counters"]["not_one_shot"]
            .as_u64()
            .unwrap()
            > 0
    );
}

/// The summary counts the aborts the samples show: a transaction begun in the warm-up that
/// aborts over and over in the window is not left out of the totals. Here every client ends
/// the warm-up retrying `rococo`'s hot `store-bid` (its interactive pieces refuse each other),
/// and the summary once said 0 committed, 0 aborted, beside 70,000 aborts in `samples.csv`.
#[test]
fn the_summary_counts_the_aborts_the_samples_show() {
    let (result, samples) = sim_rubis_rococo("1");
    let measured_aborts: u64 = samples
        .lines()
        .skip(1)
        .map(|line| line.split(',').collect::<Vec<_>>())
        .filter(|f| f[2] == "false")
        .map(|f| f[4].parse::<u64>().unwrap())
        .sum();
    let aborted = result["aborted"].as_u64().unwrap();
    assert!(measured_aborts > 0, "{samples}");
    assert!(
        aborted >= measured_aborts,
        "summary says {aborted} aborted, samples.csv {measured_aborts} in the measured second"
    );
}

/// A simulated second of `rococo` on `rubis` (3 nodes) after `warmup` seconds: its summary
/// result and `samples.csv`.
fn sim_rubis_rococo(warmup: &str) -> (serde_json::Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = augur(&[
        "bench",
        "--runtime",
        "sim",
        "--protocol",
        "rococo",
        "--workload",
        "rubis",
        "--nodes",
        "3",
        "--duration",
        "1",
        "--warmup",
        warmup,
        "--check",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("summary.json")).unwrap()).unwrap();
    let samples = std::fs::read_to_string(dir.path().join("samples.csv")).unwrap();
    (summary["results"][0].clone(), samples)
}

#[test]
fn bench_check_records_the_audit_in_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let out = augur(&[
        "bench",
        "--protocol",
        "clocksi-rep",
        "--workload",
        "bank",
        "--duration",
        "1",
        "--warmup",
        "0.2",
        "--check",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("summary.json")).unwrap()).unwrap();
    let checks = summary["results"][0]["checks"].as_array().unwrap();
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["bank-total", "bank-no-negative"]);
    assert!(checks.iter().all(|c| c["passed"] == true));

    let refused = augur(&["bench", "--workload", "list-append", "--check"]);
    assert_eq!(refused.status.code(), Some(2));
}

/// The audited workloads with settings small enough for a test.
const AUDITED: [(&str, &[&str]); 3] = [
    (
        "tpcc",
        &["warehouses=2", "customers_per_district=300", "items=2000"],
    ),
    ("smallbank", &["customers=1000"]),
    ("bank", &[]),
];

/// `augur bench --check` of `protocols` on `workload` (with `sets`, and `extra` arguments):
/// requires it to succeed, every protocol to commit and every condition to hold (at least
/// two per protocol).
fn every_audit_holds(protocols: &str, workload: &str, sets: &[&str], extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "bench",
        "--protocol",
        protocols,
        "--workload",
        workload,
        "--check",
        "--out",
        dir.path().to_str().unwrap(),
    ];
    args.extend(extra);
    for s in sets {
        args.extend(["--set", s]);
    }
    let out = augur(&args);
    assert!(
        out.status.success(),
        "{workload}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("summary.json")).unwrap()).unwrap();
    for result in summary["results"].as_array().unwrap() {
        let checks = result["checks"].as_array().unwrap();
        assert!(checks.len() >= 2, "{workload}: {checks:?}");
        assert!(
            checks.iter().all(|c| c["passed"] == true),
            "{workload} on {}: {checks:?}",
            result["protocol"]
        );
        assert!(result["committed"].as_u64().unwrap() > 0, "{result}");
    }
}

#[test]
fn tpcc_and_smallbank_keep_their_consistency_conditions_under_clocksi_rep() {
    for (workload, sets) in &AUDITED[..2] {
        every_audit_holds(
            "clocksi-rep",
            workload,
            sets,
            &["--duration", "2", "--warmup", "0.5"],
        );
    }
}

/// The protocols that order whole transactions take only one-shot ones, so the audits run as a
/// one-shot read-only procedure (`AuditProcedure`, TPC-C's through its own catalogue entry,
/// the banks' as a read of their accounts) and hold; an audit that can only run interactively
/// (RUBiS's) is refused up front with the reason.
#[test]
fn the_audits_run_one_shot_on_the_order_then_execute_protocols() {
    for (workload, sets) in AUDITED {
        every_audit_holds(
            "calvin,s-smr",
            workload,
            sets,
            &["--runtime", "sim", "--duration", "1", "--warmup", "0.2"],
        );
    }
    let refused = augur(&[
        "bench",
        "--protocol",
        "calvin",
        "--workload",
        "rubis",
        "--check",
    ]);
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains(
            "the rubis audit runs only interactively, and calvin takes only one-shot transactions"
        ),
        "{stderr}"
    );
}

#[test]
fn run_flags_beside_an_experiment_file_are_refused_not_ignored() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../experiments/str-fig5.toml"
    );
    let out = augur(&[
        "bench",
        "--config",
        file,
        "--protocol",
        "nocc",
        "--seed",
        "7",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--protocol, --seed would be ignored"),
        "{stderr}"
    );
}

/// A smoke pass runs each protocol once, at its first point, and validates the others: a bad
/// setting in a later run still fails it.
#[test]
fn a_smoke_pass_runs_each_protocol_once_and_validates_every_point() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("two-runs.toml");
    let experiment = |second_keys: &str| {
        format!(
            "paper = \"test\"\nfigure = \"-\"\nsetting = \"-\"\nheadline = \"-\"\n\
             deviations = []\n[bench]\nprotocol = [\"nocc\", \"occ\"]\nworkload = \"ycsb-t\"\n\
             nodes = 2\nruntime = \"sim\"\n\
             [[run]]\nname = \"first\"\nset = [\"keys=100\"]\n\
             [[run]]\nname = \"second\"\nset = [\"keys={second_keys}\"]\n"
        )
    };
    std::fs::write(&file, experiment("200")).unwrap();
    let out_dir = dir.path().join("out");
    let args = [
        "bench",
        "--config",
        file.to_str().unwrap(),
        "--smoke",
        "--out",
        out_dir.to_str().unwrap(),
    ];
    let out = augur(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("second: valid; not run"), "{stdout}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("two-runs/experiment.json")).unwrap())
            .unwrap();
    let points: Vec<(&str, &str)> = summary["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["run"].as_str().unwrap(), p["protocol"].as_str().unwrap()))
        .collect();
    assert_eq!(points, [("first", "nocc"), ("first", "occ")]);
    std::fs::write(&file, experiment("0")).unwrap();
    let out = augur(&args);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("keys"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `--placement hash` reaches everything that builds a placement: `augur check` (whose replay
/// command repeats it) and `augur bench`, whose `--runtime tcp` cluster file hands it to the
/// node processes, which must agree with the clients about where every key lives for the bank's
/// audit to pass.
#[test]
fn a_hash_placement_reaches_check_and_the_nodes_of_a_tcp_bench() {
    let checked = augur(&[
        "check",
        "--protocol",
        "clocksi-rep",
        "--workload",
        "bank",
        "--seeds",
        "1..3",
        "--faults",
        "all",
        "--placement",
        "hash",
    ]);
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert_eq!(checked.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("on bank over 256 partitions placed by hash"),
        "{stdout}"
    );

    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("h.jsonl");
    let caught = augur(&[
        "check",
        "--protocol",
        "clocksi-rep",
        "--mutant",
        "no-ww-certification",
        "--seeds",
        "1..20",
        "--placement",
        "hash:partitions=64",
        "--history",
        history.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&caught.stdout);
    assert_eq!(caught.status.code(), Some(1), "{stdout}");
    let replay = stdout
        .lines()
        .find_map(|l| l.strip_prefix("replay: augur "))
        .expect("a replay command");
    assert!(
        replay.contains("--placement hash:partitions=64"),
        "{replay}"
    );

    let out = augur(&[
        "bench",
        "--runtime",
        "tcp",
        "--placement",
        "hash",
        "--protocol",
        "clocksi-rep",
        "--workload",
        "bank",
        "--check",
        "--latency",
        "lan",
        // Longer than the start-up stall a TCP bench can have while the nodes' links to each
        // other come up (first messages dropped, retried after a timeout).
        "--duration",
        "2",
        "--warmup",
        "0.5",
        "--clients",
        "2",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["config"]["placement"], "hash");
    assert_eq!(summary["config"]["partitions"], 256);
    assert!(summary["results"][0]["committed"].as_u64().unwrap() > 0);
    let file = std::fs::read_to_string(dir.path().join("cluster-clocksi-rep.toml")).unwrap();
    assert!(file.contains("placement = \"hash\""), "{file}");
}

/// A TCP bench starts its node processes and connects its loaders and clients as soon as every
/// node listens, before the nodes' links to each other are up. Messages sent meanwhile used to be
/// dropped, and their transactions hung until the protocol's timeout (2 s): in most runs the
/// nodes logged "N messages for it were dropped" and a start-up stall followed. Now they wait
/// for the link: no node drops any, and the first measured second commits.
#[test]
fn a_tcp_bench_loses_no_message_while_the_nodes_links_come_up() {
    // Whether a node dials a peer before the peer listens depends on the machine's timing; a
    // run where every link came up at the first attempt shows nothing, so run again (three
    // runs at most) until one has a late link. Every run must drop nothing.
    for run in 1..=3 {
        if late_links_in_a_tcp_bench() > 0 {
            return;
        }
        eprintln!("run {run}: every link came up at its first attempt; running again");
    }
    panic!("in three runs no node reported a link that came up late");
}

/// One short TCP bench of three node processes: asserts that no node dropped a message for a
/// peer whose link came up late and that the first measured second committed; returns how
/// many late links the nodes reported.
fn late_links_in_a_tcp_bench() -> usize {
    let dir = tempfile::tempdir().unwrap();
    let out = output_bounded(
        Command::new(env!("CARGO_BIN_EXE_augur"))
            .args([
                "bench",
                "--runtime",
                "tcp",
                "--protocol",
                "2pc-baseline",
                "--workload",
                "ycsb-t",
                "--nodes",
                "3",
                "--replication",
                "2",
                "--clients",
                "2",
                "--latency",
                "lan",
                "--duration",
                "1",
                "--warmup",
                "1",
                "--out",
            ])
            .arg(dir.path())
            // The node processes inherit it: their links' reports are logged at info.
            .env("RUST_LOG", "warn,augur::node=info,augur_runtime::tcp=info"),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut links_reported = 0;
    for i in 0..3 {
        let log =
            std::fs::read_to_string(dir.path().join(format!("node-2pc-baseline-{i}.log"))).unwrap();
        for line in log
            .lines()
            .filter(|l| l.contains("messages for it were dropped"))
        {
            links_reported += 1;
            assert!(line.contains("; 0 messages for it"), "node {i}: {line}");
        }
    }
    // Seconds 0 is the warm-up; second 1 is the first measured one.
    let samples = std::fs::read_to_string(dir.path().join("samples.csv")).unwrap();
    let first_measured = samples
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find(|f| f[2] == "false")
        .unwrap_or_else(|| panic!("no measured second in\n{samples}"));
    let committed: u64 = first_measured[3].parse().unwrap();
    assert!(
        committed > 0,
        "nothing committed in the first measured second:\n{samples}"
    );
    links_reported
}

#[test]
fn a_node_refuses_an_id_not_in_its_file_and_a_missing_file_with_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cluster.toml");
    std::fs::write(
        &path,
        "protocol = \"nocc\"\nsecurity = { tls = false }\n[[nodes]]\nid = 0\naddr = \"127.0.0.1:7100\"\n",
    )
    .unwrap();
    let file = path.to_str().unwrap();
    let out = augur(&["node", "--config", file, "--id", "3"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("node id 3 is not in the file"), "{stderr}");
    let missing = dir.path().join("missing.toml");
    let out = augur(&["node", "--config", missing.to_str().unwrap(), "--id", "0"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot read"), "{stderr}");
}
