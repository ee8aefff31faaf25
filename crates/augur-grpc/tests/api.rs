//! The gRPC API against a real node (clocksi-rep over TCP, one node) through the generated
//! client: one-shot and interactive transactions, aborts as answers, operations out of order
//! and oversized keys as errors, the client token, and the session limit. With `AUGUR_PYTHON`
//! set (what `scripts/python-client.sh` prints), also the Python client (clients/python): its
//! unit tests, its tests against a node, and its example.

use augur_contract::log_policy::LogPolicy;
use augur_contract::{NodeEnv, ProtocolOptions};
use augur_grpc::proto::augur_client::AugurClient;
use augur_grpc::proto::{self, session_reply::Reply, session_request::Op};
use augur_grpc::{AugurApi, NodeInfo, ServeLimits};
use augur_protocols::clocksi_rep::ClockSiRep;
use augur_runtime::tcp::{self, ClusterIdentity, Limits, TcpNodeConfig, TcpNodeHandle};
use augur_runtime::wal::LogConfig;
use augur_types::{LatencyProfile, NodeId, Placement};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tonic::transport::Channel;
use tonic::{Code, Request};

struct Node {
    _node: TcpNodeHandle,
    client: AugurClient<Channel>,
    /// The node's peer address and its gRPC API's.
    addr: SocketAddr,
    grpc_addr: SocketAddr,
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// Start a one-node clocksi-rep cluster and its gRPC API, and connect a client to the API.
async fn node(token: Option<&str>, max_sessions: usize) -> Node {
    let profile = LatencyProfile::named("lan").unwrap().truncated(1).unwrap();
    let env = NodeEnv {
        id: NodeId(0),
        placement: Arc::new(Placement::ring(profile, 1, 1).unwrap()),
        options: Arc::new(ProtocolOptions::default()),
        procedures: Default::default(),
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let identity = ClusterIdentity {
        cluster_id: "grpc-test".into(),
        settings: vec![("protocol".into(), "clocksi-rep".into())],
    };
    let config = TcpNodeConfig {
        peers: vec![(NodeId(0), addr)],
        seed: 1,
        emulate_latency: false,
        log: LogConfig::memory("clocksi-rep", LogPolicy::Off),
        identity: identity.clone(),
        tls: None,
        client_token: token.map(str::to_string),
        limits: Limits::default(),
        clock_offset_us: 0,
    };
    let node = tcp::serve_on::<ClockSiRep>(env, listener, config).unwrap();
    let info = NodeInfo {
        node: 0,
        cluster_id: identity.cluster_id.clone(),
        protocol: "clocksi-rep".into(),
        fingerprint: identity.fingerprint(),
    };
    let api = AugurApi::new(node.clients(), info, max_sessions, Duration::from_secs(5));
    let grpc = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let grpc_addr = grpc.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let limits = ServeLimits {
        max_connections: 16,
        max_streams_per_connection: 64,
        keepalive: Duration::from_secs(10),
    };
    tokio::spawn(augur_grpc::serve(api, grpc, None, limits, async {
        let _ = stopped.await;
    }));
    let client = AugurClient::connect(format!("http://{grpc_addr}"))
        .await
        .unwrap();
    Node {
        _node: node,
        client,
        addr,
        grpc_addr,
        _stop: stop,
    }
}

fn write(key: &str, value: Option<&str>) -> proto::Write {
    proto::Write {
        key: key.into(),
        value: value.map(Into::into),
    }
}

fn transact(reads: &[&str], writes: Vec<proto::Write>) -> proto::TransactRequest {
    proto::TransactRequest {
        reads: reads.iter().map(|k| k.as_bytes().to_vec()).collect(),
        writes,
        trying_for_us: 0,
    }
}

/// The value of each read, as text.
fn values(reply: &proto::TransactReply) -> Vec<Option<String>> {
    reply
        .reads
        .iter()
        .map(|kv| kv.value.clone().map(|v| String::from_utf8(v).unwrap()))
        .collect()
}

fn is_committed(reply: &proto::TransactReply) -> bool {
    matches!(
        reply.outcome,
        Some(proto::transact_reply::Outcome::Committed(_))
    )
}

#[tokio::test]
async fn one_shot_transactions_write_and_read_back() {
    let mut n = node(None, 64).await;
    let status = n
        .client
        .status(proto::StatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!((status.node, status.protocol.as_str()), (0, "clocksi-rep"));

    let put = transact(
        &[],
        vec![write("acct:a", Some("70")), write("acct:b", Some("30"))],
    );
    let reply = n.client.transact(put).await.unwrap().into_inner();
    assert!(is_committed(&reply), "{reply:?}");

    let read = transact(&["acct:a", "acct:b", "acct:c"], vec![]);
    let reply = n.client.transact(read).await.unwrap().into_inner();
    assert!(is_committed(&reply));
    assert_eq!(
        values(&reply),
        [Some("70".to_string()), Some("30".into()), None]
    );

    let delete = transact(&[], vec![write("acct:a", None)]);
    assert!(is_committed(
        &n.client.transact(delete).await.unwrap().into_inner()
    ));
    let reply = n
        .client
        .transact(transact(&["acct:a"], vec![]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(values(&reply), [None]);

    // A key beyond the node's limit is refused, naming the limit.
    let long = "k".repeat(2000);
    let error = n
        .client
        .transact(transact(&[long.as_str()], vec![]))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument, "{error:?}");
    assert!(error.message().contains("exceeds the limit"), "{error:?}");
}

/// An interactive session: requests go in on one stream, replies come back in order.
struct Interactive {
    requests: mpsc::Sender<proto::SessionRequest>,
    replies: tonic::Streaming<proto::SessionReply>,
}

impl Interactive {
    async fn open(client: &mut AugurClient<Channel>) -> Interactive {
        let (requests, rx) = mpsc::channel(4);
        let stream =
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) });
        let replies = client.session(stream).await.unwrap().into_inner();
        Interactive { requests, replies }
    }

    async fn ask(&mut self, op: Op) -> Result<Reply, tonic::Status> {
        self.requests
            .send(proto::SessionRequest { op: Some(op) })
            .await
            .unwrap();
        Ok(self.replies.message().await?.unwrap().reply.unwrap())
    }
}

fn get(key: &str) -> Op {
    Op::Get(proto::Get { key: key.into() })
}

fn put(key: &str, value: &str) -> Op {
    Op::Put(proto::Put {
        key: key.into(),
        value: value.into(),
    })
}

fn begin() -> Op {
    Op::Begin(proto::Begin {
        read_only: false,
        trying_for_us: 0,
    })
}

fn commit() -> Op {
    Op::Commit(proto::Commit {})
}

#[tokio::test]
async fn sessions_run_transactions_and_conflicts_abort_with_a_reason() {
    let mut n = node(None, 64).await;
    let mut alice = Interactive::open(&mut n.client).await;
    let mut bob = Interactive::open(&mut n.client).await;

    assert!(matches!(alice.ask(begin()).await, Ok(Reply::Begun(_))));
    assert!(matches!(
        alice.ask(put("x", "1")).await,
        Ok(Reply::Written(_))
    ));
    assert!(matches!(alice.ask(commit()).await, Ok(Reply::Committed(_))));

    // Both read x, both write it: the second to commit aborts, and is told why.
    assert!(matches!(alice.ask(begin()).await, Ok(Reply::Begun(_))));
    assert!(matches!(bob.ask(begin()).await, Ok(Reply::Begun(_))));
    for s in [&mut alice, &mut bob] {
        match s.ask(get("x")).await {
            Ok(Reply::Value(kv)) => assert_eq!(kv.value.as_deref(), Some(&b"1"[..])),
            other => panic!("{other:?}"),
        }
    }
    assert!(matches!(
        alice.ask(put("x", "2")).await,
        Ok(Reply::Written(_))
    ));
    assert!(matches!(
        bob.ask(put("x", "3")).await,
        Ok(Reply::Written(_))
    ));
    assert!(matches!(alice.ask(commit()).await, Ok(Reply::Committed(_))));
    match bob.ask(commit()).await {
        Ok(Reply::Aborted(aborted)) => {
            assert_eq!(aborted.reason, "write_write_conflict");
            assert!(aborted.retryable);
        }
        other => panic!("{other:?}"),
    }

    // The session goes on after an abort; an explicit abort is answered as a rollback.
    assert!(matches!(bob.ask(begin()).await, Ok(Reply::Begun(_))));
    match bob.ask(get("x")).await {
        Ok(Reply::Value(kv)) => assert_eq!(kv.value.as_deref(), Some(&b"2"[..])),
        other => panic!("{other:?}"),
    }
    match bob.ask(Op::Abort(proto::Abort {})).await {
        Ok(Reply::Aborted(aborted)) => assert_eq!(aborted.reason, "user_rollback"),
        other => panic!("{other:?}"),
    }

    // An operation out of order ends the session with an error that says what to do.
    let error = bob.ask(get("x")).await.unwrap_err();
    assert_eq!(error.code(), Code::FailedPrecondition);
    assert!(error.message().contains("begin one first"), "{error:?}");
}

#[tokio::test]
async fn the_client_token_is_required_when_the_cluster_has_one() {
    let mut n = node(Some("s3cret"), 64).await;
    let error = n.client.status(proto::StatusRequest {}).await.unwrap_err();
    assert_eq!(error.code(), Code::Unauthenticated);
    assert!(error.message().contains("requires a client token"));

    let mut wrong = Request::new(proto::StatusRequest {});
    wrong
        .metadata_mut()
        .insert("authorization", "Bearer guess".parse().unwrap());
    let error = n.client.status(wrong).await.unwrap_err();
    assert_eq!(error.code(), Code::Unauthenticated);
    assert!(error.message().contains("wrong client token"));

    let mut right = Request::new(proto::StatusRequest {});
    right
        .metadata_mut()
        .insert("authorization", "Bearer s3cret".parse().unwrap());
    assert!(n.client.status(right).await.is_ok());
}

#[tokio::test]
async fn sessions_beyond_the_limit_are_refused_until_one_ends() {
    let mut n = node(None, 2).await;
    let mut first = Interactive::open(&mut n.client).await;
    assert!(matches!(first.ask(begin()).await, Ok(Reply::Begun(_))));
    let _second = Interactive::open(&mut n.client).await;
    let error = n
        .client
        .transact(transact(&["x"], vec![]))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::ResourceExhausted, "{error:?}");
    assert!(error.message().contains("max_clients"));

    // Ending a session (its stream closed) gives its place back.
    drop(first);
    let mut freed = false;
    for _ in 0..50 {
        if n.client.transact(transact(&["x"], vec![])).await.is_ok() {
            freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(freed, "the ended session's place was not given back");
}

/// The Python interpreter that has the Python client installed (`scripts/python-client.sh`
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

/// clients/python in this repository.
fn python_client_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/python")
}

/// A directory of its own under the system's temporary one, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("augur-grpc-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A cluster file for node `n` as the Python client reads one (the entry's `addr` and `grpc`,
/// and the client token file, relative to the cluster file).
fn cluster_file(dir: &Scratch, n: &Node, token: Option<&str>) -> PathBuf {
    let mut text = String::from("[security]\ntls = false\n");
    if let Some(token) = token {
        std::fs::write(dir.0.join("client-token"), format!("{token}\n")).unwrap();
        text.push_str("client_token_file = \"client-token\"\n");
    }
    text.push_str(&format!(
        "\n[[nodes]]\nid = 0\naddr = \"{}\"\ngrpc = \"{}\"\n",
        n.addr, n.grpc_addr
    ));
    let path = dir.0.join("cluster.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Run `python` with `args` in clients/python (while this test's runtime goes on serving the
/// node), at most five minutes. A run still going then fails the test with what it had printed,
/// read as it came (a stuck run's output never reaches its end), and every Python thread's
/// stack: the run's own last words there or not tell a process stuck exiting after it answered
/// from a client stuck waiting (one such run was lost, with nothing it printed kept).
async fn run_python(python: &Path, args: &[&str], envs: &[(&str, &Path)]) -> Output {
    let mut command = tokio::process::Command::new(python);
    command
        .args(args)
        .current_dir(python_client_dir())
        // Python prints every thread's stack on SIGABRT, which `abort` sends.
        .env("PYTHONFAULTHANDLER", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (name, value) in envs {
        command.env(name, value);
    }
    let mut child = command.spawn().unwrap();
    let (stdout, stdout_read) = keep_reading(child.stdout.take().unwrap());
    let (stderr, stderr_read) = keep_reading(child.stderr.take().unwrap());
    let read = async {
        let _ = stdout_read.await;
        let _ = stderr_read.await;
    };
    let took = |printed: &Printed| std::mem::take(&mut *printed.lock().unwrap());
    let limit = tokio::time::Instant::now() + Duration::from_secs(300);
    let state = match tokio::time::timeout_at(limit, child.wait()).await {
        Ok(status) => {
            let status = status.unwrap();
            // Its output ends with it, unless a process it started still holds it.
            if tokio::time::timeout_at(limit, read).await.is_ok() {
                return Output {
                    status,
                    stdout: took(&stdout),
                    stderr: took(&stderr),
                };
            }
            format!("it had exited ({status}), but a process it started still holds its output")
        }
        Err(_) => {
            abort(&mut child).await;
            let _ = tokio::time::timeout(Duration::from_secs(5), read).await;
            "it was still running, and was aborted: its threads' stacks end its standard error"
                .to_string()
        }
    };
    panic!(
        "the Python client's run {args:?} took more than five minutes: {state}\n\
         --- its standard output:\n{}\n--- its standard error:\n{}",
        String::from_utf8_lossy(&took(&stdout)),
        String::from_utf8_lossy(&took(&stderr)),
    );
}

/// End a Python run that took too long, first asking it for every thread's stack (its fault
/// handler prints them on SIGABRT; best effort, with the system's `kill`), then killing it.
async fn abort(child: &mut tokio::process::Child) {
    if let Some(pid) = child.id() {
        let _ = tokio::process::Command::new("kill")
            .args(["-ABRT", &pid.to_string()])
            .status()
            .await;
        if tokio::time::timeout(Duration::from_secs(10), child.wait())
            .await
            .is_ok()
        {
            return;
        }
    }
    let _ = child.start_kill();
    let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
}

/// What a child printed on one of its pipes so far.
type Printed = Arc<std::sync::Mutex<Vec<u8>>>;

/// Read `pipe` to its end into the returned buffer, as it comes, on a task of its own (so that a
/// full pipe never stops the child, and what it printed is there even if it never ends).
fn keep_reading(
    mut pipe: impl tokio::io::AsyncRead + Unpin + Send + 'static,
) -> (Printed, tokio::task::JoinHandle<()>) {
    use tokio::io::AsyncReadExt;
    let printed = Printed::default();
    let kept = printed.clone();
    let reader = tokio::spawn(async move {
        let mut chunk = [0u8; 8192];
        while let Ok(n @ 1..) = pipe.read(&mut chunk).await {
            kept.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
    });
    (printed, reader)
}

fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).to_string(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

/// The Python client's own tests (clients/python/tests, standard-library unittest): its value
/// checks, retry and backoff decisions, error mapping and deadlines against fake nodes (one
/// stopped with SIGSTOP), the generated stubs being current, and its tests against this node.
#[tokio::test]
async fn the_python_clients_tests_pass_against_a_node() {
    let Some(python) = client_python("the_python_clients_tests_pass_against_a_node") else {
        return;
    };
    let n = node(Some("s3cret"), 64).await;
    let dir = Scratch::new("python-tests");
    let cluster = cluster_file(&dir, &n, Some("s3cret"));
    let out = run_python(
        &python,
        &["-m", "unittest", "discover", "-v", "-s", "tests"],
        &[("AUGUR_TEST_CLUSTER", &cluster)],
    )
    .await;
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    // unittest -v names each test; those against the node must have run, not been skipped.
    let live: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("(test_node."))
        .collect();
    assert!(live.len() >= 5, "{stderr}");
    assert!(live.iter().all(|l| l.ends_with(" ok")), "{stderr}");
    assert!(
        stderr.contains("test_the_kept_stubs_are_current"),
        "{stderr}"
    );
}

/// The Python example against a node with a client token: the transfer, the refusal of one
/// beyond the balance, and a wrong token reported in words rather than a gRPC traceback.
#[tokio::test]
async fn the_python_example_transfers_against_a_node() {
    let Some(python) = client_python("the_python_example_transfers_against_a_node") else {
        return;
    };
    let n = node(Some("s3cret"), 64).await;
    let dir = Scratch::new("python-example");
    let cluster = cluster_file(&dir, &n, Some("s3cret"));
    let cluster = cluster.to_str().unwrap();
    let example = |amount: &'static str| {
        [
            "examples/transfer.py",
            "--cluster",
            cluster,
            "--amount",
            amount,
        ]
    };

    let out = run_python(&python, &example("30"), &[]).await;
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("connected to node 0 of grpc-test (clocksi-rep)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("transferred 30: {'acct:alice': 70, 'acct:bob': 30}"),
        "{stdout}{stderr}"
    );

    let out = run_python(&python, &example("1000"), &[]).await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("alice holds 70, less than 1000"),
        "{stderr}"
    );

    std::fs::write(dir.0.join("client-token"), "guess\n").unwrap();
    let out = run_python(&python, &example("30"), &[]).await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    assert!(
        stderr.contains("refused Status: wrong client token"),
        "{stderr}"
    );
    assert!(!stderr.contains("Traceback"), "{stderr}");
}
