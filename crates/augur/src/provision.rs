//! Setting a cluster up: `augur certs` (a CA and one certificate per node) and `augur cluster
//! init` (a working loopback cluster in one directory: the cluster file, certificates, a client
//! token and one data directory per node), so that `augur node --config DIR/cluster.toml --id I`
//! starts each node as is. Secrets are written readable by their owner only.

use crate::BadInput;
use crate::cluster::{Cluster, ClusterFile, NodeEntry, OptionsFile, SecurityFile};
use anyhow::Context;
use augur_protocols::registry;
use augur_runtime::tcp::generate_pki;
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

/// What `augur cluster init` makes.
pub struct InitOptions<'a> {
    pub dir: &'a Path,
    pub nodes: usize,
    pub protocol: &'a str,
    /// Node `i` listens on `127.0.0.1:(base_port + i)`, and serves its metrics on
    /// `base_port + METRICS_PORT_OFFSET + i`.
    pub base_port: u16,
    /// Replicas per partition; `None`: up to 3.
    pub replication: Option<usize>,
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
    } = *options;
    registry::info(protocol).map_err(|e| BadInput(e.to_string()))?;
    if nodes == 0 {
        return Err(BadInput("--nodes must be at least 1".into()).into());
    }
    if base_port as usize + METRICS_PORT_OFFSET + nodes > u16::MAX as usize + 1 {
        return Err(BadInput(format!(
            "--base-port {base_port} leaves no room for {nodes} nodes"
        ))
        .into());
    }
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
        entries.push(NodeEntry {
            id: id as u32,
            addr: format!("127.0.0.1:{}", base_port as usize + id),
            listen: None,
            cert: Some(format!("certs/{}", node_cert(id))),
            key: Some(format!("certs/{}", node_key(id))),
            data_dir: Some(data),
            metrics: Some(format!(
                "127.0.0.1:{}",
                base_port as usize + METRICS_PORT_OFFSET + id
            )),
        });
    }
    let file = ClusterFile {
        cluster_id,
        protocol: protocol.to_string(),
        latency: "lan".into(),
        dcs: None,
        replication: replication.unwrap_or(nodes.min(3)),
        seed: 1,
        emulate_latency: true,
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
}
