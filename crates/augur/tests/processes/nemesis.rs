//! `augur nemesis` catches what it is there to catch: a cluster whose nodes keep their state in
//! memory only (`--sabotage memory-only`) loses acknowledged commits when a node is killed, and
//! the nemesis must say so and exit 1. (That a sound cluster passes is what CI's nemesis stage
//! runs, for every protocol, in network namespaces.)

use std::process::Command;

#[test]
fn the_nemesis_catches_a_cluster_that_loses_acknowledged_commits() {
    let out = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_augur"))
        .args(["nemesis", "--workload", "list-append", "--faults", "kill"])
        .args(["--duration", "3", "--network", "loopback"])
        .args(["--sabotage", "memory-only", "--out"])
        .arg(out.path())
        .output()
        .unwrap();
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

#[test]
fn the_nemesis_refuses_bad_input() {
    let run = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_augur"))
            .arg("nemesis")
            .args(args)
            .output()
            .unwrap();
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
}
