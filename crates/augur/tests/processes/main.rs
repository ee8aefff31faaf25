//! The augur crate's tests that start `augur` processes (nodes, benches, the nemesis) and talk
//! to them, in one binary; each module is the test file it was.

mod bench_signals;
mod cli;
mod crash_recovery;
mod nemesis;
mod postgres_history;
mod process_cluster;

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long any command a test runs may take: the longest run benches and the nemesis for
/// seconds, well within it even on a slow machine; one still running then has hung.
pub const CHILD_LIMIT: Duration = Duration::from_secs(300);

/// `augur ARGS`, run to completion within [`CHILD_LIMIT`].
pub fn augur(args: &[&str]) -> Output {
    output_bounded(Command::new(env!("CARGO_BIN_EXE_augur")).args(args))
}

/// Run `command` to completion like `Command::output` (no input; what it prints is captured),
/// but for at most [`CHILD_LIMIT`] (see [`wait_within`]).
pub fn output_bounded(command: &mut Command) -> Output {
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
    wait_within(child, CHILD_LIMIT)
}

/// Wait for `child` like `Child::wait_with_output`, but for at most `limit`: a child still
/// running then is sent SIGABRT (a Python child started with `-X faulthandler` prints every
/// thread's stack on it), then SIGKILL, and the test fails with what it printed. A client that
/// hangs must fail its test with a trace, not stall the suite until CI's time runs out (a
/// Python client test once did, for most of an hour).
pub fn wait_within(mut child: Child, limit: Duration) -> Output {
    // Drained on their own threads so that a child filling a pipe does not block on it.
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut text);
            }
            text
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            // SAFETY: signalling a child process this test owns and has not yet reaped.
            unsafe { libc::kill(child.id() as i32, libc::SIGABRT) };
            std::thread::sleep(Duration::from_secs(2));
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "process {} still running after {limit:?}; it printed:\n{}{}",
                child.id(),
                String::from_utf8_lossy(&stdout.join().unwrap()),
                String::from_utf8_lossy(&stderr.join().unwrap()),
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}
