//! Cluster files: the TOML file that describes a running cluster (its protocol, placement,
//! options and nodes), as `augur node` serves it and as clients of the cluster read it. The
//! format is documented in docs/cluster-config.md.

use crate::BadInput;
use augur_contract::ProtocolOptions;
use augur_protocols::registry::{self, ProtocolInfo};
use augur_runtime::tcp::{
    ClientConfig, ClientTls, ClusterIdentity, Limits, MAX_FRAME_LEN, TcpTransport,
};
use augur_types::{LatencyProfile, Layout, NodeId, Placement};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A cluster file as written (see docs/cluster-config.md).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    /// A name for the cluster; nodes and clients of another cluster are refused.
    #[serde(default = "default_cluster_id")]
    pub cluster_id: String,
    /// Registry name of the protocol every node runs.
    pub protocol: String,
    /// Latency profile name: where nodes sit and, if emulated, the delays between them.
    #[serde(default = "default_latency")]
    pub latency: String,
    /// How many of the profile's data centres to use (default: all that the nodes can fill).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dcs: Option<usize>,
    /// Replicas per partition, master included.
    #[serde(default = "default_replication")]
    pub replication: usize,
    /// How partitions are laid out over the nodes: `ring` (default) or `hash` (consistent
    /// hashing, `hash:partitions=N:vnodes=V`). Every node builds the same placement from it.
    #[serde(default)]
    pub placement: Layout,
    /// Seeds every node's random number generator (each mixes in its id).
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Delay peer messages by the profile's one-way latency (for clusters on one machine or LAN).
    #[serde(default = "default_emulate_latency")]
    pub emulate_latency: bool,
    #[serde(default)]
    pub options: OptionsFile,
    /// `[security]`: required, so that running without authentication is a choice written down.
    pub security: Option<SecurityFile>,
    /// `[limits]`: what bounds each node's resources against its connections.
    #[serde(default)]
    pub limits: LimitsFile,
    pub nodes: Vec<NodeEntry>,
}

/// `[limits]`: overrides of [`Limits`]; durations in milliseconds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_frame_bytes: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame_timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_handshakes: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_clients: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_idle_timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_requests_in_flight: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_timeout_ms: Option<u64>,
}

impl LimitsFile {
    /// The limits, defaults filled in; a limit of zero is refused (it would shut the node).
    fn resolve(&self) -> Result<Limits, String> {
        let mut limits = Limits::default();
        let positive = |name: &str, v: u64| {
            if v == 0 {
                Err(format!("limits.{name} must be at least 1"))
            } else {
                Ok(v)
            }
        };
        let ms = Duration::from_millis;
        if let Some(v) = self.max_frame_bytes {
            positive("max_frame_bytes", v as u64)?;
            if v > MAX_FRAME_LEN {
                return Err(format!(
                    "limits.max_frame_bytes must be at most {MAX_FRAME_LEN} (the wire's limit)"
                ));
            }
            limits.max_frame_len = v;
        }
        if let Some(v) = self.frame_timeout_ms {
            limits.frame_timeout = ms(positive("frame_timeout_ms", v)?);
        }
        if let Some(v) = self.max_handshakes {
            limits.max_handshakes = positive("max_handshakes", v as u64)? as usize;
        }
        if let Some(v) = self.max_clients {
            limits.max_clients = positive("max_clients", v as u64)? as usize;
        }
        if let Some(v) = self.client_idle_timeout_ms {
            limits.client_idle_timeout = ms(positive("client_idle_timeout_ms", v)?);
        }
        if let Some(v) = self.max_requests_in_flight {
            limits.max_requests_in_flight = positive("max_requests_in_flight", v as u64)? as usize;
        }
        if let Some(v) = self.peer_timeout_ms {
            limits.peer_timeout = ms(positive("peer_timeout_ms", v)?);
        }
        Ok(limits)
    }
}

/// `[security]`: TLS and the client token. Paths are relative to the cluster file.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecurityFile {
    /// TLS on every connection, peers authenticated by their certificates. `false` runs with no
    /// encryption and no authentication at all: for benchmarks on loopback only.
    pub tls: bool,
    /// The cluster CA's certificate (PEM), which signed every node's (required with TLS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<String>,
    /// A file holding the token clients must present; clients read it from there too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_token_file: Option<String>,
}

/// `[options]`: overrides of [`ProtocolOptions`], durations in milliseconds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OptionsFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub participant_timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gc_retention_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gc_interval_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_txn_timeout_ms: Option<u64>,
    /// Protocol-specific settings; strings, numbers and booleans.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub settings: BTreeMap<String, toml::Value>,
}

/// `[[nodes]]`: one node of the cluster.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeEntry {
    pub id: u32,
    /// Where the other nodes and clients reach this node (`host:port`).
    pub addr: String,
    /// Where this node binds, if not `addr` (e.g. `0.0.0.0:7100` behind NAT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// The node's certificate (PEM, signed by the CA, naming `node-ID.augur`); with TLS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert: Option<String>,
    /// The node's private key (PEM); with TLS. Only the node itself needs to read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Where the node serves `GET /metrics` (Prometheus text format), if anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<String>,
    /// Where the node serves the gRPC client API (proto/augur/v1/augur.proto), if anywhere.
    /// Clients reach it at `addr`'s host and this port (so `0.0.0.0:PORT` serves every
    /// interface).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<String>,
    /// Where the node keeps its log and checkpoints, unless `augur node --data-dir` says
    /// otherwise; without either, the node keeps its state in memory only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<String>,
}

fn default_cluster_id() -> String {
    "augur".into()
}

fn default_latency() -> String {
    "lan".into()
}

fn default_replication() -> usize {
    1
}

fn default_seed() -> u64 {
    1
}

fn default_emulate_latency() -> bool {
    true
}

/// A cluster file, checked and resolved.
pub struct Cluster {
    pub protocol: &'static ProtocolInfo,
    pub placement: Arc<Placement>,
    pub options: Arc<ProtocolOptions>,
    pub seed: u64,
    pub emulate_latency: bool,
    /// By node id.
    pub nodes: Vec<NodeEntry>,
    /// The cluster id and every setting the nodes must agree on.
    pub identity: ClusterIdentity,
    pub security: Security,
    /// Each node's `data_dir`, relative to the cluster file, by node id.
    pub data_dirs: Vec<Option<PathBuf>>,
    pub limits: Limits,
}

/// The `[security]` of a cluster file, resolved: paths made absolute (relative to the file),
/// the client token read.
#[derive(Clone, Debug)]
pub struct Security {
    /// `None`: plaintext, no authentication.
    pub tls: Option<TlsFiles>,
    pub client_token: Option<String>,
}

#[derive(Clone, Debug)]
pub struct TlsFiles {
    pub ca: PathBuf,
    /// Each node's certificate and key, by node id.
    pub nodes: Vec<(PathBuf, PathBuf)>,
}

impl Cluster {
    /// Read and check the cluster file at `path`; errors are [`BadInput`] naming the file.
    pub fn load(path: &Path) -> anyhow::Result<Cluster> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| BadInput(format!("cannot read {}: {e}", path.display())))?;
        let base = path.parent().unwrap_or(Path::new("."));
        Cluster::parse_in(&text, base)
            .map_err(|e| BadInput(format!("{}: {e}", path.display())).into())
    }

    /// Parse and check a cluster file's text; paths in it are relative to the current
    /// directory.
    pub fn parse(text: &str) -> Result<Cluster, String> {
        Cluster::parse_in(text, Path::new("."))
    }

    /// Parse and check a cluster file's text; paths in it are relative to `base`.
    pub fn parse_in(text: &str, base: &Path) -> Result<Cluster, String> {
        let file: ClusterFile = toml::from_str(text).map_err(|e| {
            let at = e
                .span()
                .map(|span| {
                    let before = &text[..span.start.min(text.len())];
                    let line = before.matches('\n').count() + 1;
                    format!("line {line}: ")
                })
                .unwrap_or_default();
            format!("{at}{}", e.message().trim_end())
        })?;
        Cluster::check(file, base)
    }

    /// Check a cluster file; paths in it are relative to `base`.
    pub fn check(file: ClusterFile, base: &Path) -> Result<Cluster, String> {
        let protocol = registry::info(&file.protocol).map_err(|e| e.to_string())?;
        let n = file.nodes.len();
        if n == 0 {
            return Err("no [[nodes]]: a cluster needs at least one node".into());
        }
        let mut ids = BTreeSet::new();
        for node in &file.nodes {
            if !ids.insert(node.id) {
                return Err(format!("node id {} appears twice", node.id));
            }
        }
        if let Some(missing) = (0..n as u32).find(|i| !ids.contains(i)) {
            let extra = ids.last().copied().unwrap_or(0);
            return Err(format!(
                "node ids must be 0..={} for {n} nodes: id {missing} is missing (id {extra} is out of range)",
                n - 1
            ));
        }
        let mut nodes = file.nodes.clone();
        nodes.sort_by_key(|node| node.id);
        for (i, a) in nodes.iter().enumerate() {
            if let Some(b) = nodes[..i].iter().find(|b| b.addr == a.addr) {
                return Err(format!(
                    "nodes {} and {} share the address {}",
                    b.id, a.id, a.addr
                ));
            }
        }

        let profile = LatencyProfile::named(&file.latency).map_err(|e| e.to_string())?;
        let dcs = file.dcs.unwrap_or(profile.dcs.len().min(n));
        let profile = profile.truncated(dcs).map_err(|e| e.to_string())?;
        let placement = Placement::build(file.placement, profile, n, file.replication)
            .map_err(|e| e.to_string())?;

        let o = &file.options;
        let mut options = ProtocolOptions::default();
        let ms = Duration::from_millis;
        if let Some(v) = o.participant_timeout_ms {
            options.participant_timeout = ms(v);
        }
        if let Some(v) = o.gc_retention_ms {
            options.gc_retention = ms(v);
        }
        if let Some(v) = o.gc_interval_ms {
            if v == 0 {
                return Err("options.gc_interval_ms must be at least 1".into());
            }
            options.gc_interval = ms(v);
        }
        if let Some(v) = o.idle_txn_timeout_ms {
            options.idle_txn_timeout = ms(v);
        }
        for (key, value) in &o.settings {
            let value = match value {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(_)
                | toml::Value::Float(_)
                | toml::Value::Boolean(_)
                | toml::Value::Datetime(_) => value.to_string(),
                toml::Value::Array(_) | toml::Value::Table(_) => {
                    return Err(format!(
                        "options.settings.{key} must be a string, a number or a boolean"
                    ));
                }
            };
            options.settings.insert(key.clone(), value);
        }
        protocol
            .validate_for_cluster(&options.settings, n, file.replication)
            .map_err(|e| format!("options.settings: {e}"))?;

        let security = security(&file, &nodes, base)?;
        let limits = file.limits.resolve()?;
        let identity = identity(&file, dcs, &options, &nodes, &security);
        let data_dirs = nodes
            .iter()
            .map(|node| node.data_dir.as_ref().map(|dir| base.join(dir)))
            .collect();
        Ok(Cluster {
            protocol,
            placement: Arc::new(placement),
            options: Arc::new(options),
            seed: file.seed,
            emulate_latency: file.emulate_latency,
            nodes,
            identity,
            security,
            data_dirs,
            limits,
        })
    }
}

/// Resolve `[security]` (see [`SecurityFile`]).
fn security(file: &ClusterFile, nodes: &[NodeEntry], base: &Path) -> Result<Security, String> {
    let Some(security) = &file.security else {
        return Err("no [security] table: say `tls = true` (with certificates: `augur cluster init` writes them) or, for a benchmark on loopback only, `tls = false`".into());
    };
    let path = |p: &str| base.join(p);
    let client_token = match &security.client_token_file {
        None => None,
        Some(file) => {
            let file = path(file);
            let token = std::fs::read_to_string(&file).map_err(|e| {
                format!(
                    "security.client_token_file: cannot read {}: {e}",
                    file.display()
                )
            })?;
            let token = token.trim().to_string();
            if token.is_empty() {
                return Err(format!(
                    "security.client_token_file: {} is empty",
                    file.display()
                ));
            }
            Some(token)
        }
    };
    if !security.tls {
        if security.ca.is_some() || nodes.iter().any(|n| n.cert.is_some() || n.key.is_some()) {
            return Err(
                "security.tls is false, yet certificates are named: set tls = true to use them"
                    .into(),
            );
        }
        return Ok(Security {
            tls: None,
            client_token,
        });
    }
    let ca = security
        .ca
        .as_deref()
        .ok_or("security.ca: the CA certificate is required with tls = true")?;
    let mut files = Vec::with_capacity(nodes.len());
    for node in nodes {
        match (&node.cert, &node.key) {
            (Some(cert), Some(key)) => files.push((path(cert), path(key))),
            _ => {
                return Err(format!(
                    "node {}: `cert` and `key` are required with tls = true",
                    node.id
                ));
            }
        }
    }
    Ok(Security {
        tls: Some(TlsFiles {
            ca: path(ca),
            nodes: files,
        }),
        client_token,
    })
}

/// What every node of the cluster must agree on: the resolved settings (so that writing a
/// default out does not change it), each node's address, and whether TLS is on. Where a node
/// listens and where its files are is its own business.
fn identity(
    file: &ClusterFile,
    dcs: usize,
    options: &ProtocolOptions,
    nodes: &[NodeEntry],
    security: &Security,
) -> ClusterIdentity {
    let ms = |d: Duration| d.as_millis().to_string();
    let mut settings = vec![
        ("protocol".to_string(), file.protocol.clone()),
        ("latency".to_string(), file.latency.clone()),
        ("dcs".to_string(), dcs.to_string()),
        ("replication".to_string(), file.replication.to_string()),
        ("placement".to_string(), file.placement.to_string()),
        ("seed".to_string(), file.seed.to_string()),
        (
            "emulate_latency".to_string(),
            file.emulate_latency.to_string(),
        ),
        ("tls".to_string(), security.tls.is_some().to_string()),
        (
            "options.participant_timeout_ms".to_string(),
            ms(options.participant_timeout),
        ),
        (
            "options.gc_retention_ms".to_string(),
            ms(options.gc_retention),
        ),
        (
            "options.gc_interval_ms".to_string(),
            ms(options.gc_interval),
        ),
        (
            "options.idle_txn_timeout_ms".to_string(),
            ms(options.idle_txn_timeout),
        ),
    ];
    for (key, value) in &options.settings {
        settings.push((format!("options.settings.{key}"), value.clone()));
    }
    settings.push(("nodes".to_string(), nodes.len().to_string()));
    for node in nodes {
        settings.push((format!("node {} addr", node.id), node.addr.clone()));
    }
    ClusterIdentity {
        cluster_id: file.cluster_id.clone(),
        settings,
    }
}

/// Resolve `host:port` to its first socket address.
pub fn resolve(what: &str, addr: &str) -> Result<SocketAddr, String> {
    addr.to_socket_addrs()
        .map_err(|e| format!("{what}: cannot resolve '{addr}': {e}"))?
        .next()
        .ok_or_else(|| format!("{what}: '{addr}' resolves to no address"))
}

impl Cluster {
    /// Where clients and peers reach node `id` (its `addr`, resolved).
    pub fn node_addr(&self, id: NodeId) -> Result<SocketAddr, String> {
        let node = self.nodes.get(id.0 as usize).ok_or_else(|| {
            format!(
                "node {id} is not in the cluster (its ids are 0..={})",
                self.nodes.len().saturating_sub(1)
            )
        })?;
        resolve(&format!("node {}", node.id), &node.addr)
    }

    /// How clients reach this cluster, each request waiting at most `timeout`: its id and
    /// fingerprint, its client token, and TLS towards its nodes (the CA read once here).
    pub fn client_config(&self, timeout: Duration) -> anyhow::Result<ClientConfig> {
        let tls = match &self.security.tls {
            None => None,
            Some(files) => Some(ClientTls::load(&files.ca).map_err(BadInput)?),
        };
        Ok(ClientConfig {
            cluster_id: self.identity.cluster_id.clone(),
            fingerprint: self.identity.fingerprint(),
            token: self.security.client_token.clone(),
            tls,
            request_timeout: timeout,
            origin: std::time::Instant::now(),
        })
    }

    /// A client session with node `home`, each request waiting at most `timeout`: what the
    /// command-line clients (`augur get`, `put`, `txn`, `shell`) work through.
    pub async fn open_session(
        &self,
        home: NodeId,
        timeout: Duration,
    ) -> anyhow::Result<augur_client::Session<TcpTransport>> {
        let clients = self.client_config(timeout)?;
        Ok(augur_client::Session::new(
            self.connect(&clients, home).await?,
        ))
    }

    /// Every node of the cluster, `first` in its order, then the others in id order: the order
    /// in which a client that lost its node tries the others.
    pub fn nodes_from(&self, first: &[NodeId]) -> Vec<NodeId> {
        let others = self.placement.nodes().filter(|n| !first.contains(n));
        first.iter().copied().chain(others).collect()
    }

    /// Open a client connection to node `home`. Every client of a running cluster (`augur
    /// get`, `put`, `shell`, `bench --cluster`) connects through here; the node assigns the
    /// connection its client id.
    pub async fn connect(
        &self,
        config: &ClientConfig,
        home: NodeId,
    ) -> anyhow::Result<TcpTransport> {
        let addr = self.node_addr(home).map_err(BadInput)?;
        TcpTransport::connect(addr, home, config)
            .await
            .map_err(|e| anyhow::anyhow!("cannot use node {home} at {addr}: {e}"))
    }
}

/// Worker threads for each of `nodes` node processes sharing this machine with their clients:
/// each gets its share of the cores rather than a thread per core, which on a small machine
/// would spend the cores on context switches between the nodes' idle threads.
pub fn node_threads(nodes: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores / nodes.max(1)).max(1)
}

/// Distinct addresses on loopback that were free a moment ago (every listener is held until
/// all are bound, so no port is handed out twice).
pub fn free_loopback_addrs(n: usize) -> std::io::Result<Vec<SocketAddr>> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()?;
    listeners.iter().map(|l| l.local_addr()).collect()
}

/// A client connection to a running cluster that follows the cluster when its node goes away.
/// A request whose connection closed (the node died or restarted) fails as it would on a
/// plain connection (`TransportError::Disconnected`: the transaction's outcome is the caller's
/// to judge), and the connection moves to the next node that accepts one, its home node first
/// (in case it is back already), then the others in turn. The client id is the new
/// connection's from then on, so a history shows the moved client as a new session.
/// `augur bench --cluster`'s clients use it, so that a run goes on through a node's death.
pub struct FollowingTransport {
    /// Whether the connection moves at all (a probe of one node's counters stays with it).
    follows: bool,
    /// Every node with its address, in the order tried when the connection moves: home first,
    /// then the others in id order.
    nodes: Vec<(NodeId, SocketAddr)>,
    config: ClientConfig,
    current: std::sync::Mutex<Arc<TcpTransport>>,
    /// Held while one request moves the connection, so that requests failing together move
    /// it once.
    moving: tokio::sync::Mutex<()>,
}

impl FollowingTransport {
    /// Connect to `home` (which must answer now); the connection moves when `follows`.
    pub async fn connect(
        cluster: &Cluster,
        config: &ClientConfig,
        home: NodeId,
        follows: bool,
    ) -> anyhow::Result<FollowingTransport> {
        let first = cluster.connect(config, home).await?;
        let nodes = cluster
            .nodes_from(&[home])
            .into_iter()
            .map(|n| cluster.node_addr(n).map(|addr| (n, addr)))
            .collect::<Result<_, _>>()
            .map_err(BadInput)?;
        Ok(FollowingTransport {
            follows,
            nodes,
            config: config.clone(),
            current: std::sync::Mutex::new(Arc::new(first)),
            moving: tokio::sync::Mutex::new(()),
        })
    }

    fn current(&self) -> Arc<TcpTransport> {
        self.current.lock().expect("transport lock").clone()
    }

    /// Replace `broken` (unless another request did already) with a connection to the first
    /// node that accepts one: home first, then the others in id order. None does: `broken`
    /// stays, and the next request tries again.
    async fn move_from(&self, broken: &Arc<TcpTransport>) {
        let _moving = self.moving.lock().await;
        if !Arc::ptr_eq(&self.current(), broken) {
            return;
        }
        for (node, addr) in &self.nodes {
            if let Ok(fresh) = TcpTransport::connect(*addr, *node, &self.config).await {
                *self.current.lock().expect("transport lock") = Arc::new(fresh);
                return;
            }
        }
    }
}

impl augur_client::Transport for FollowingTransport {
    fn client_id(&self) -> augur_types::ClientId {
        self.current().client_id()
    }

    fn call(
        &self,
        op: augur_types::ClientOp,
    ) -> futures::future::BoxFuture<
        '_,
        Result<augur_types::ClientReply, augur_contract::TransportError>,
    > {
        Box::pin(async move {
            let transport = self.current();
            let reply = transport.call(op).await;
            if self.follows
                && let Err(augur_contract::TransportError::Disconnected(_)) = &reply
            {
                self.move_from(&transport).await;
            }
            reply
        })
    }

    fn now(&self) -> Duration {
        self.current().now()
    }

    fn sleep(&self, d: Duration) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(tokio::time::sleep(d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
protocol = "clocksi-rep"
latency = "3dc"
replication = 2
seed = 9

[security]
tls = false

[options]
participant_timeout_ms = 500
[options.settings]
precise_clock = "on"

[[nodes]]
id = 1
addr = "127.0.0.1:7101"
[[nodes]]
id = 0
addr = "127.0.0.1:7100"
listen = "0.0.0.0:7100"
[[nodes]]
id = 2
addr = "127.0.0.1:7102"
"#;

    fn error_of(text: &str) -> String {
        match Cluster::parse(text) {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(e) => e,
        }
    }

    #[test]
    fn a_good_file_resolves_to_a_cluster() {
        let c = Cluster::parse(GOOD).unwrap();
        assert_eq!(c.protocol.name, "clocksi-rep");
        assert_eq!(c.placement.node_count(), 3);
        assert_eq!(c.placement.replication_factor(), 2);
        assert_eq!(c.placement.profile().dcs, ["VA", "OR", "IE"]);
        assert_eq!(c.options.participant_timeout, Duration::from_millis(500));
        assert_eq!(c.options.settings["precise_clock"], "on");
        assert_eq!(c.seed, 9);
        assert!(c.emulate_latency);
        let ids: Vec<u32> = c.nodes.iter().map(|n| n.id).collect();
        assert_eq!(ids, [0, 1, 2]);
        assert_eq!(c.nodes[0].listen.as_deref(), Some("0.0.0.0:7100"));
    }

    #[test]
    fn defaults_fill_what_is_left_out() {
        let c = Cluster::parse(
            "protocol = \"nocc\"\nsecurity = { tls = false }\n[[nodes]]\nid = 0\naddr = \"127.0.0.1:1\"\n",
        )
        .unwrap();
        assert_eq!(c.placement.profile().name, "lan");
        assert_eq!(c.placement.replication_factor(), 1);
        assert_eq!(*c.options, ProtocolOptions::default());
        // Fewer nodes than the profile has data centres: the profile is truncated.
        let c = Cluster::parse(
            "protocol = \"nocc\"\nlatency = \"ec2-9dc\"\nsecurity = { tls = false }\n[[nodes]]\nid = 0\naddr = \"a:1\"\n[[nodes]]\nid = 1\naddr = \"b:1\"\n",
        )
        .unwrap();
        assert_eq!(c.placement.profile().dcs, ["IE", "SU"]);
    }

    #[test]
    fn a_written_file_reads_back() {
        let file: ClusterFile = toml::from_str(GOOD).unwrap();
        let text = toml::to_string(&file).unwrap();
        let c = Cluster::parse(&text).unwrap();
        assert_eq!(c.placement.replication_factor(), 2);
        assert_eq!(c.options.settings["precise_clock"], "on");
    }

    #[test]
    fn bad_files_are_refused_with_one_line_reasons() {
        let cases = [
            (
                GOOD.replace("clocksi-rep", "spanner"),
                "unknown protocol 'spanner'",
            ),
            (GOOD.replace("3dc", "wan"), "unknown latency profile 'wan'"),
            (GOOD.replace("id = 2", "id = 1"), "node id 1 appears twice"),
            (
                GOOD.replace("id = 2", "id = 5"),
                "id 2 is missing (id 5 is out of range)",
            ),
            (
                GOOD.replace("7102", "7101"),
                "nodes 1 and 2 share the address",
            ),
            (
                GOOD.replace("replication = 2", "replication = 4"),
                "replication factor 4",
            ),
            (
                GOOD.replace("seed = 9", "seed = 9\ncolour = 1"),
                "line 6: unknown field `colour`",
            ),
            (
                GOOD.replace("seed = 9", "seed = \"x\""),
                "line 5: invalid type",
            ),
            (
                GOOD.replace("precise_clock = \"on\"", "precise_clock = [1]"),
                "options.settings.precise_clock must be",
            ),
            (
                GOOD.replace("precise_clock = \"on\"", "precise_clock = \"maybe\""),
                "bad value 'maybe' for setting 'precise_clock'",
            ),
            (
                GOOD.replace("precise_clock = \"on\"", "batch = 4"),
                "unknown setting 'batch' for protocol clocksi-rep",
            ),
            (
                "protocol = \"nocc\"\nnodes = []\n".to_string(),
                "no [[nodes]]",
            ),
            (
                "protocol = \"nocc\"\n[[nodes]]\nid = 0\n".to_string(),
                "missing field `addr`",
            ),
        ];
        for (text, expected) in cases {
            let e = error_of(&text);
            assert!(e.contains(expected), "{e:?} should contain {expected:?}");
            assert!(!e.contains('\n'), "{e:?} spans lines");
        }
    }

    #[test]
    fn security_must_be_stated_and_complete() {
        let e = error_of(&GOOD.replace("[security]\ntls = false\n", ""));
        assert!(e.contains("no [security] table"), "{e}");
        let e = error_of(&GOOD.replace("tls = false", "tls = true"));
        assert!(
            e.contains("security.ca: the CA certificate is required"),
            "{e}"
        );
        let e = error_of(&GOOD.replace("tls = false", "tls = true\nca = \"ca.crt\""));
        assert!(e.contains("`cert` and `key` are required"), "{e}");
        let e = error_of(&GOOD.replace("tls = false", "tls = false\nca = \"ca.crt\""));
        assert!(e.contains("yet certificates are named"), "{e}");
        let e = error_of(&GOOD.replace("tls = false", "tls = false\nclient_token_file = \"nope\""));
        assert!(e.contains("cannot read"), "{e}");
    }

    #[test]
    fn identities_differ_by_what_nodes_must_share_and_name_it() {
        let a = Cluster::parse(GOOD).unwrap().identity;
        // Where a node listens is its own business; writing a default out changes nothing.
        let same = GOOD
            .replace("listen = \"0.0.0.0:7100\"", "")
            .replace("[options]", "[options]\ngc_interval_ms = 50");
        assert_eq!(Cluster::parse(&same).unwrap().identity, a);
        let b = Cluster::parse(&GOOD.replace("replication = 2", "replication = 3"))
            .unwrap()
            .identity;
        assert_ne!(a.fingerprint(), b.fingerprint());
        assert_eq!(a.differences(&b), ["replication = 2 here, 3 there"]);
        let c = Cluster::parse(&GOOD.replace("7102", "7103"))
            .unwrap()
            .identity;
        assert_eq!(
            a.differences(&c),
            ["node 2 addr = 127.0.0.1:7102 here, 127.0.0.1:7103 there"]
        );
    }

    #[test]
    fn placement_is_chosen_by_the_file_and_shared_by_every_node() {
        let ring = Cluster::parse(GOOD).unwrap();
        assert_eq!(ring.placement.layout(), Layout::Ring);
        assert_eq!(ring.placement.partition_count(), 3);
        // Writing the default out changes nothing.
        let said = Cluster::parse(&GOOD.replace("seed = 9", "seed = 9\nplacement = \"ring\""));
        assert_eq!(said.unwrap().identity, ring.identity);
        let text = GOOD.replace("seed = 9", "seed = 9\nplacement = \"hash\"");
        let hash = Cluster::parse(&text).unwrap();
        assert_eq!(hash.placement.layout().to_string(), "hash");
        assert_eq!(hash.placement.partition_count(), 256);
        assert_eq!(
            ring.identity.differences(&hash.identity),
            ["placement = ring here, hash there"]
        );
        // Written out and read back, the file keeps its layout.
        let file: ClusterFile = toml::from_str(&text).unwrap();
        let back = Cluster::parse(&toml::to_string(&file).unwrap()).unwrap();
        assert_eq!(back.identity, hash.identity);
        let e = error_of(&GOOD.replace("seed = 9", "seed = 9\nplacement = \"random\""));
        assert!(
            e.contains("unknown placement 'random'; valid placements: ring, hash"),
            "{e}"
        );
        let e = error_of(&GOOD.replace("seed = 9", "seed = 9\nplacement = \"hash:partitions=2\""));
        assert!(e.contains("master of no partition"), "{e}");
    }

    #[test]
    fn limits_default_and_are_checked() {
        assert_eq!(Cluster::parse(GOOD).unwrap().limits, Limits::default());
        let c = Cluster::parse(&format!(
            "{GOOD}\n[limits]\nmax_clients = 10\nframe_timeout_ms = 500\n"
        ))
        .unwrap();
        assert_eq!(c.limits.max_clients, 10);
        assert_eq!(c.limits.frame_timeout, Duration::from_millis(500));
        let e = error_of(&format!("{GOOD}\n[limits]\nmax_clients = 0\n"));
        assert!(e.contains("limits.max_clients must be at least 1"), "{e}");
        let e = error_of(&format!("{GOOD}\n[limits]\nmax_frame_bytes = 999999999\n"));
        assert!(e.contains("at most"), "{e}");
    }
}
