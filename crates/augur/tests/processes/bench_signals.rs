//! `augur bench --runtime tcp` ends its node processes however it is stopped: SIGTERM ends the
//! run early and writes the results gathered so far; SIGKILL leaves the nodes to the kernel,
//! which stops them (`PR_SET_PDEATHSIG`).

#![cfg(target_os = "linux")]

use crate::wait_within;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The pids of `augur node` processes whose command line names a file under `dir`.
fn nodes_started_in(dir: &Path) -> Vec<u32> {
    let dir = dir.to_string_lossy().to_string();
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(" node ") && cmdline.contains(&dir) {
            // A zombie (exited, not yet reaped) is gone for our purpose.
            let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
            if !status.contains("State:\tZ") {
                pids.push(pid);
            }
        }
    }
    pids
}

fn start_bench(out: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_augur"))
        .args([
            "bench",
            "--runtime",
            "tcp",
            "--protocol",
            "nocc,clocksi-rep",
        ])
        .args(["--duration", "60", "--warmup", "0.5", "--clients", "2"])
        .arg("--out")
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Wait until `augur node` processes of the run are up (and return them).
fn wait_for_nodes(out: &Path) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let nodes = nodes_started_in(out);
        if nodes.len() == 3 {
            return nodes;
        }
        assert!(
            Instant::now() < deadline,
            "the nodes did not start: {nodes:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn wait_until_gone(out: &Path, within: Duration) {
    let deadline = Instant::now() + within;
    while !nodes_started_in(out).is_empty() {
        assert!(
            Instant::now() < deadline,
            "nodes still running: {:?}",
            nodes_started_in(out)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn sigterm_ends_the_run_writes_what_was_measured_and_stops_the_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let bench = start_bench(&out);
    wait_for_nodes(&out);
    // Into the measurement window of the first protocol.
    std::thread::sleep(Duration::from_secs(3));
    // SAFETY: sending a signal to a child process we own.
    unsafe { libc::kill(bench.id() as i32, libc::SIGTERM) };
    let output = wait_within(bench, Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("interrupted"), "{stderr}");
    // Partial reports are not a finished run: the status says the run was cut short.
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let results = summary["results"].as_array().unwrap();
    assert_eq!(
        results.len(),
        1,
        "only the protocol being measured: {summary}"
    );
    let ran = results[0]["interrupted_after_s"].as_f64().unwrap();
    assert!(ran > 0.5 && ran < 60.0, "{ran}");
    assert!(results[0]["committed"].as_u64().unwrap() > 0);
    wait_until_gone(&out, Duration::from_secs(5));
}

#[test]
fn a_killed_bench_leaves_no_node_running() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut bench = start_bench(&out);
    wait_for_nodes(&out);
    bench.kill().unwrap();
    bench.wait().unwrap();
    wait_until_gone(&out, Duration::from_secs(10));
}
