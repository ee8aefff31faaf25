//! `augur nemesis` catches what it is there to catch: a cluster whose nodes keep their state in
//! memory only (`--sabotage memory-only`) loses acknowledged commits when a node is killed, and
//! the nemesis must say so and exit 1. (That a sound cluster passes is what CI's nemesis stage
//! runs, for every protocol, in network namespaces.) And nodes killed for longer than
//! `left_behind_ms` catch up from a copy of their partitions.

use crate::output_bounded;
use std::process::Command;

#[test]
fn the_nemesis_catches_a_cluster_that_loses_acknowledged_commits() {
    let out = tempfile::tempdir().unwrap();
    let output = output_bounded(
        Command::new(env!("CARGO_BIN_EXE_augur"))
            .args(["nemesis", "--workload", "list-append", "--faults", "kill"])
            .args(["--duration", "3", "--network", "loopback"])
            .args(["--sabotage", "memory-only", "--out"])
            .arg(out.path()),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("acknowledged appends"),
        "the lost appends are not named:\n{stdout}{stderr}"
    );
    assert!(out.path().join("list-append/history.jsonl").exists());
    assert!(out.path().join("list-append/timeline.txt").exists());
}

/// Node processes killed for longer than `left_behind_ms` are left behind by the others (the
/// sequencer's log and old versions are cut without them), and catch up when they return: a
/// Raft snapshot, then a copy of their partitions from a live replica. The history passes at
/// `calvin`'s level and nothing acknowledged is lost. (Seed 1 keeps three of its four kills
/// down for longer than the setting.)
#[test]
fn nodes_left_behind_by_a_kill_catch_up_from_a_copy() {
    let out = tempfile::tempdir().unwrap();
    let output = output_bounded(
        Command::new(env!("CARGO_BIN_EXE_augur"))
            .args(["nemesis", "--protocol", "calvin", "--workload", "bank"])
            .args(["--set", "protocol.left_behind_ms=500", "--faults", "kill"])
            .args([
                "--duration",
                "5",
                "--seed",
                "1",
                "--network",
                "loopback",
                "--out",
            ])
            .arg(out.path()),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stdout}{stderr}");
    let copies: usize = (0..3)
        .map(|i| {
            let log = out.path().join(format!("bank/node-{i}.log"));
            let log = std::fs::read_to_string(log).unwrap();
            log.matches("running the order from there").count()
        })
        .sum();
    assert!(copies >= 1, "no node caught up from a copy:\n{stdout}");
}

#[test]
fn the_nemesis_refuses_bad_input() {
    let run = |args: &[&str]| {
        let output = output_bounded(
            Command::new(env!("CARGO_BIN_EXE_augur"))
                .arg("nemesis")
                .args(args),
        );
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).to_string(),
        )
    };
    let (code, err) = run(&["--protocol", "nocc"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("claims no isolation level"), "{err}");
    let (code, err) = run(&["--workload", "tpcc"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("bank and list-append"), "{err}");
    let (code, err) = run(&["--network", "loopback", "--faults", "partition-link"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("needs --network netns"), "{err}");
    let (code, err) = run(&["--protocol", "calvin", "--set", "protocol.left_behind_ms=7"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("left_behind_ms"), "{err}");
}
