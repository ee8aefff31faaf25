//! A cluster of `augur node` processes on loopback, set up by `augur cluster init` (TLS between
//! peers and to clients, a client token) and driven by TCP client sessions: transactions across
//! partitions and nodes, a write-write conflict, malformed frames, a node whose cluster file
//! differs, and a node that dies; the command-line clients, `augur bench --cluster`, the shell on
//! a terminal, and the Python client over the gRPC API.

use augur::cluster::{self as cluster_file, ClusterFile};
use augur_client::{Session, TxnError};
use augur_runtime::tcp::{ClientConfig, TcpTransport};
use augur_types::{AbortReason, Key, NodeId, Timestamp, Value};
use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{CHILD_LIMIT, output_bounded, wait_within};

const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// `n` distinct loopback addresses that were free a moment ago. Every listener is held until
/// all are bound: one bound and dropped at a time, the kernel may hand the same port out twice.
fn free_addrs(n: usize) -> Vec<SocketAddr> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    listeners.iter().map(|l| l.local_addr().unwrap()).collect()
}

/// `GET /metrics` of the node whose metrics address is `addr`.
fn scrape(addr: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    // A node that accepts and never answers must fail the test, not hang it.
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200 OK"), "{response}");
    response
}

/// Node processes, killed when dropped (also when a test panics, after printing their logs).
struct Cluster {
    dir: tempfile::TempDir,
    path: PathBuf,
    addrs: Vec<SocketAddr>,
    children: Vec<Option<Child>>,
}

impl Cluster {
    /// Start `n` nodes of `clocksi-rep` with `replication` replicas per partition and wait until
    /// every node accepts connections.
    fn start(n: usize, replication: usize) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        // Free ports for every node's peer, metrics and gRPC addresses, all distinct.
        let mut free = free_addrs(3 * n).into_iter();
        let addrs: Vec<SocketAddr> = free.by_ref().take(n).collect();
        let status = Command::new(env!("CARGO_BIN_EXE_augur"))
            .args(["cluster", "init", "--nodes", &n.to_string()])
            .args(["--replication", &replication.to_string()])
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "augur cluster init failed");
        // As an operator would: put the nodes on the ports that are free, and shorten the
        // participant timeout so that a dead node is noticed quickly.
        let path = dir.path().join("cluster.toml");
        let mut file: ClusterFile =
            toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for (node, addr) in file.nodes.iter_mut().zip(&addrs) {
            node.addr = addr.to_string();
            node.metrics = free.next().map(|a| a.to_string());
            node.grpc = free.next().map(|a| a.to_string());
        }
        file.options.participant_timeout_ms = Some(500);
        std::fs::write(&path, toml::to_string(&file).unwrap()).unwrap();
        let mut cluster = Cluster {
            dir,
            path: path.clone(),
            addrs,
            children: Vec::new(),
        };
        for i in 0..n {
            cluster.children.push(None);
            cluster.spawn(i, &path);
        }
        for i in 0..n {
            cluster.wait_until_listening(i);
        }
        cluster.wait_until_linked();
        cluster
    }

    /// Wait until every node reports its links to all its peers up (`augur_peer_link_up`), so
    /// that the first transactions do not race the nodes' TLS handshakes.
    fn wait_until_linked(&self) {
        let file: ClusterFile =
            toml::from_str(&std::fs::read_to_string(&self.path).unwrap()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        for node in &file.nodes {
            let metrics = node.metrics.clone().unwrap();
            loop {
                let text = scrape(&metrics);
                let up = text
                    .lines()
                    .filter(|l| l.starts_with("augur_peer_link_up") && l.ends_with(" 1"))
                    .count();
                if up == file.nodes.len() - 1 {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "node {} has {up} links up:\n{text}",
                    node.id
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// Start node `i` from the cluster file at `config`, its output appended to its log.
    fn spawn(&mut self, i: usize, config: &std::path::Path) {
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.log_path(i))
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_augur"))
            .arg("node")
            .arg("--config")
            .arg(config)
            .arg("--id")
            .arg(i.to_string())
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.children[i] = Some(child);
    }

    fn log_path(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("node{i}.log"))
    }

    fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.log_path(i)).unwrap_or_default()
    }

    fn wait_until_listening(&mut self, i: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.children[i].as_mut().unwrap().try_wait().unwrap() {
                panic!("node {i} exited with {status}:\n{}", self.log(i));
            }
            if TcpStream::connect_timeout(&self.addrs[i], Duration::from_millis(200)).is_ok() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "node {i} does not listen:\n{}",
                self.log(i)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether node `i`'s process is still running.
    fn alive(&mut self, i: usize) -> bool {
        match self.children[i].as_mut() {
            Some(child) => child.try_wait().unwrap().is_none(),
            None => false,
        }
    }

    fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.children[i].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// How clients reach the cluster, from its file (the CA, the token).
    fn clients(&self) -> (cluster_file::Cluster, ClientConfig) {
        let cluster = cluster_file::Cluster::load(&self.path).unwrap();
        let config = cluster.client_config(REQUEST_TIMEOUT).unwrap();
        (cluster, config)
    }

    async fn session(&self, node: usize) -> Session<TcpTransport> {
        let (cluster, config) = self.clients();
        let t = cluster.connect(&config, NodeId(node as u32)).await.unwrap();
        Session::new(t)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.children.len() {
            self.kill(i);
        }
        if std::thread::panicking() {
            for i in 0..self.children.len() {
                eprintln!("--- node {i} log ---\n{}", self.log(i));
            }
        }
    }
}

fn value(s: &str) -> Option<Value> {
    Some(Value::copy_from_slice(s.as_bytes()))
}

/// Write `writes` in one transaction of `session` and commit it.
async fn write_all(session: &Session<TcpTransport>, writes: &[(Key, &str)]) -> Timestamp {
    let mut txn = session.begin(false).await.unwrap();
    for (key, v) in writes {
        txn.write(key.clone(), value(v)).unwrap();
    }
    txn.commit().await.unwrap()
}

/// Read `keys` in a read-only transaction whose snapshot includes `after`.
async fn read_all(
    session: &Session<TcpTransport>,
    keys: &[Key],
    after: Timestamp,
) -> Vec<Option<Value>> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut txn = session.begin(true).await.unwrap();
        // Clocks of different processes are not exactly aligned: wait for a later snapshot.
        if txn.snapshot() < after {
            assert!(Instant::now() < deadline, "snapshots stay before {after}");
            txn.abort().await;
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        }
        let mut values = Vec::new();
        for key in keys {
            values.push(txn.read(key).await.unwrap());
        }
        txn.commit().await.unwrap();
        return values;
    }
}

/// Send `bytes` to `addr` on a fresh connection and check the node closes it.
fn assert_dropped(addr: SocketAddr, bytes: &[u8]) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(bytes).unwrap();
    let mut buf = [0u8; 256];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return,
            Err(e) => panic!("connection not dropped after {bytes:?}: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_processes_run_transactions_over_tcp() {
    let mut cluster = Cluster::start(3, 3);

    // One transaction writing a key on each partition (shard tag mod 3), committed at node 0 and
    // read back through node 1.
    let s0 = cluster.session(0).await;
    let s1 = cluster.session(1).await;
    let s2 = cluster.session(2).await;
    let keys: Vec<Key> = (0..3).map(|shard| Key::numbered(shard, 7)).collect();
    let writes: Vec<(Key, &str)> = keys.iter().cloned().zip(["a", "b", "c"]).collect();
    let committed = write_all(&s0, &writes).await;
    assert_eq!(
        read_all(&s1, &keys, committed).await,
        [value("a"), value("b"), value("c")]
    );

    // Two transactions read and write the same key: the first to commit wins, the other aborts
    // at certification.
    let key = Key::numbered(1, 99);
    let mut first = s0.begin(false).await.unwrap();
    let mut second = s2.begin(false).await.unwrap();
    assert_eq!(first.read(&key).await.unwrap(), None);
    assert_eq!(second.read(&key).await.unwrap(), None);
    first.write(key.clone(), value("first")).unwrap();
    second.write(key.clone(), value("second")).unwrap();
    let committed = first.commit().await.unwrap();
    // Let the commit reach every replica, so certification sees a committed version.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        second.commit().await.unwrap_err(),
        TxnError::Aborted(AbortReason::WriteWriteConflict)
    );
    assert_eq!(
        read_all(&s1, std::slice::from_ref(&key), committed).await,
        [value("first")]
    );

    // Malformed frames get their connection dropped; the node goes on serving.
    let addr = cluster.addrs[1];
    tokio::task::spawn_blocking(move || {
        assert_dropped(addr, b"\xff\xff\xff\xffnot a frame");
        assert_dropped(addr, b"\x00\x00\x00\x05\xff\xff\xff\xff\xff");
        assert_dropped(addr, b"\x00\x00\x00\x03\x63\x00\x00"); // wire version 99
    })
    .await
    .unwrap();
    assert!(cluster.alive(1), "node 1 died:\n{}", cluster.log(1));
    let committed = write_all(&s1, &[(Key::numbered(2, 1), "after garbage")]).await;
    assert_eq!(
        read_all(&s0, &[Key::numbered(2, 1)], committed).await,
        [value("after garbage")]
    );
    let log = cluster.log(1);
    assert!(
        log.contains("dropping connection"),
        "no reason logged:\n{log}"
    );
}

/// How soon after a master's death its partition must commit again: the lease (1 s), the
/// clock-skew bound (0.1 s), a heartbeat and a Raft commit, and the client's retries.
const FAILOVER_BOUND: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_master_is_replaced_and_every_partition_commits_again() {
    // Two replicas per partition: partition p lives on nodes p and p + 1 (mod 3).
    let mut cluster = Cluster::start(3, 2);
    let s0 = cluster.session(0).await;
    let s2 = cluster.session(2).await;
    write_all(
        &s0,
        &[(Key::numbered(0, 1), "x"), (Key::numbered(2, 1), "y")],
    )
    .await;

    cluster.kill(2);
    let killed = Instant::now();

    // The dead node's clients learn it at once.
    assert!(matches!(
        s2.begin(false).await,
        Err(TxnError::Unavailable(_))
    ));
    let (file, config) = cluster.clients();
    assert!(file.connect(&config, NodeId(2)).await.is_err());

    // Node 2 mastered partition 2 and replicated partition 1. Once its lease ran out, partition
    // 2's other replica (node 0) masters it and partition 1 commits without node 2: a
    // transaction writing every partition commits again, after aborts that say why.
    let all: Vec<Key> = (0..3).map(|p| Key::numbered(p, 1)).collect();
    let committed = loop {
        let mut txn = s0.begin(false).await.unwrap();
        for key in &all {
            txn.write(key.clone(), value("after")).unwrap();
        }
        match txn.commit().await {
            Ok(ts) => break ts,
            Err(TxnError::Aborted(AbortReason::Timeout | AbortReason::Reconfigured)) => {}
            Err(other) => panic!("a commit during the fail-over failed with {other}"),
        }
        assert!(
            killed.elapsed() < FAILOVER_BOUND,
            "no commit on every partition {FAILOVER_BOUND:?} after the master's death"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    eprintln!(
        "every partition committed again {:?} after the kill",
        killed.elapsed()
    );
    let s1 = cluster.session(1).await;
    assert_eq!(
        read_all(&s1, &all, committed).await,
        vec![value("after"); 3]
    );

    // The dead node comes back as a replica, copies what it missed, and serves it.
    let path = cluster.path.clone();
    cluster.spawn(2, &path);
    cluster.wait_until_listening(2);
    let s2 = cluster.session(2).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut txn = s2.begin(true).await.unwrap();
        if txn.snapshot() >= committed {
            match txn.read(&Key::numbered(2, 1)).await {
                Ok(v) => {
                    assert_eq!(v, value("after"));
                    break;
                }
                // Refused (`reconfigured`) while the partition is copied back, say.
                Err(TxnError::Aborted(_)) => {}
                Err(other) => panic!("node 2 failed a read after its restart: {other}"),
            }
        } else {
            txn.abort().await;
        }
        assert!(Instant::now() < deadline, "node 2 never served again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_another_cluster_file_is_refused_with_the_difference() {
    let mut cluster = Cluster::start(3, 3);
    let s0 = cluster.session(0).await;
    write_all(&s0, &[(Key::numbered(2, 5), "before")]).await;

    // Node 2 comes back with a file that says 2 replicas where the others say 3.
    cluster.kill(2);
    let mut file: ClusterFile =
        toml::from_str(&std::fs::read_to_string(&cluster.path).unwrap()).unwrap();
    file.replication = 2;
    let other = cluster.dir.path().join("cluster-2.toml");
    std::fs::write(&other, toml::to_string(&file).unwrap()).unwrap();
    cluster.spawn(2, &other);
    cluster.wait_until_listening(2);

    // Partition 2's writes need node 2: they cannot commit, and each side logs why.
    let mut txn = s0.begin(false).await.unwrap();
    txn.write(Key::numbered(2, 5), value("after")).unwrap();
    assert!(txn.commit().await.is_err());
    let deadline = Instant::now() + Duration::from_secs(10);
    let difference = "replication = 2 here, 3 there";
    while !cluster.log(2).contains(difference) {
        assert!(
            Instant::now() < deadline,
            "node 2 did not name the difference:\n{}",
            cluster.log(2)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        cluster.log(0).contains("replication = 3 here, 2 there"),
        "node 0 did not log the refusal:\n{}",
        cluster.log(0)
    );
    // And a client holding the old file is refused by node 2.
    let (file, config) = cluster.clients();
    let Err(e) = file.connect(&config, NodeId(2)).await else {
        panic!("a client with another cluster file was admitted");
    };
    assert!(format!("{e:#}").contains("cluster file differs"), "{e:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_serve_prometheus_metrics() {
    let cluster = Cluster::start(3, 3);
    let s0 = cluster.session(0).await;
    for i in 0..5 {
        write_all(&s0, &[(Key::numbered(i % 3, i as u64), "v")]).await;
    }
    let file: ClusterFile =
        toml::from_str(&std::fs::read_to_string(&cluster.path).unwrap()).unwrap();
    let metrics = file.nodes[0].metrics.clone().unwrap();
    let text = tokio::task::spawn_blocking(move || scrape(&metrics))
        .await
        .unwrap();
    let value = |name: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
    };
    assert!(value("augur_commits_total") >= 5.0);
    assert_eq!(value("augur_peer_link_up{node=\"n0\",peer=\"n1\"}"), 1.0);
    assert!(value("augur_log_sync_seconds_count") >= 1.0);
    assert!(value("augur_commit_latency_seconds_count") >= 5.0);
    assert_eq!(value("augur_client_connections"), 1.0);
    // Every metric says what it is, and the build is named.
    assert!(
        text.contains("# HELP augur_commits_total Transactions committed"),
        "{text}"
    );
    let build = text
        .lines()
        .find(|l| l.starts_with("augur_build_info{"))
        .unwrap_or_else(|| panic!("no augur_build_info in:\n{text}"));
    assert!(
        build.contains(&format!("version=\"{}\"", env!("CARGO_PKG_VERSION"))),
        "{build}"
    );
    assert!(build.contains("protocol=\""), "{build}");
    assert!(build.ends_with(" 1"), "{build}");
}

#[test]
fn get_put_and_txn_from_the_command_line() {
    let mut cluster = Cluster::start(3, 3);
    let path = cluster.path.clone();
    let augur = |args: &[&str]| {
        let out = output_bounded(
            Command::new(env!("CARGO_BIN_EXE_augur"))
                .args(args)
                .arg("--cluster")
                .arg(&path),
        );
        (
            out.status.code().unwrap(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, _, err) = augur(&["put", "greeting", "hello world"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = augur(&["get", "greeting"]);
    assert_eq!((code, out.as_str()), (0, "hello world\n"), "{err}");
    // Through another coordinator, in one transaction with a write.
    let (code, out, err) = augur(&[
        "txn",
        "--node",
        "2",
        "get greeting",
        "put other 7",
        "get other",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "greeting hello world\nother 7\n");
    let (code, out, _) = augur(&["get", "nothing-here"]);
    assert_eq!((code, out.as_str()), (3, ""));
    let (code, _, err) = augur(&["txn", "scan all"]);
    assert_eq!(code, 2);
    assert!(err.contains("expected `get KEY`"), "{err}");
    let (code, _, err) = augur(&["get", "x", "--node", "9"]);
    assert_eq!(code, 2);
    assert!(err.contains("node n9 is not in the cluster"), "{err}");

    // The key's master dies: its value is read from another replica, and a write goes through
    // once that replica took the partition over.
    let placement = cluster.clients().0.placement;
    let master = placement.master(placement.partition_of(&Key::from_bytes(b"greeting")));
    cluster.kill(master.0 as usize);
    let (code, out, err) = augur(&["get", "greeting"]);
    assert_eq!((code, out.as_str()), (0, "hello world\n"), "{err}");
    let (code, _, err) = augur(&["put", "greeting", "still here"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = augur(&["get", "greeting"]);
    assert_eq!((code, out.as_str()), (0, "still here\n"), "{err}");
}

#[test]
fn bench_drives_a_running_cluster_and_checks_it() {
    let cluster = Cluster::start(3, 3);
    let out = cluster.dir.path().join("bench");
    let run = |extra: &[&str]| {
        output_bounded(
            Command::new(env!("CARGO_BIN_EXE_augur"))
                .args(["bench", "--workload", "bank", "--check", "--duration", "2"])
                .args(["--warmup", "0.5", "--clients", "2"])
                .arg("--cluster")
                .arg(&cluster.path)
                .arg("--out")
                .arg(&out)
                .args(extra),
        )
    };
    let output = run(&[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["config"]["runtime"], "cluster");
    let result = &summary["results"][0];
    assert_eq!(result["protocol"], "clocksi-rep");
    assert!(result["committed"].as_u64().unwrap() > 0, "{result}");
    let checks = result["checks"].as_array().unwrap();
    assert!(
        !checks.is_empty() && checks.iter().all(|c| c["passed"] == true),
        "{checks:?}"
    );
    // Flags that contradict the cluster are refused.
    let output = run(&["--nodes", "5"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("the cluster has nodes 3"), "{stderr}");
    // The cluster now holds bank's data: bank runs over it again, another workload is refused
    // before it writes a key (its values would be balances bank cannot read).
    let output = run(&[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let output = output_bounded(
        Command::new(env!("CARGO_BIN_EXE_augur"))
            .args(["bench", "--workload", "synthetic-str", "--duration", "1"])
            .arg("--cluster")
            .arg(&cluster.path)
            .arg("--out")
            .arg(&out),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("holds the data of an earlier bench of workload bank"),
        "{stderr}"
    );
}

/// The node every client of `augur bench --cluster` connects to dies in the middle of the run:
/// the clients move to the other nodes, the cluster fails its partitions over, and the run
/// commits to its end with the bank's audit holding. The node comes back 2 s later: the
/// transactions it coordinated and had prepared everywhere when it died stay in doubt until
/// then (their decision is only in its log: 2PC's blocking window), and keep their keys.
#[test]
fn a_bench_goes_on_through_a_node_death() {
    let mut cluster = Cluster::start(3, 3);
    let out = cluster.dir.path().join("bench");
    let bench = Command::new(env!("CARGO_BIN_EXE_augur"))
        .args(["bench", "--workload", "bank", "--check", "--duration", "8"])
        .args(["--warmup", "0.5", "--clients", "4", "--client-nodes", "1"])
        .arg("--cluster")
        .arg(&cluster.path)
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    cluster.kill(1);
    std::thread::sleep(Duration::from_secs(2));
    let path = cluster.path.clone();
    cluster.spawn(1, &path);
    let output = wait_within(bench, CHILD_LIMIT);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let checks = summary["results"][0]["checks"].as_array().unwrap();
    assert!(
        !checks.is_empty() && checks.iter().all(|c| c["passed"] == true),
        "{checks:?}"
    );
    // Commits in the run's last second, well after the death (per-second samples).
    let samples = std::fs::read_to_string(out.join("samples.csv")).unwrap();
    let last = samples.lines().last().unwrap();
    let committed: u64 = last.split(',').nth(3).unwrap().parse().unwrap();
    assert!(committed > 0, "nothing committed at the end:\n{samples}");
}

/// A child process on a pseudo-terminal: what it prints is collected, and lines are typed into
/// it, as a person at a terminal would.
#[cfg(target_os = "linux")]
struct OnTerminal {
    child: Child,
    master: std::fs::File,
    seen: std::sync::Arc<std::sync::Mutex<String>>,
}

#[cfg(target_os = "linux")]
impl OnTerminal {
    fn spawn(command: &mut Command) -> OnTerminal {
        use std::os::fd::{FromRawFd, OwnedFd};
        let (mut master, mut slave) = (0, 0);
        // SAFETY: openpty writes two new descriptors into the integers it is given.
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(rc, 0, "openpty failed");
        // SAFETY: both descriptors were just opened and are owned here.
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        let child = command
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave))
            .env("TERM", "xterm")
            .spawn()
            .unwrap();
        let master = std::fs::File::from(master);
        let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let (mut reader, sink) = (master.try_clone().unwrap(), seen.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        OnTerminal {
            child,
            master,
            seen,
        }
    }

    /// Wait until the terminal shows `text` after what was seen before; what it showed since.
    fn expect(&self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let mut seen = self.seen.lock().unwrap();
            if let Some(at) = seen.find(text) {
                let shown: String = seen.drain(..at + text.len()).collect();
                return shown;
            }
            assert!(
                Instant::now() < deadline,
                "{text:?} never shown; the terminal has:\n{seen}"
            );
            drop(seen);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn type_line(&mut self, line: &str) {
        self.master.write_all(line.as_bytes()).unwrap();
        self.master.write_all(b"\r").unwrap();
    }
}

#[cfg(target_os = "linux")]
#[test]
fn the_shell_works_on_a_real_terminal() {
    let cluster = Cluster::start(3, 3);
    let mut shell = OnTerminal::spawn(
        Command::new(env!("CARGO_BIN_EXE_augur"))
            .args(["shell", "--node", "1", "--cluster"])
            .arg(&cluster.path),
    );
    shell.expect("connected to node n1");
    shell.expect("augur> ");
    shell.type_line("put fruit apple pie");
    shell.expect("committed at");
    shell.expect("augur> ");
    shell.type_line("begin");
    shell.expect("augur*> ");
    shell.type_line("get fruit");
    shell.expect("\"apple pie\"");
    shell.type_line("put fruit pear");
    shell.expect("ok (at commit)");
    shell.type_line("commit");
    shell.expect("committed at");
    // History: the up arrow brings back the last line, `commit`; with no transaction open it
    // says so and the session goes on.
    shell.expect("augur> ");
    shell.master.write_all(b"\x1b[A\r").unwrap();
    shell.expect("no transaction is open");
    shell.type_line("frobnicate");
    shell.expect("unknown command 'frobnicate'");
    shell.type_line("get fruit");
    shell.expect("\"pear\"");
    shell.type_line("get nothing");
    shell.expect("(absent)");
    // A registered procedure, one-shot: bank's accounts 0 and 1 open at 100.
    shell.type_line(r#"exec bank/transfer {"from":"0/0","to":"1/1","amount":30,"initial":100}"#);
    shell.expect("committed at");
    shell.expect("wrote 1/1 \"130\"");
    shell.type_line(r#"exec bank/scan {"accounts":2,"partitions":3}"#);
    shell.expect("read  0/0 \"70\"");
    shell.type_line(r#"exec bank/transfer {"from":"0/0"}"#);
    shell.expect("missing field `to`");
    // Lines typed ahead, all arriving at once (a paste into a terminal without bracketed
    // paste): each runs, in order, none is dropped.
    shell
        .master
        .write_all(b"begin\rput pasted one\rget pasted\rcommit\r")
        .unwrap();
    shell.expect("began");
    shell.expect("ok (at commit)");
    shell.expect("\"one\"");
    shell.expect("committed at");
    // A bracketed paste of several lines, accepted with Enter: its lines run one by one.
    shell
        .master
        .write_all(b"\x1b[200~begin\nput pasted two\ncommit\n\x1b[201~\r")
        .unwrap();
    shell.expect("began");
    shell.expect("ok (at commit)");
    shell.expect("committed at");
    shell.type_line("get pasted");
    shell.expect("\"two\"");
    shell.type_line("quit");
    let status = shell.child.wait().unwrap();
    assert!(status.success());
}

/// `augur shell` on `cluster`, its standard streams piped.
fn piped_shell(cluster: &Cluster) -> Child {
    Command::new(env!("CARGO_BIN_EXE_augur"))
        .args(["shell", "--cluster"])
        .arg(&cluster.path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn the_shell_reads_a_pipe_without_prompts() {
    let cluster = Cluster::start(3, 3);
    let mut child = piped_shell(&cluster);
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"put k v\nget k\nbogus\ncommit\n")
        .unwrap();
    let out = wait_within(child, CHILD_LIMIT);
    // A script learns from the exit status that some of its commands failed.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("2 command(s) failed"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert!(lines[0].starts_with("committed at"), "{stdout}");
    assert_eq!(lines[1], "\"v\"");
    assert!(
        lines[2].starts_with("error: unknown command 'bogus'"),
        "{stdout}"
    );
    assert_eq!(lines[3], "error: no transaction is open");
    assert!(!stdout.contains("augur>"), "no prompt on a pipe: {stdout}");
}

/// The shell's node dies between two commands: the next command fails with the reason, the
/// shell connects to another node by itself, and the commands after it run there.
#[test]
fn the_shell_connects_again_when_its_node_dies() {
    use std::io::{BufRead, BufReader};
    let mut cluster = Cluster::start(3, 3);
    let mut child = piped_shell(&cluster);
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut next_line = || {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        line.trim_end().to_string()
    };
    stdin.write_all(b"put k v\n").unwrap();
    assert!(next_line().starts_with("committed at"));
    // Node 0 coordinated the put: were it killed before its commit message reached the other
    // replicas, they would hold the write prepared, in doubt until node 0 came back (2PC's
    // blocking window, docs/architecture/availability.md), and the read below would wait.
    for node in ["1", "2"] {
        let seen = (0..100).any(|_| {
            let out = output_bounded(
                Command::new(env!("CARGO_BIN_EXE_augur"))
                    .args(["get", "k", "--node", node, "--cluster"])
                    .arg(&cluster.path),
            );
            out.stdout == b"v\n" || {
                std::thread::sleep(Duration::from_millis(20));
                false
            }
        });
        assert!(seen, "node {node} never saw the put");
    }
    cluster.kill(0);
    stdin.write_all(b"get k\nget k\n").unwrap();
    drop(stdin);
    let said: Vec<String> = (0..4).map(|_| next_line()).collect();
    assert!(
        said[0].starts_with("error: coordinator unavailable"),
        "{said:?}"
    );
    assert_eq!(
        said[1], "node n0 does not answer: connecting again",
        "{said:?}"
    );
    assert!(said[2].starts_with("connected to node n"), "{said:?}");
    assert_eq!(said[3], "\"v\"", "{said:?}");
    let out = wait_within(child, CHILD_LIMIT);
    // The failed command still counts for the exit status.
    assert_eq!(out.status.code(), Some(1));
}

/// The Python interpreter that has the Python client's requirements (`scripts/python-client.sh`
/// prints one), or `None` after saying the test is skipped. With `AUGUR_REQUIRE_PYTHON` set (CI
/// sets it) a missing interpreter fails the test instead of skipping it.
fn client_python(test: &str) -> Option<PathBuf> {
    match std::env::var_os("AUGUR_PYTHON") {
        Some(python) => Some(PathBuf::from(python)),
        None if std::env::var_os("AUGUR_REQUIRE_PYTHON").is_some() => {
            panic!("{test}: AUGUR_REQUIRE_PYTHON is set but AUGUR_PYTHON is not")
        }
        None => {
            eprintln!(
                "SKIPPED {test}: AUGUR_PYTHON is not set (scripts/python-client.sh prints one)"
            );
            None
        }
    }
}

/// The Python example through nodes 1, 2 and 0 (TLS and a token), what it wrote read back by
/// `augur get`, and a `Cluster` that outlives its first node.
#[test]
fn the_python_client_transfers_and_reads_back_over_grpc() {
    let Some(python) = client_python("the_python_client_transfers_and_reads_back_over_grpc") else {
        return;
    };
    let mut cluster = Cluster::start(3, 3);
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../clients/python/examples/transfer.py"
    );
    let run = |node: &str, amount: &str| {
        let out = output_bounded(
            Command::new(&python)
                .args(["-X", "faulthandler"])
                .arg(example)
                .arg("--cluster")
                .arg(&cluster.path)
                .args(["--node", node, "--amount", amount]),
        );
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    // Through node 1 over TLS with the token, then through node 2, which must see node 1's
    // transfer: 100 and 0 opened, 30 moved, then 25 more.
    let (code, out, err) = run("1", "30");
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("connected to node 1 of"), "{out}");
    assert!(
        out.contains("'acct:alice': 70, 'acct:bob': 30"),
        "{out}{err}"
    );
    let (code, out, err) = run("2", "25");
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("'acct:alice': 45, 'acct:bob': 55"),
        "{out}{err}"
    );
    // What the Python client wrote, the Rust client reads.
    let augur_get = |key: &str| {
        let out = output_bounded(
            Command::new(env!("CARGO_BIN_EXE_augur"))
                .args(["get", key, "--cluster"])
                .arg(&cluster.path),
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(augur_get("acct:alice"), "45");
    assert_eq!(augur_get("acct:bob"), "55");
    // More than alice holds: the example refuses, and nothing moves.
    let (code, _, err) = run("0", "1000");
    assert_ne!(code, Some(0));
    assert!(err.contains("less than 1000"), "{err}");
    assert_eq!(augur_get("acct:alice"), "45");
    // Node 0 dies: a `Cluster` told to start there moves to another node, and its transfer
    // commits once the partitions node 0 mastered have failed over.
    cluster.kill(0);
    let moved = output_bounded(
        Command::new(&python)
            .args(["-X", "faulthandler", "-c", FOLLOWING_TRANSFER])
            .arg(&cluster.path),
    );
    let (out, err) = (
        String::from_utf8_lossy(&moved.stdout),
        String::from_utf8_lossy(&moved.stderr),
    );
    assert!(moved.status.success(), "{out}{err}");
    assert!(out.starts_with("node 1 at "), "{out}{err}");
    assert!(out.trim_end().ends_with("40 60"), "{out}{err}");
}

/// Move 5 from alice to bob through a `Cluster` that starts at node 0, then print the node it
/// ended up at and both balances.
const FOLLOWING_TRANSFER: &str = r#"
import sys
from augur_client import Cluster

def move(txn):
    alice, bob = int(txn.get("acct:alice")), int(txn.get("acct:bob"))
    txn.put("acct:alice", str(alice - 5))
    txn.put("acct:bob", str(bob + 5))

with Cluster.from_cluster_file(sys.argv[1], node=0, timeout=10) as cluster:
    cluster.run(move, attempts=20)
    reads = cluster.transact(reads=["acct:alice", "acct:bob"]).reads
    print(cluster.current.name, int(reads[b"acct:alice"]), int(reads[b"acct:bob"]))
"#;

/// A node must outlive a write to a connection its peer closed: with SIGPIPE at its default
/// disposition the first such write killed it (the nemesis saw a node die so right after
/// SIGCONT, its clients and peers having given up on it while it was stopped). The node must
/// ignore SIGPIPE, so that the write fails with EPIPE and the connection's owner handles it.
#[cfg(target_os = "linux")]
#[test]
fn a_node_ignores_sigpipe() {
    let mut cluster = Cluster::start(1, 1);
    let pid = cluster.children[0].as_ref().unwrap().id();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let ignored = status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .map(|mask| u64::from_str_radix(mask.trim(), 16).unwrap())
        .unwrap();
    let sigpipe_bit = 1u64 << (libc::SIGPIPE - 1);
    assert_ne!(
        ignored & sigpipe_bit,
        0,
        "SIGPIPE is not ignored: {ignored:#x}"
    );
    assert!(cluster.alive(0));
}
