//! Crash recovery of a real cluster: nothing a client saw commit is lost across `kill -9`.
//!
//! Three `augur node` processes run `clocksi-rep` with every node replicating every partition,
//! each with a data directory of its own (`--data-dir`). A bank of accounts is loaded through an
//! ordinary transaction; then clients on every node move money between accounts and scan them,
//! while a fault loop [`KILLS`] times picks a node at random (coordinators included: every node
//! coordinates), kills it with SIGKILL, restarts it with the same command line once it is gone,
//! waits until it listens again and lets the workload run on. A client whose node died
//! reconnects under a fresh client id (client ids are unique cluster-wide), to its own node as
//! soon as it is back, or to another if it stays away. Every attempt is recorded in a history
//! (`augur bench --history`'s format): committed, aborted, or of unknown outcome when the answer
//! to its commit never came (never assumed aborted).
//!
//! Every transfer also writes a *receipt*: a key of its own, numbered far above the accounts (so
//! the bank checker ignores it), which makes the set of transfers that took effect readable
//! afterwards. With all nodes up, each node must then show, in one read-only transaction it
//! coordinates:
//!
//! * **no acknowledged commit lost**: the receipt of every transfer its client saw commit, and
//!   of no transfer that was aborted;
//! * **a final state explained by what committed**: every balance is its opening balance moved by
//!   every committed transfer plus exactly those transfers of unknown outcome whose receipt is
//!   there;
//! * **the total conserved**: the balances add up to the opening total;
//! * **every account served**: each account reads as a balance, never absent.
//!
//! Reads that found an account absent while the workload ran are lost data too, and the history
//! must pass the checker at the level `clocksi-rep` claims (what `augur check --input` runs).
//! On failure the node logs are printed, the history is kept for `augur check --input`, and the
//! message names every lost transfer, the accounts it moved money between, and every account
//! whose balance is off.
//!
//! A node that keeps its state only in memory comes back empty after `kill -9`, so this test
//! fails until nodes recover from their data directories.

use augur::check::{check_recorded, write_history};
use augur_client::{HistoryRecorder, Outcome, Session, Transport, TransportError, Txn, TxnError};
use augur_protocols::registry;
use augur_runtime::tcp::{ClientConfig, TcpTransport};
use augur_types::history::{HISTORY_FORMAT, History, HistoryHeader};
use augur_types::{AbortReason, ClientId, ClientOp, ClientReply, Key, NodeId, Timestamp, Value};
use futures::future::BoxFuture;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::fmt;
use std::fs::OpenOptions;
use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PROTOCOL: &str = "clocksi-rep";
const NODES: usize = 3;
const CLIENTS_PER_NODE: usize = 2;
const ACCOUNTS: u64 = 12;
const INITIAL_BALANCE: i64 = 100;
const MAX_TRANSFER: i64 = 20;
const SCAN_FRACTION: f64 = 0.3;
/// How many times a node is killed and restarted.
const KILLS: usize = 20;
/// Seeds the fault loop and the clients.
const SEED: u64 = 9;
/// Receipt numbers start here, far above the account numbers.
const RECEIPT_BASE: u64 = 1 << 40;
/// How long a client waits for any one reply (connecting too).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// A client's pause between transactions, which bounds the history's length.
const THINK: Duration = Duration::from_millis(5);
/// How long a client keeps trying its own node before it goes to another.
const HOME_PATIENCE: Duration = Duration::from_secs(1);
/// Workload before the first fault, and after the last restart before the clients stop.
const CALM: Duration = Duration::from_secs(2);
/// How many lines of each node's log a failure prints.
const LOG_LINES: usize = 150;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_and_restart_loses_no_acknowledged_commit() {
    let started = Instant::now();
    let mut cluster = Cluster::start().await;
    let clients = augur::cluster::Cluster::load(&cluster.config)
        .unwrap()
        .client_config(REQUEST_TIMEOUT)
        .unwrap();
    let shared = Arc::new(Shared::new(cluster.addrs.clone(), clients));

    // The bank opens before any fault, and every node must serve it.
    let loaded = load(&shared).await;
    let accounts: Vec<Key> = (0..ACCOUNTS).map(account_key).collect();
    for node in 0..NODES {
        let values = read_through(&shared, node, &accounts, loaded)
            .await
            .unwrap_or_else(|e| panic!("node {node} cannot read the loaded accounts: {e}"));
        assert!(
            values.iter().all(Option::is_some),
            "node {node} misses loaded accounts before any fault: {values:?}"
        );
    }

    // The workload runs throughout; the faults start once it is under way.
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let clients: Vec<_> = (0..NODES * CLIENTS_PER_NODE)
        .map(|c| {
            let seed = rng.random();
            tokio::spawn(run_client(shared.clone(), c % NODES, seed))
        })
        .collect();

    tokio::time::sleep(CALM).await;
    for kill in 1..=KILLS {
        let node = rng.random_range(0..NODES);
        let down = Duration::from_millis(rng.random_range(50..=500));
        let up = Duration::from_millis(rng.random_range(600..=1200));
        eprintln!(
            "{:>6.2} s: kill {kill}/{KILLS}: node {node} with SIGKILL, down for {down:?}",
            shared.origin.elapsed().as_secs_f64()
        );
        cluster.kill(node);
        tokio::time::sleep(down).await;
        cluster.spawn(node);
        cluster.wait_until_listening(node).await;
        tokio::time::sleep(up).await;
    }
    let last_restart = shared.origin.elapsed();
    tokio::time::sleep(CALM).await;
    shared.stop.store(true, Relaxed);
    for client in clients {
        client.await.expect("a client task panicked");
    }
    // Let transactions left prepared by the last crash be resolved.
    tokio::time::sleep(Duration::from_secs(1)).await;

    // With every node up again: what each of them holds, against what the clients saw.
    let mut failures = Failures::default();
    for node in 0..NODES {
        if let Some(status) = cluster.exited(node) {
            failures.add(
                "nodes that died on their own",
                format!("node {node} exited with {status}"),
            );
        }
    }

    let transfers = std::mem::take(&mut *shared.transfers.lock().unwrap());
    let mut after = loaded;
    for t in &transfers {
        if let Outcome::Committed { commit_ts } = t.outcome {
            after = after.max(commit_ts);
        }
    }
    let keys: Vec<Key> = accounts
        .iter()
        .cloned()
        .chain(transfers.iter().map(|t| receipt_key(t.id)))
        .collect();
    let mut views = Vec::new();
    for node in 0..NODES {
        match read_through(&shared, node, &keys, after).await {
            Ok(values) => views.push((node, values)),
            Err(e) => failures.add(
                "nodes that could not serve a final read",
                format!("node {node}: {e}"),
            ),
        }
    }
    check_transfers(&transfers, &views, &mut failures);
    for (node, values) in &views {
        check_balances(*node, &transfers, values, &mut failures);
    }
    for read in shared.missing_reads.lock().unwrap().iter() {
        failures.add("reads that found no balance during the run", read.clone());
    }
    check_progress(&transfers, last_restart, &mut failures);

    // The history, as `augur check --input` would check it.
    let history = shared.history();
    let info = registry::info(PROTOCOL).unwrap();
    let report = check_recorded(&history, info, true).expect("the history can be checked");
    for anomaly in report.violations() {
        failures.add(
            "anomalies the checker finds in the history",
            anomaly.to_string(),
        );
    }

    let summary = summary(&shared, &history, &transfers, started);
    eprintln!("{summary}");
    if !failures.is_empty() {
        cluster.show_logs();
        let path =
            std::env::temp_dir().join(format!("augur-crash-recovery-{}.jsonl", std::process::id()));
        let kept = match write_history(&path, &history) {
            Ok(()) => format!("history kept for `augur check --input {}`", path.display()),
            Err(e) => format!("the history could not be kept: {e:#}"),
        };
        panic!(
            "data lost or corrupted across kill -9 ({summary}; {kept}):\n{}",
            failures.report()
        );
    }
}

/// The `augur node` processes, with their cluster file, data directories and logs. Killed when
/// dropped (after printing their logs if the test panicked).
struct Cluster {
    dir: tempfile::TempDir,
    config: PathBuf,
    addrs: Vec<SocketAddr>,
    children: Vec<Option<Child>>,
    /// How many times each node was started.
    starts: Vec<usize>,
    logs_shown: bool,
}

impl Cluster {
    async fn start() -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        // Free ports: bind port 0 for every node at once (so no two get the same port), note
        // the ports, release them for the nodes.
        let listeners: Vec<TcpListener> = (0..NODES)
            .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        let addrs: Vec<SocketAddr> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
        drop(listeners);
        let mut text = format!(
            "protocol = \"{PROTOCOL}\"\nlatency = \"lan\"\nreplication = {NODES}\nseed = {SEED}\n\n\
             [security]\ntls = false\n\n[options]\nparticipant_timeout_ms = 300\n"
        );
        for (i, addr) in addrs.iter().enumerate() {
            text.push_str(&format!("\n[[nodes]]\nid = {i}\naddr = \"{addr}\"\n"));
        }
        let config = dir.path().join("cluster.toml");
        std::fs::write(&config, text).unwrap();
        let mut cluster = Cluster {
            dir,
            config,
            addrs,
            children: (0..NODES).map(|_| None).collect(),
            starts: vec![0; NODES],
            logs_shown: false,
        };
        for i in 0..NODES {
            std::fs::create_dir_all(cluster.data_dir(i)).unwrap();
            cluster.spawn(i);
        }
        for i in 0..NODES {
            cluster.wait_until_listening(i).await;
        }
        cluster
    }

    fn data_dir(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("node{i}"))
    }

    fn log_path(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("node{i}.log"))
    }

    /// Start node `i`, always with the same command line; its log accumulates over restarts.
    fn spawn(&mut self, i: usize) {
        assert!(self.children[i].is_none(), "node {i} is already running");
        self.starts[i] += 1;
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path(i))
            .unwrap();
        writeln!(
            log,
            "===== test: start {} of node {i} =====",
            self.starts[i]
        )
        .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_augur"))
            .arg("node")
            .arg("--config")
            .arg(&self.config)
            .arg("--id")
            .arg(i.to_string())
            .arg("--data-dir")
            .arg(self.data_dir(i))
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.children[i] = Some(child);
    }

    async fn wait_until_listening(&mut self, i: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.exited(i) {
                panic!("node {i} exited with {status}");
            }
            let connect = tokio::net::TcpStream::connect(self.addrs[i]);
            if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_millis(200), connect).await {
                return;
            }
            assert!(Instant::now() < deadline, "node {i} does not listen");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// How node `i`'s process ended, if it did.
    fn exited(&mut self, i: usize) -> Option<std::process::ExitStatus> {
        self.children[i].as_mut()?.try_wait().unwrap()
    }

    /// `kill -9` node `i` and wait until it is gone.
    fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.children[i].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn show_logs(&mut self) {
        self.logs_shown = true;
        for i in 0..NODES {
            let log = std::fs::read_to_string(self.log_path(i)).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let from = lines.len().saturating_sub(LOG_LINES);
            eprintln!(
                "----- node {i} log ({} starts, last {} of {} lines) -----\n{}",
                self.starts[i],
                lines.len() - from,
                lines.len(),
                lines[from..].join("\n")
            );
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..NODES {
            self.kill(i);
        }
        if std::thread::panicking() && !self.logs_shown {
            self.show_logs();
        }
    }
}

/// A TCP connection to a coordinator whose clock is the test's, so the times in the history
/// compare across connections.
struct Conn {
    tcp: TcpTransport,
    origin: Instant,
}

impl Transport for Conn {
    fn client_id(&self) -> ClientId {
        self.tcp.client_id()
    }

    fn call(&self, op: ClientOp) -> BoxFuture<'_, Result<ClientReply, TransportError>> {
        self.tcp.call(op)
    }

    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn sleep(&self, d: Duration) -> BoxFuture<'_, ()> {
        self.tcp.sleep(d)
    }
}

/// A transfer that reached its commit request, and how it ended for its client.
#[derive(Clone, Debug)]
struct TransferAttempt {
    /// Unique across the run; names the receipt.
    id: u64,
    client: u64,
    /// The coordinator.
    node: usize,
    from: u64,
    to: u64,
    amount: i64,
    outcome: Outcome,
    /// When the client learned the outcome, since the run's origin.
    at: Duration,
}

impl fmt::Display for TransferAttempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "transfer #{} ({} from account {} to account {}; client {} via node {}",
            self.id, self.amount, self.from, self.to, self.client, self.node
        )?;
        match self.outcome {
            Outcome::Committed { commit_ts } => write!(f, ", committed at {commit_ts}")?,
            Outcome::Aborted(reason) => write!(f, ", aborted: {}", reason.name())?,
            Outcome::Unknown => write!(f, ", outcome unknown")?,
        }
        write!(f, ", {:.2} s)", self.at.as_secs_f64())
    }
}

/// What the clients share: where the nodes are, the history, and what they saw.
struct Shared {
    addrs: Vec<SocketAddr>,
    origin: Instant,
    recorder: HistoryRecorder,
    /// How clients reach the cluster (plaintext: the test runs on loopback).
    clients: ClientConfig,
    next_transfer: AtomicU64,
    reconnects: AtomicU64,
    stop: AtomicBool,
    transfers: Mutex<Vec<TransferAttempt>>,
    missing_reads: Mutex<Vec<String>>,
}

impl Shared {
    fn new(addrs: Vec<SocketAddr>, clients: ClientConfig) -> Shared {
        Shared {
            clients,
            addrs,
            origin: Instant::now(),
            recorder: HistoryRecorder::new(),
            next_transfer: AtomicU64::new(0),
            reconnects: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            transfers: Mutex::new(Vec::new()),
            missing_reads: Mutex::new(Vec::new()),
        }
    }

    /// A recorded session under a fresh client id: with node `home` if it listens, with any node
    /// once `home` has been unreachable for [`HOME_PATIENCE`]. `None` once the run is over.
    async fn connect(&self, home: usize) -> Option<(usize, Session<Conn>)> {
        let since = Instant::now();
        while !self.stop.load(Relaxed) {
            let candidates = if since.elapsed() < HOME_PATIENCE {
                1
            } else {
                NODES
            };
            for node in (0..candidates).map(|k| (home + k) % NODES) {
                let id = NodeId(node as u32);
                if let Ok(tcp) = TcpTransport::connect(self.addrs[node], id, &self.clients).await {
                    let conn = Conn {
                        tcp,
                        origin: self.origin,
                    };
                    return Some((node, Session::recorded(conn, self.recorder.clone())));
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }

    /// Note a read of account `account` that found no balance: `value` is what it found.
    fn note_missing(
        &self,
        what: &str,
        client: ClientId,
        node: usize,
        account: u64,
        value: Option<&Value>,
    ) {
        let found = match value {
            None => "as absent".to_string(),
            Some(v) => format!("as {v:?}, not a balance"),
        };
        self.missing_reads.lock().unwrap().push(format!(
            "{:.2} s: a {what} of client {} via node {node} read account {account} ({}) {found}",
            self.origin.elapsed().as_secs_f64(),
            client.0,
            account_key(account)
        ));
    }

    /// The recorded history, with the header `augur bench --history` writes for a bank run.
    fn history(&self) -> History {
        let settings = BTreeMap::from([
            ("accounts".to_string(), ACCOUNTS.to_string()),
            ("initial_balance".to_string(), INITIAL_BALANCE.to_string()),
            ("max_transfer".to_string(), MAX_TRANSFER.to_string()),
            ("scan_fraction".to_string(), SCAN_FRACTION.to_string()),
        ]);
        let info = registry::info(PROTOCOL).unwrap();
        History {
            header: HistoryHeader {
                format: HISTORY_FORMAT,
                protocol: PROTOCOL.to_string(),
                workload: "bank".to_string(),
                seed: SEED,
                isolation: info.isolation.to_string(),
                faults: format!("kill -9 and restart, {KILLS} times"),
                settings,
            },
            txns: self.recorder.records(),
        }
    }
}

/// Account `i`'s key, placed as the `bank` workload places it (so the bank checker knows it).
fn account_key(i: u64) -> Key {
    Key::numbered((i % NODES as u64) as u32, i)
}

/// The key transfer `id` writes to say it took effect.
fn receipt_key(id: u64) -> Key {
    Key::numbered((id % NODES as u64) as u32, RECEIPT_BASE + id)
}

fn encode(balance: i64) -> Option<Value> {
    Some(Value::from(balance.to_string()))
}

fn decode(value: &Value) -> Option<i64> {
    std::str::from_utf8(value).ok()?.trim().parse().ok()
}

/// Write every account's opening balance in one transaction coordinated by node 0.
async fn load(shared: &Shared) -> Timestamp {
    let (_, session) = shared.connect(0).await.expect("node 0 is up");
    let mut last = None;
    for _ in 0..10 {
        let mut txn = session.begin_named("load", false).await.unwrap();
        for i in 0..ACCOUNTS {
            txn.write(account_key(i), encode(INITIAL_BALANCE)).unwrap();
        }
        match txn.commit().await {
            Ok(ts) => return ts,
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("loading the bank failed: {last:?}");
}

/// One client: transfers and scans until the run is over, reconnecting whenever its node is
/// gone.
async fn run_client(shared: Arc<Shared>, home: usize, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut conn = None;
    while !shared.stop.load(Relaxed) {
        if conn.is_none() {
            conn = shared.connect(home).await;
            continue;
        }
        let (node, session) = conn.as_ref().unwrap();
        let result = if rng.random_bool(SCAN_FRACTION) {
            scan(&shared, *node, session).await
        } else {
            transfer(&shared, *node, session, &mut rng).await
        };
        // Aborts are part of the workload; a lost connection (or a request timeout) is not.
        if let Err(TxnError::Unavailable(_)) = result {
            conn = None;
            shared.reconnects.fetch_add(1, Relaxed);
        }
        tokio::time::sleep(THINK).await;
    }
}

/// Read every account in a read-only transaction.
async fn scan(shared: &Shared, node: usize, session: &Session<Conn>) -> Result<(), TxnError> {
    let mut txn = session.begin_named("scan", true).await?;
    for i in 0..ACCOUNTS {
        let value = txn.read(&account_key(i)).await?;
        if value.as_ref().and_then(decode).is_none() {
            shared.note_missing("scan", session.id(), node, i, value.as_ref());
        }
    }
    txn.commit().await.map(|_| ())
}

/// Account `i`'s balance as `txn` reads it; `None` (noted) if it is absent or not a balance.
async fn balance(
    shared: &Shared,
    txn: &mut Txn<'_, Conn>,
    client: ClientId,
    node: usize,
    i: u64,
) -> Result<Option<i64>, TxnError> {
    let value = txn.read(&account_key(i)).await?;
    let balance = value.as_ref().and_then(decode);
    if balance.is_none() {
        shared.note_missing("transfer", client, node, i, value.as_ref());
    }
    Ok(balance)
}

/// Move a random amount between two random accounts and write the transfer's receipt; roll
/// back if the source cannot cover it or an account is missing.
async fn transfer(
    shared: &Shared,
    node: usize,
    session: &Session<Conn>,
    rng: &mut ChaCha8Rng,
) -> Result<(), TxnError> {
    let from = rng.random_range(0..ACCOUNTS);
    let to = (from + rng.random_range(1..ACCOUNTS)) % ACCOUNTS;
    let amount = rng.random_range(1..=MAX_TRANSFER);
    let id = shared.next_transfer.fetch_add(1, Relaxed);
    let mut txn = session.begin_named("transfer", false).await?;
    let (Some(from_balance), Some(to_balance)) = (
        balance(shared, &mut txn, session.id(), node, from).await?,
        balance(shared, &mut txn, session.id(), node, to).await?,
    ) else {
        txn.abort().await;
        return Ok(());
    };
    if from_balance < amount {
        txn.abort().await;
        return Ok(());
    }
    txn.write(account_key(from), encode(from_balance - amount))?;
    txn.write(account_key(to), encode(to_balance + amount))?;
    let receipt = format!("transfer {id}: {amount} from account {from} to account {to}");
    txn.write(receipt_key(id), Some(Value::from(receipt)))?;
    let result = txn.commit().await;
    let outcome = match &result {
        Ok(commit_ts) => Outcome::Committed {
            commit_ts: *commit_ts,
        },
        Err(TxnError::Aborted(reason)) => Outcome::Aborted(*reason),
        Err(TxnError::Rejected(_)) => Outcome::Aborted(AbortReason::InvalidRequest),
        // No answer (or one that makes no sense): the transfer may or may not have committed.
        Err(TxnError::Unavailable(_) | TxnError::Protocol(_)) => Outcome::Unknown,
    };
    shared.transfers.lock().unwrap().push(TransferAttempt {
        id,
        client: session.id().0,
        node,
        from,
        to,
        amount,
        outcome,
        at: shared.origin.elapsed(),
    });
    result.map(|_| ())
}

/// Read `keys` in one read-only transaction coordinated by `node` on a snapshot that includes
/// `after`, retrying on fresh connections for a while if the node cannot serve it.
async fn read_through(
    shared: &Shared,
    node: usize,
    keys: &[Key],
    after: Timestamp,
) -> Result<Vec<Option<Value>>, String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut attempts = 0;
    loop {
        attempts += 1;
        let error = match read_once(shared, node, keys, after).await {
            Ok(Some(values)) => return Ok(values),
            Ok(None) => format!("its snapshots stay before {after}"),
            Err(e) => e,
        };
        if Instant::now() >= deadline {
            return Err(format!("{error} (after {attempts} attempts)"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One attempt of [`read_through`]; `Ok(None)` if the snapshot was too early.
async fn read_once(
    shared: &Shared,
    node: usize,
    keys: &[Key],
    after: Timestamp,
) -> Result<Option<Vec<Option<Value>>>, String> {
    let id = NodeId(node as u32);
    let tcp = TcpTransport::connect(shared.addrs[node], id, &shared.clients)
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    let session = Session::new(tcp);
    let mut txn = session.begin(true).await.map_err(|e| e.to_string())?;
    if txn.snapshot() < after {
        txn.abort().await;
        return Ok(None);
    }
    let mut values = Vec::with_capacity(keys.len());
    for key in keys {
        let value = txn.read(key).await;
        values.push(value.map_err(|e| format!("reading {key}: {e}"))?);
    }
    txn.commit().await.map_err(|e| e.to_string())?;
    Ok(Some(values))
}

const LOST: &str = "committed transfers lost";

/// Each transfer's receipt on each node (`views` holds the accounts, then the receipts in the
/// order of `transfers`): a committed transfer's must be on every node, an aborted one's on
/// none, and one of unknown outcome's on all or none.
fn check_transfers(
    transfers: &[TransferAttempt],
    views: &[(usize, Vec<Option<Value>>)],
    failures: &mut Failures,
) {
    let list = |nodes: &[usize]| {
        let names: Vec<String> = nodes.iter().map(|n| n.to_string()).collect();
        let s = if nodes.len() == 1 { "" } else { "s" };
        format!("node{s} {}", names.join(", "))
    };
    for (k, t) in transfers.iter().enumerate() {
        let index = ACCOUNTS as usize + k;
        let (present, absent): (Vec<usize>, Vec<usize>) = {
            let (p, a): (Vec<_>, Vec<_>) = views.iter().partition(|(_, v)| v[index].is_some());
            (
                p.iter().map(|(n, _)| *n).collect(),
                a.iter().map(|(n, _)| *n).collect(),
            )
        };
        let receipt = receipt_key(t.id);
        match t.outcome {
            Outcome::Committed { .. } if !absent.is_empty() => failures.add(
                LOST,
                format!("{t}: its receipt {receipt} is absent on {}", list(&absent)),
            ),
            Outcome::Aborted(_) if !present.is_empty() => failures.add(
                "aborted transfers that took effect",
                format!(
                    "{t}: its receipt {receipt} is present on {}",
                    list(&present)
                ),
            ),
            Outcome::Unknown if !present.is_empty() && !absent.is_empty() => failures.add(
                "transfers of unknown outcome the nodes disagree on",
                format!(
                    "{t}: its receipt {receipt} is present on {} but absent on {}",
                    list(&present),
                    list(&absent)
                ),
            ),
            _ => {}
        }
    }
}

/// Node `node`'s accounts (`values`: the accounts, then the receipts in the order of
/// `transfers`) against the transfers that took effect there: every committed one, plus those
/// of unknown (or aborted) outcome whose receipt it holds.
fn check_balances(
    node: usize,
    transfers: &[TransferAttempt],
    values: &[Option<Value>],
    failures: &mut Failures,
) {
    let n = ACCOUNTS as usize;
    let mut expected = vec![INITIAL_BALANCE; n];
    // Per account: how many committed transfers touched it, and the last of them.
    let mut committed: Vec<(usize, Option<&TransferAttempt>)> = vec![(0, None); n];
    let mut unknown_applied = 0;
    for (t, receipt) in transfers.iter().zip(&values[n..]) {
        let commit_ts = match t.outcome {
            Outcome::Committed { commit_ts } => Some(commit_ts),
            _ if receipt.is_some() => None,
            _ => continue,
        };
        if matches!(t.outcome, Outcome::Unknown) {
            unknown_applied += 1;
        }
        expected[t.from as usize] -= t.amount;
        expected[t.to as usize] += t.amount;
        if let Some(ts) = commit_ts {
            for account in [t.from as usize, t.to as usize] {
                let (count, last) = &mut committed[account];
                *count += 1;
                if last.is_none_or(
                    |l| matches!(l.outcome, Outcome::Committed { commit_ts } if commit_ts < ts),
                ) {
                    *last = Some(t);
                }
            }
        }
    }
    let history_of = |i: usize| match committed[i] {
        (0, _) => "no committed transfer touched it".to_string(),
        (count, Some(last)) => format!("{count} committed transfers touched it, the last {last}"),
        (count, None) => format!("{count} committed transfers touched it"),
    };
    let (mut total, mut missing) = (0, 0);
    for (i, value) in values[..n].iter().enumerate() {
        let key = account_key(i as u64);
        let Some(value) = value else {
            missing += 1;
            failures.add(
                "accounts a node serves as absent",
                format!(
                    "node {node}: account {i} ({key}) is absent; {}",
                    history_of(i)
                ),
            );
            continue;
        };
        let Some(balance) = decode(value) else {
            failures.add(
                "accounts a node serves as garbage",
                format!("node {node}: account {i} ({key}) holds {value:?}"),
            );
            continue;
        };
        total += balance;
        if balance != expected[i] {
            failures.add(
                "balances the committed transfers do not explain",
                format!(
                    "node {node}: account {i} ({key}) holds {balance}, but the committed transfers \
                     (and the {unknown_applied} of unknown outcome whose receipts node {node} \
                     holds) leave it at {} ({:+} unexplained); {}",
                    expected[i],
                    balance - expected[i],
                    history_of(i)
                ),
            );
        }
    }
    let opening = ACCOUNTS as i64 * INITIAL_BALANCE;
    if missing > 0 || total != opening {
        failures.add(
            "totals not conserved",
            format!(
                "node {node}: its balances add up to {total} with {missing} of {n} accounts absent; \
                 the opening total is {opening}"
            ),
        );
    }
}

/// A run in which nothing commits proves nothing: every node must have coordinated committed
/// transfers, and the cluster must commit again after the last restart.
fn check_progress(transfers: &[TransferAttempt], last_restart: Duration, failures: &mut Failures) {
    let committed = |t: &&TransferAttempt| matches!(t.outcome, Outcome::Committed { .. });
    for node in 0..NODES {
        if !transfers.iter().filter(committed).any(|t| t.node == node) {
            failures.add(
                "missing progress",
                format!("node {node} coordinated no committed transfer"),
            );
        }
    }
    if !transfers
        .iter()
        .filter(committed)
        .any(|t| t.at > last_restart)
    {
        failures.add(
            "missing progress",
            "no transfer committed after the last restart".to_string(),
        );
    }
}

/// One line on what the run did.
fn summary(
    shared: &Shared,
    history: &History,
    transfers: &[TransferAttempt],
    started: Instant,
) -> String {
    let (mut committed, mut aborted, mut unknown) = (0, 0, 0);
    for t in &history.txns {
        match t.outcome {
            augur_types::history::RecordedOutcome::Committed { .. } => committed += 1,
            augur_types::history::RecordedOutcome::Aborted { .. } => aborted += 1,
            augur_types::history::RecordedOutcome::Unknown => unknown += 1,
        }
    }
    let count = |f: fn(&Outcome) -> bool| transfers.iter().filter(|t| f(&t.outcome)).count();
    format!(
        "{KILLS} kills, {:.1} s in all; {} attempts recorded ({committed} committed, {aborted} \
         aborted, {unknown} unknown); {} transfers reached their commit ({} committed, {} of \
         unknown outcome); {} reconnects",
        started.elapsed().as_secs_f64(),
        history.txns.len(),
        transfers.len(),
        count(|o| matches!(o, Outcome::Committed { .. })),
        count(|o| matches!(o, Outcome::Unknown)),
        shared.reconnects.load(Relaxed)
    )
}

/// What went wrong, by kind, in the order first found.
#[derive(Default)]
struct Failures(Vec<(&'static str, Vec<String>)>);

impl Failures {
    /// How many findings of each kind the report lists.
    const SHOWN: usize = 15;

    fn add(&mut self, kind: &'static str, detail: String) {
        match self.0.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, details)) => details.push(detail),
            None => self.0.push((kind, vec![detail])),
        }
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn report(&self) -> String {
        let mut out = String::new();
        for (kind, details) in &self.0 {
            out.push_str(&format!("{} {kind}:\n", details.len()));
            for detail in details.iter().take(Self::SHOWN) {
                out.push_str(&format!("  - {detail}\n"));
            }
            if details.len() > Self::SHOWN {
                out.push_str(&format!("  ... and {} more\n", details.len() - Self::SHOWN));
            }
        }
        out
    }
}
