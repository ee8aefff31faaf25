//! Stopping a benchmark early. The first SIGINT (Ctrl-C) or SIGTERM ends the protocol being
//! measured at once: its clients are stopped, its result covers the part of the measurement
//! window that ran (marked `interrupted`), the protocols not yet run are skipped, and the
//! reports are written for what was gathered. A second signal exits at once. Node processes of
//! `--runtime tcp` are killed when the run ends however it ends, and are asked by the kernel to
//! stop (SIGTERM, `PR_SET_PDEATHSIG`) if this process dies without cleaning up.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

static REQUESTED: AtomicBool = AtomicBool::new(false);

/// The signal handler: only an atomic store, or `_exit` for the second signal, both safe in a
/// signal handler.
extern "C" fn on_signal(_: libc::c_int) {
    if REQUESTED.swap(true, Ordering::SeqCst) {
        // SAFETY: `_exit` is async-signal-safe; the second signal means "stop now".
        unsafe { libc::_exit(130) };
    }
}

/// Catch SIGINT and SIGTERM for the rest of the process (see the module docs).
pub fn install() {
    #[cfg(unix)]
    // SAFETY: `on_signal` only touches an atomic or calls `_exit`, which is what a signal
    // handler may do; installing it has no other effect on the process.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
}

/// The exit status of a command a signal cut short, once it wrote what it had: 130, as a shell
/// reports a command ended by SIGINT, and as the second signal exits.
pub const EXIT_STATUS: u8 = 130;

/// How a command a signal cut short ends (exit status [`EXIT_STATUS`]), so that a script or CI
/// job that interrupted it does not take its partial reports for a finished run.
#[derive(Debug)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted: what was written covers only what ran before the signal")
    }
}

impl std::error::Error for Interrupted {}

/// `result`, unless a stop was asked for: then [`Interrupted`].
pub fn unless_requested<T>(result: anyhow::Result<T>) -> anyhow::Result<T> {
    if requested() {
        Err(Interrupted.into())
    } else {
        result
    }
}

/// Whether a stop was asked for.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}

/// Resolves once a stop is asked for (checked ten times a second).
pub async fn wait() {
    while !requested() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Have the kernel send SIGTERM to a child process when this one dies, even by SIGKILL, so
/// that no node outlives the benchmark that started it. Called in the child between fork and
/// exec.
#[cfg(target_os = "linux")]
pub fn end_with_parent(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe, and the closure allocates nothing.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
pub fn end_with_parent(_command: &mut std::process::Command) {}
