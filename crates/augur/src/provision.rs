//! Setting a cluster up: `augur certs` (a CA and one certificate per node) and `augur cluster
//! init` (a working loopback cluster in one directory: the cluster file, certificates, a client
//! token and one data directory per node), so that `augur node --config DIR/cluster.toml --id I`
//! starts each node as is. Secrets are written readable by their owner only.

use crate::BadInput;
use crate::cluster::{Cluster, ClusterFile, NodeEntry, OptionsFile, SecurityFile};
use anyhow::Context;
use augur_protocols::registry::{self, ProtocolInfo};
use augur_runtime::tcp::generate_pki;
use augur_types::{LatencyProfile, Layout, NodeId, Placement};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The files `augur certs` writes into its directory.
pub const CA_CERT: &str = "ca.crt";
pub const CA_KEY: &str = "ca.key";

pub fn node_cert(id: usize) -> String {
    format!("node-{id}.crt")
}

pub fn node_key(id: usize) -> String {
    format!("node-{id}.key")
}

/// Write `contents` to a new file at `path`, readable by its owner only when `secret`. An
/// existing file is never overwritten.
fn create(path: &Path, contents: &[u8], secret: bool) -> anyhow::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    if secret {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = secret;
    let mut file = options.open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            anyhow::Error::new(BadInput(format!(
                "{} already exists: refusing to overwrite it",
                path.display()
            )))
        } else {
            anyhow::anyhow!("cannot create {}: {e}", path.display())
        }
    })?;
    file.write_all(contents)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// `augur certs`: a CA for cluster `cluster_id` and certificates for nodes `0..nodes`, as PEM
/// files in `out` ([`CA_CERT`], [`CA_KEY`], [`node_cert`], [`node_key`]).
pub fn write_certs(out: &Path, cluster_id: &str, nodes: usize) -> anyhow::Result<()> {
    if nodes == 0 {
        return Err(BadInput("--nodes must be at least 1".into()).into());
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let pki = generate_pki(cluster_id, nodes).map_err(anyhow::Error::msg)?;
    create(&out.join(CA_CERT), pki.ca_cert.as_bytes(), false)?;
    create(&out.join(CA_KEY), pki.ca_key.as_bytes(), true)?;
    for (id, node) in pki.nodes.iter().enumerate() {
        create(&out.join(node_cert(id)), node.cert.as_bytes(), false)?;
        create(&out.join(node_key(id)), node.key.as_bytes(), true)?;
    }
    Ok(())
}

/// A random hex string of `bytes` bytes, from the operating system's generator.
fn random_hex(bytes: usize) -> String {
    (0..bytes)
        .map(|_| format!("{:02x}", rand::random::<u8>()))
        .collect()
}

/// Node `i`'s metrics are served on port `base_port + METRICS_PORT_OFFSET + i`.
pub const METRICS_PORT_OFFSET: usize = 1000;

/// Node `i`'s gRPC client API is served on port `base_port + GRPC_PORT_OFFSET + i`.
pub const GRPC_PORT_OFFSET: usize = 2000;

/// What `augur cluster init` makes.
pub struct InitOptions<'a> {
    pub dir: &'a Path,
    pub nodes: usize,
    pub protocol: &'a str,
    /// Node `i` listens on `127.0.0.1:(base_port + i)`, serves its metrics on
    /// `base_port + METRICS_PORT_OFFSET + i` and its gRPC API on `base_port + GRPC_PORT_OFFSET + i`.
    pub base_port: u16,
    /// Replicas per partition; `None`: up to 3.
    pub replication: Option<usize>,
    /// How partitions are laid out over the nodes: `ring`, `hash` or
    /// `hash:partitions=N:vnodes=V` (see [`Layout`]).
    pub placement: &'a str,
    /// Each node's host, by id, for a cluster spread over machines or containers: node `i` is
    /// then reached at `hosts[i]:base_port`, listens on `0.0.0.0:base_port` and serves its
    /// metrics on `0.0.0.0:(base_port + METRICS_PORT_OFFSET)` and its gRPC API on
    /// `0.0.0.0:(base_port + GRPC_PORT_OFFSET)`. Empty: all on 127.0.0.1.
    pub hosts: &'a [String],
    /// The latency profile: where the nodes sit.
    pub latency: &'a str,
    /// Delay peer messages by the profile (right on one machine; wrong where the network
    /// delays them already, as `tc netem` does in the containers' compose files).
    pub emulate_latency: bool,
}

/// Replicas per partition when none is given: every node for a protocol that replicates the
/// whole database to each, else three (or fewer nodes).
pub fn default_replication(info: &ProtocolInfo, nodes: usize) -> usize {
    if info.full_replication() {
        nodes
    } else {
        nodes.min(3)
    }
}

/// `augur cluster init`: a TLS loopback cluster in `dir` (see the module docs). Returns the
/// path of the cluster file, checked by loading it back.
pub fn init(options: &InitOptions<'_>) -> anyhow::Result<PathBuf> {
    let InitOptions {
        dir,
        nodes,
        protocol,
        base_port,
        replication,
        placement,
        hosts,
        latency,
        emulate_latency,
    } = *options;
    if !hosts.is_empty() && hosts.len() != nodes {
        return Err(BadInput(format!(
            "--hosts names {} hosts for {nodes} nodes: give one per node",
            hosts.len()
        ))
        .into());
    }
    let info = registry::info(protocol).map_err(|e| BadInput(e.to_string()))?;
    let replication = replication.unwrap_or(default_replication(info, nodes));
    if nodes == 0 {
        return Err(BadInput("--nodes must be at least 1".into()).into());
    }
    if base_port as usize + GRPC_PORT_OFFSET + nodes > u16::MAX as usize + 1 {
        return Err(BadInput(format!(
            "--base-port {base_port} leaves no room for {nodes} nodes"
        ))
        .into());
    }
    let placement: Layout = placement
        .parse()
        .map_err(|e: augur_types::PlacementError| BadInput(e.to_string()))?;
    // The layout is checked before anything is written, so that a refused one (a node left
    // without partitions) leaves no half-made cluster behind; `Cluster::check` builds it again.
    let profile = LatencyProfile::named(latency).map_err(|e| BadInput(e.to_string()))?;
    let dcs = profile.dcs.len().min(nodes);
    let profile = profile
        .truncated(dcs)
        .map_err(|e| BadInput(e.to_string()))?;
    Placement::build(placement, profile, nodes, replication)
        .map_err(|e| BadInput(e.to_string()))?;
    let path = dir.join("cluster.toml");
    if path.exists() {
        return Err(BadInput(format!(
            "{} already exists: refusing to overwrite a cluster",
            path.display()
        ))
        .into());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let cluster_id = format!("augur-{}", random_hex(4));
    write_certs(&dir.join("certs"), &cluster_id, nodes)?;
    create(
        &dir.join("client.token"),
        format!("{}\n", random_hex(16)).as_bytes(),
        true,
    )?;
    let mut entries = Vec::with_capacity(nodes);
    for id in 0..nodes {
        let data = format!("data/node-{id}");
        std::fs::create_dir_all(dir.join(&data))
            .with_context(|| format!("cannot create {}", dir.join(&data).display()))?;
        let (addr, listen, metrics, grpc) = match hosts.get(id) {
            None => {
                let port = base_port as usize + id;
                (
                    format!("127.0.0.1:{port}"),
                    None,
                    format!("127.0.0.1:{}", port + METRICS_PORT_OFFSET),
                    format!("127.0.0.1:{}", port + GRPC_PORT_OFFSET),
                )
            }
            Some(host) => (
                format!("{host}:{base_port}"),
                Some(format!("0.0.0.0:{base_port}")),
                format!("0.0.0.0:{}", base_port as usize + METRICS_PORT_OFFSET),
                format!("0.0.0.0:{}", base_port as usize + GRPC_PORT_OFFSET),
            ),
        };
        entries.push(NodeEntry {
            id: id as u32,
            addr,
            listen,
            cert: Some(format!("certs/{}", node_cert(id))),
            key: Some(format!("certs/{}", node_key(id))),
            data_dir: Some(data),
            metrics: Some(metrics),
            grpc: Some(grpc),
        });
    }
    let file = ClusterFile {
        cluster_id,
        protocol: protocol.to_string(),
        latency: latency.to_string(),
        dcs: None,
        replication,
        placement,
        seed: 1,
        emulate_latency,
        options: OptionsFile::default(),
        limits: Default::default(),
        security: Some(SecurityFile {
            tls: true,
            ca: Some(format!("certs/{CA_CERT}")),
            client_token_file: Some("client.token".into()),
        }),
        nodes: entries,
    };
    let text = format!(
        "# Written by `augur cluster init`; the format is in docs/cluster-config.md.\n\
         # Start node I with: augur node --config {} --id I\n\n{}",
        path.display(),
        toml::to_string(&file)?
    );
    create(&path, text.as_bytes(), false)?;
    Cluster::load(&path)?;
    Ok(path)
}

/// `augur cluster netem`: the `tc` commands that make node `id`'s network interface `dev` delay
/// its packets to every other node by the one-way latency between their data centres in the
/// cluster's latency profile, so that containers on one host behave like a geo-distributed
/// cluster (with `emulate_latency = false`, the network supplies the delay). Node addresses
/// must be IP addresses: the filters match destinations by IP. Packets within a data centre
/// are not delayed. A cluster whose nodes emulate latency themselves gets no commands. `tc` is
/// the program to call (a path, where a shell's builtin would shadow
/// it).
pub fn netem_script(cluster: &Cluster, id: NodeId, dev: &str, tc: &str) -> anyhow::Result<String> {
    let placement = &cluster.placement;
    if id.0 as usize >= placement.node_count() {
        return Err(BadInput(format!("node {id} is not in the cluster")).into());
    }
    if cluster.emulate_latency {
        // Delaying packets too would count the latency twice.
        return Ok("# emulate_latency is on: the nodes delay their messages themselves\n".into());
    }
    let mine = placement.dc_of(id);
    let profile = placement.profile();
    let mut script = format!(
        "{tc} qdisc replace dev {dev} root handle 1: prio bands 16 priomap 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
    );
    let mut band_of_dc = std::collections::BTreeMap::new();
    for node in placement.nodes() {
        let dc = placement.dc_of(node);
        if dc == mine {
            continue;
        }
        let next = band_of_dc.len() + 2;
        let band = *band_of_dc.entry(dc.0).or_insert_with(|| {
            let delay = profile.one_way(mine.0 as usize, dc.0 as usize);
            script.push_str(&format!(
                "{tc} qdisc add dev {dev} parent 1:{next} handle {next}0: netem delay {}us\n",
                delay.as_micros()
            ));
            next
        });
        let addr = cluster.node_addr(node).map_err(BadInput)?;
        script.push_str(&format!(
            "{tc} filter add dev {dev} parent 1: protocol ip prio 1 u32 match ip dst {}/32 flowid 1:{band}\n",
            addr.ip()
        ));
    }
    Ok(script)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_writes_a_tls_cluster_that_loads_and_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let options = InitOptions {
            dir: &dir.path().join("c"),
            nodes: 3,
            protocol: "clocksi-rep",
            base_port: 7300,
            replication: None,
            placement: "ring",
            hosts: &[],
            latency: "lan",
            emulate_latency: true,
        };
        let path = init(&options).unwrap();
        let cluster = Cluster::load(&path).unwrap();
        assert_eq!(cluster.placement.replication_factor(), 3);
        let tls = cluster.security.tls.as_ref().expect("TLS is on");
        assert!(tls.ca.exists() && tls.nodes.iter().all(|(c, k)| c.exists() && k.exists()));
        assert_eq!(cluster.security.client_token.as_ref().unwrap().len(), 32);
        assert!(
            cluster
                .data_dirs
                .iter()
                .all(|d| d.as_ref().unwrap().is_dir())
        );
        assert!(cluster.identity.cluster_id.starts_with("augur-"));
        // Each node's certificate loads for that node.
        for (id, (cert, key)) in tls.nodes.iter().enumerate() {
            augur_runtime::tcp::NodeTls::load(augur_types::NodeId(id as u32), &tls.ca, cert, key)
                .unwrap();
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&tls.nodes[0].1)
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "keys are private");
        }
        let again = init(&options).unwrap_err();
        assert!(again.downcast_ref::<BadInput>().is_some());
        assert!(
            again.to_string().contains("refusing to overwrite"),
            "{again}"
        );
    }

    #[test]
    fn bad_requests_are_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        let mut options = InitOptions {
            dir: dir.path(),
            nodes: 0,
            protocol: "clocksi-rep",
            base_port: 7300,
            replication: None,
            placement: "ring",
            hosts: &[],
            latency: "lan",
            emulate_latency: true,
        };
        for (nodes, protocol, port, expected) in [
            (0, "clocksi-rep", 7300, "--nodes must be at least 1"),
            (3, "spanner", 7300, "unknown protocol"),
            (3, "nocc", 65000, "leaves no room"),
        ] {
            options.nodes = nodes;
            options.protocol = protocol;
            options.base_port = port;
            let e = init(&options).unwrap_err();
            assert!(e.downcast_ref::<BadInput>().is_some(), "{e}");
            assert!(e.to_string().contains(expected), "{e}");
        }
    }

    #[test]
    fn netem_delays_each_remote_data_centre_by_its_one_way_latency() {
        let dir = tempfile::tempdir().unwrap();
        let hosts: Vec<String> = (0..6).map(|i| format!("10.0.0.{}", 10 + i)).collect();
        let path = init(&InitOptions {
            dir: dir.path(),
            nodes: 6,
            protocol: "clocksi-rep",
            base_port: 7100,
            replication: None,
            placement: "ring",
            hosts: &hosts,
            latency: "3dc",
            emulate_latency: false,
        })
        .unwrap();
        let cluster = Cluster::load(&path).unwrap();
        let script = netem_script(&cluster, NodeId(0), "eth0", "/sbin/tc").unwrap();
        // Node 0 is in VA with node 3; nodes 1 and 4 in OR (34 ms one way), 2 and 5 in IE (34 ms).
        let profile = cluster.placement.profile();
        let or = profile.one_way(0, 1).as_micros();
        assert!(
            script.contains(&format!("parent 1:2 handle 20: netem delay {or}us")),
            "{script}"
        );
        assert!(
            script.contains("match ip dst 10.0.0.11/32 flowid 1:2"),
            "{script}"
        );
        assert!(
            script.contains("match ip dst 10.0.0.14/32 flowid 1:2"),
            "{script}"
        );
        assert!(
            script.contains("match ip dst 10.0.0.12/32 flowid 1:3"),
            "{script}"
        );
        assert!(!script.contains("10.0.0.13"), "same DC: no delay\n{script}");
        assert!(script.lines().all(|l| l.starts_with("/sbin/tc ")));
    }
}
