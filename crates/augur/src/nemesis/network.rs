//! Where the nemesis's nodes live: each in a network namespace of its own, behind a bridge, so
//! that links between nodes can be cut for real (packets dropped by the kernel, as a partition
//! drops them), or all on loopback, where nothing can be cut.
//!
//! The namespace network: a bridge in the host's namespace holding `10.231.S.1/24` (S drawn from
//! the process id, then the next one no other bridge on the host holds, so concurrent runs do
//! not collide), and node `i` in namespace
//! `augur-nemesis-PID-i` with `10.231.S.(10 + i)` on its end of a veth pair. The nemesis and its
//! clients stay in the host's namespace and reach every node through the bridge, so a cut
//! between two nodes never cuts a client off. A cut is a pair of `iptables` DROP rules in each
//! of the two nodes' namespaces (their own tables; the host's are untouched but for one rule
//! that lets bridged traffic through a host whose FORWARD policy drops it, as Docker's does);
//! healing flushes them. Everything is removed when the network is dropped.
//!
//! Needs root, `ip` (iproute2) and `iptables`.

use anyhow::{Context, bail};
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};

/// The nodes' network.
pub enum Network {
    /// Every node on 127.0.0.1: no partitions.
    Loopback,
    Namespaces(Namespaces),
}

impl Network {
    /// Whether links between nodes can be cut.
    pub fn can_partition(&self) -> bool {
        matches!(self, Network::Namespaces(_))
    }

    /// What to put before `augur node …` to start node `i` where it lives.
    pub fn exec_prefix(&self, i: usize) -> Vec<String> {
        match self {
            Network::Loopback => Vec::new(),
            Network::Namespaces(ns) => {
                vec!["ip".into(), "netns".into(), "exec".into(), ns.namespace(i)]
            }
        }
    }

    /// Cut every link in `cuts` (both directions), on top of the cuts in force.
    pub fn cut(&self, cuts: &[(usize, usize)]) -> anyhow::Result<()> {
        match self {
            Network::Loopback => bail!("links cannot be cut on loopback"),
            Network::Namespaces(ns) => {
                for &(a, b) in cuts {
                    ns.drop_between(a, b)?;
                    ns.drop_between(b, a)?;
                }
                Ok(())
            }
        }
    }

    /// Lift every cut.
    pub fn heal(&self) -> anyhow::Result<()> {
        match self {
            Network::Loopback => Ok(()),
            Network::Namespaces(ns) => {
                for i in 0..ns.nodes {
                    run(&["ip", "netns", "exec", &ns.namespace(i), "iptables", "-F"])?;
                }
                Ok(())
            }
        }
    }
}

/// Whether this process can build a namespace network, and if not, why.
pub fn namespaces_unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("network namespaces need root".into());
    }
    for tool in ["ip", "iptables"] {
        let found = Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !found {
            return Some(format!(
                "`{tool}` is not installed (Debian: iproute2, iptables)"
            ));
        }
    }
    None
}

/// The subnet `10.231.S.0/24` for a run with process id `pid`: S drawn from it, or the next
/// one (cyclically, 1 to 250) that no address on the host is in, as another run's bridge's is.
fn free_subnet(pid: u32) -> u8 {
    let addresses = Command::new("ip")
        .args(["-o", "-4", "addr", "show"])
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        .unwrap_or_default();
    let first = pid % 250;
    (0..250)
        .map(|k| ((first + k) % 250) as u8 + 1)
        .find(|s| !addresses.contains(&format!(" 10.231.{s}.")))
        .unwrap_or(first as u8 + 1)
}

/// A namespace per node behind one bridge (see the module docs).
pub struct Namespaces {
    tag: u32,
    subnet: u8,
    nodes: usize,
    /// Whether the host's FORWARD rule for the bridge was added (and must be removed).
    forward_rule: bool,
}

impl Namespaces {
    pub fn create(nodes: usize) -> anyhow::Result<Namespaces> {
        if nodes > 200 {
            bail!("at most 200 nodes fit the namespace network's /24");
        }
        let pid = std::process::id();
        let mut net = Namespaces {
            tag: pid % 100_000,
            subnet: free_subnet(pid),
            nodes: 0,
            forward_rule: false,
        };
        // Whatever fails half-way is removed by `Drop` (a bridge or namespace left by a run
        // that was killed is replaced: its names carry that run's process id, now ours).
        net.remove();
        let bridge = net.bridge();
        run(&["ip", "link", "add", &bridge, "type", "bridge"])?;
        let host = format!("{}/24", net.host_ip());
        run(&["ip", "addr", "add", &host, "dev", &bridge])?;
        run(&["ip", "link", "set", &bridge, "up"])?;
        // Bridged packets pass the host's FORWARD chain when br_netfilter is loaded; Docker's
        // policy there is DROP.
        net.forward_rule = run(&[
            "iptables", "-I", "FORWARD", "-i", &bridge, "-o", &bridge, "-j", "ACCEPT",
        ])
        .is_ok();
        for i in 0..nodes {
            let ns = net.namespace(i);
            let veth = net.veth(i);
            run(&["ip", "netns", "add", &ns])?;
            net.nodes = i + 1;
            run(&[
                "ip", "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ])?;
            run(&["ip", "link", "set", &veth, "master", &bridge, "up"])?;
            let addr = format!("{}/24", net.node_ip(i));
            run(&["ip", "-n", &ns, "addr", "add", &addr, "dev", "eth0"])?;
            run(&["ip", "-n", &ns, "link", "set", "eth0", "up"])?;
            run(&["ip", "-n", &ns, "link", "set", "lo", "up"])?;
        }
        Ok(net)
    }

    pub fn node_ip(&self, i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 231, self.subnet, 10 + i as u8)
    }

    fn host_ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 231, self.subnet, 1)
    }

    fn namespace(&self, i: usize) -> String {
        format!("augur-nemesis-{}-{i}", self.tag)
    }

    fn bridge(&self) -> String {
        format!("augnb{}", self.tag)
    }

    fn veth(&self, i: usize) -> String {
        format!("augnv{}x{i}", self.tag)
    }

    /// Drop what node `from` sends to node `to` and what it receives from it, in `from`'s
    /// namespace.
    fn drop_between(&self, from: usize, to: usize) -> anyhow::Result<()> {
        let ns = self.namespace(from);
        let peer = self.node_ip(to).to_string();
        let exec = ["ip", "netns", "exec", &ns, "iptables", "-A"];
        run(&[&exec[..], &["INPUT", "-s", &peer, "-j", "DROP"]].concat())?;
        run(&[&exec[..], &["OUTPUT", "-d", &peer, "-j", "DROP"]].concat())
    }

    /// Remove the bridge, the namespaces (their veths go with them) and the FORWARD rule,
    /// ignoring what is not there.
    fn remove(&mut self) {
        let bridge = self.bridge();
        if self.forward_rule {
            let _ = run(&[
                "iptables", "-D", "FORWARD", "-i", &bridge, "-o", &bridge, "-j", "ACCEPT",
            ]);
            self.forward_rule = false;
        }
        // Up to the most nodes a network holds: one left by a killed run may have had more.
        for i in 0..200 {
            // The host's end of the veth first, synchronously: deleting a namespace tears
            // its interfaces down in the background, and the next network (the next workload)
            // would find the name still taken.
            let veth = self.veth(i);
            if std::path::Path::new("/sys/class/net").join(&veth).exists() {
                let _ = quiet(&["ip", "link", "del", &veth]);
            }
            let ns = self.namespace(i);
            if std::path::Path::new("/run/netns").join(&ns).exists() {
                let _ = run(&["ip", "netns", "del", &ns]);
            }
        }
        let _ = quiet(&["ip", "link", "del", &bridge]);
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Run a command, failing with what it printed.
fn run(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", args[0]))?;
    if !out.status.success() {
        bail!(
            "`{}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Run a command whose failure is expected at times (removing what may not exist).
fn quiet(args: &[&str]) -> std::io::Result<std::process::ExitStatus> {
    Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
}
