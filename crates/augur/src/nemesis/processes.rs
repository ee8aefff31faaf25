//! The nemesis's `augur node` processes: started where the [`Network`] puts them, killed,
//! paused, restarted with a skewed clock, each appending its output to a log of its own.

use super::network::Network;
use crate::interrupt;
use anyhow::{Context, bail};
use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a node may take to listen after it is started.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a node asked to stop (SIGTERM) may take before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

pub struct NodeProcesses {
    exe: PathBuf,
    config: PathBuf,
    logs: PathBuf,
    /// Where each node is reached (its cluster file `addr`).
    addrs: Vec<SocketAddr>,
    children: Vec<Option<Child>>,
    /// Each node's clock offset, given again at every restart.
    clock_offsets_ms: Vec<i64>,
    paused: Vec<bool>,
    /// Each node's worker threads: its share of the machine's cores.
    threads: usize,
}

impl NodeProcesses {
    /// Start every node of the cluster file `config`, logging to `logs/node-I.log`, and wait
    /// until each listens.
    pub fn start(
        network: &Network,
        config: &Path,
        addrs: Vec<SocketAddr>,
        logs: &Path,
    ) -> anyhow::Result<NodeProcesses> {
        let n = addrs.len();
        let mut nodes = NodeProcesses {
            exe: std::env::current_exe().context("cannot find the augur executable")?,
            config: config.to_path_buf(),
            logs: logs.to_path_buf(),
            addrs,
            children: (0..n).map(|_| None).collect(),
            clock_offsets_ms: vec![0; n],
            paused: vec![false; n],
            threads: crate::cluster::node_threads(n),
        };
        for i in 0..n {
            nodes.spawn(network, i)?;
        }
        for i in 0..n {
            nodes.wait_until_listening(i)?;
        }
        Ok(nodes)
    }

    pub fn len(&self) -> usize {
        self.children.len()
    }

    pub fn log_path(&self, i: usize) -> PathBuf {
        self.logs.join(format!("node-{i}.log"))
    }

    /// Start node `i` (which must not be running) with its current clock offset.
    pub fn spawn(&mut self, network: &Network, i: usize) -> anyhow::Result<()> {
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.log_path(i))?;
        let prefix = network.exec_prefix(i);
        let mut command = match prefix.split_first() {
            None => Command::new(&self.exe),
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(&self.exe);
                c
            }
        };
        command
            .arg("node")
            .arg("--config")
            .arg(&self.config)
            .args(["--id", &i.to_string()])
            .args(["--threads", &self.threads.to_string()])
            .arg(format!("--clock-offset-ms={}", self.clock_offsets_ms[i]))
            .env("RUST_LOG", "info");
        // `ip netns exec` execs the node in place, so the setting reaches the node itself.
        interrupt::end_with_parent(&mut command);
        let child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot start node {i}"))?;
        self.children[i] = Some(child);
        self.paused[i] = false;
        Ok(())
    }

    /// Wait until node `i` accepts connections.
    pub fn wait_until_listening(&mut self, i: usize) -> anyhow::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(child) = self.children[i].as_mut()
                && let Some(status) = child.try_wait()?
            {
                self.children[i] = None;
                bail!(
                    "node {i} exited with {status} while starting (log: {})",
                    self.log_path(i).display()
                );
            }
            if std::net::TcpStream::connect_timeout(&self.addrs[i], Duration::from_millis(200))
                .is_ok()
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "node {i} does not listen {START_TIMEOUT:?} after it started (log: {})",
                    self.log_path(i).display()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn is_running(&self, i: usize) -> bool {
        self.children[i].is_some()
    }

    /// SIGKILL node `i` and reap it.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.children[i].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.paused[i] = false;
    }

    /// Ask node `i` to stop (SIGTERM) and wait for it; SIGKILL after [`STOP_TIMEOUT`].
    pub fn terminate(&mut self, i: usize) {
        let Some(child) = self.children[i].as_mut() else {
            return;
        };
        signal(child, libc::SIGCONT);
        signal(child, libc::SIGTERM);
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                self.children[i] = None;
                self.paused[i] = false;
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill(i);
    }

    /// Pause node `i` (SIGSTOP): its connections stay open and nothing answers.
    pub fn pause(&mut self, i: usize) {
        if let Some(child) = self.children[i].as_ref() {
            signal(child, libc::SIGSTOP);
            self.paused[i] = true;
        }
    }

    /// Resume node `i` if it is paused.
    pub fn resume(&mut self, i: usize) {
        if let Some(child) = self.children[i].as_ref()
            && self.paused[i]
        {
            signal(child, libc::SIGCONT);
        }
        self.paused[i] = false;
    }

    /// The clock offset node `i` gets from its next start on.
    pub fn set_clock_offset(&mut self, i: usize, offset_ms: i64) {
        self.clock_offsets_ms[i] = offset_ms;
    }

    /// Nodes that exited though nobody stopped them, with how (each is reported once).
    pub fn exited_on_their_own(&mut self) -> Vec<String> {
        let mut exited = Vec::new();
        for i in 0..self.children.len() {
            if let Some(child) = self.children[i].as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                exited.push(format!(
                    "node {i} exited with {status} (log: {})",
                    self.log_path(i).display()
                ));
                self.children[i] = None;
            }
        }
        exited
    }
}

impl Drop for NodeProcesses {
    fn drop(&mut self) {
        for i in 0..self.children.len() {
            self.kill(i);
        }
    }
}

fn signal(child: &Child, signal: libc::c_int) {
    // SAFETY: kill(2) on a child this process has not reaped (the pid is still ours).
    unsafe {
        libc::kill(child.id() as libc::pid_t, signal);
    }
}
