use crate::wal::LogConfig;
use augur_client::{Transport, TransportError};
use augur_contract::{NodeEnv, Protocol};
use augur_types::RequestId;
use augur_types::{ClientId, ClientOp, ClientReply, ClientRequest, ClientResponse, NodeId};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

use super::*;
use augur_client::{Session, TxnError};
use augur_contract::{Ctx, ProtocolOptions};
use augur_types::{AbortReason, Key, LatencyProfile, Placement, RequestError, Timestamp, TxnId};
use std::io::{Read, Write};

/// A test protocol: `Begin` at node `i` pings node `i + 1` (mod n) and is answered when the
/// pong comes back, with the ponging node's id as snapshot; reads echo the key; a commit is
/// answered from work handed off to a worker ([`Ctx::offload`]), with commit timestamp 1 when
/// that work ran on one of the node's worker threads.
struct Relay {
    id: NodeId,
    nodes: u32,
    seq: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
enum RelayMsg {
    Ping {
        client: ClientId,
        request: RequestId,
    },
    Pong {
        client: ClientId,
        request: RequestId,
        node: u32,
    },
}

impl augur_contract::inbound::CheckMessage for RelayMsg {
    fn check(
        &self,
        _: &augur_contract::inbound::Inbound<'_>,
    ) -> Result<(), augur_contract::inbound::BadMessage> {
        Ok(())
    }
}

impl Protocol for Relay {
    type Msg = RelayMsg;
    /// The result of a commit's offloaded work: whom to answer, and whether it ran on a worker.
    type Timer = (ClientId, RequestId, bool);
    type Record = ();

    fn new(env: &NodeEnv) -> Self {
        Relay {
            id: env.id,
            nodes: env.placement.node_count() as u32,
            seq: 0,
        }
    }

    fn on_client(&mut self, ctx: &mut Ctx<'_, Self>, request: ClientRequest) {
        let reply = match request.op {
            ClientOp::Begin { .. } => {
                let to = NodeId((self.id.0 + 1) % self.nodes);
                let msg = RelayMsg::Ping {
                    client: request.client,
                    request: request.id,
                };
                ctx.send(to, msg);
                return;
            }
            ClientOp::Read { key, .. } => {
                ClientReply::Value(Some(Bytes::copy_from_slice(key.as_bytes())))
            }
            ClientOp::Commit { .. } => {
                let (client, id) = (request.client, request.id);
                ctx.offload(move || {
                    let name = std::thread::current().name().map(str::to_string);
                    let on_worker = name.is_some_and(|n| n.starts_with("augur-worker-n"));
                    ((client, id, on_worker), augur_contract::Work::default())
                });
                return;
            }
            ClientOp::Abort { .. } => ClientReply::Aborted(AbortReason::UserRollback),
            ClientOp::AwaitOutcome { txn } => {
                ClientReply::Rejected(RequestError::UnknownTransaction(txn))
            }
            ClientOp::NodeStats | ClientOp::Execute { .. } => return,
        };
        let response = ClientResponse {
            id: request.id,
            reply,
        };
        ctx.reply(request.client, response);
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, msg: RelayMsg) {
        match msg {
            RelayMsg::Ping { client, request } => {
                let node = self.id.0;
                ctx.send(
                    from,
                    RelayMsg::Pong {
                        client,
                        request,
                        node,
                    },
                );
            }
            RelayMsg::Pong {
                client,
                request,
                node,
            } => {
                self.seq += 1;
                let reply = ClientReply::Begun {
                    txn: TxnId::new(self.id, self.seq),
                    snapshot: Timestamp(node as u64),
                };
                ctx.reply(client, ClientResponse { id: request, reply });
            }
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, Self>, (client, id, on_worker): Self::Timer) {
        let reply = ClientReply::Committed {
            commit_ts: Timestamp(u64::from(on_worker)),
        };
        ctx.reply(client, ClientResponse { id, reply });
    }
}

fn env(id: u32, nodes: usize, profile: &str) -> NodeEnv {
    let profile = LatencyProfile::named(profile).unwrap();
    let dcs = profile.dcs.len().min(nodes);
    let profile = profile.truncated(dcs).unwrap();
    NodeEnv {
        id: NodeId(id),
        placement: Arc::new(Placement::ring(profile, nodes, 1).unwrap()),
        options: Arc::new(ProtocolOptions::default()),
        procedures: Default::default(),
    }
}

fn config(peers: &[SocketAddr]) -> TcpNodeConfig {
    TcpNodeConfig {
        peers: peers
            .iter()
            .enumerate()
            .map(|(i, a)| (NodeId(i as u32), *a))
            .collect(),
        seed: 7,
        emulate_latency: true,
        log: LogConfig::memory("relay", crate::wal::LogPolicy::Off),
        identity: identity(),
        tls: None,
        client_token: None,
        limits: Limits::default(),
        clock_offset_us: 0,
    }
}

/// Start a one-node cluster with `limits`.
async fn limited_node(limits: Limits) -> TcpNodeHandle {
    let (mut ls, addrs) = listeners(1).await;
    let mut cfg = config(&addrs);
    cfg.limits = limits;
    serve_on::<Relay>(env(0, 1, "lan"), ls.pop().unwrap(), cfg).unwrap()
}

/// Whether the node closes `s` within `within` (whatever it wrote first is skipped).
fn closed_within(s: &mut std::net::TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 256];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

/// The cluster the test nodes belong to.
fn identity() -> ClusterIdentity {
    ClusterIdentity {
        cluster_id: "test".into(),
        settings: vec![("protocol".into(), "relay".into())],
    }
}

fn client_config() -> ClientConfig {
    ClientConfig::plaintext(&identity(), Duration::from_secs(5))
}

async fn listeners(n: usize) -> (Vec<TcpListener>, Vec<SocketAddr>) {
    let mut ls = Vec::new();
    let mut addrs = Vec::new();
    for _ in 0..n {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        addrs.push(l.local_addr().unwrap());
        ls.push(l);
    }
    (ls, addrs)
}

/// Start an `n`-node cluster of [`Relay`] nodes on loopback.
async fn cluster(n: usize, profile: &str, emulate: bool) -> Vec<TcpNodeHandle> {
    let (ls, addrs) = listeners(n).await;
    ls.into_iter()
        .enumerate()
        .map(|(i, l)| {
            let mut cfg = config(&addrs);
            cfg.emulate_latency = emulate;
            serve_on::<Relay>(env(i as u32, n, profile), l, cfg).unwrap()
        })
        .collect()
}

async fn session(addr: SocketAddr) -> Session<TcpTransport> {
    let t = TcpTransport::connect(addr, NodeId(0), &client_config())
        .await
        .unwrap();
    Session::new(t)
}

/// The frame a client opens with, for `identity()`.
fn client_hello() -> Vec<u8> {
    framed(
        &encode_frame(&Body::<()>::ClientHello {
            cluster_id: identity().cluster_id,
            fingerprint: identity().fingerprint(),
            token: None,
        })
        .unwrap(),
    )
}

fn hello(from: u32) -> Body<()> {
    Body::Hello {
        from: NodeId(from),
        cluster: identity(),
    }
}

/// Send `bytes` on a fresh connection to `addr` and check that the node closes it.
fn assert_dropped(addr: SocketAddr, bytes: &[u8]) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(bytes).unwrap();
    // Whatever the node answered before dropping the connection is skipped.
    let mut buf = [0u8; 256];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return,
            Err(e) => panic!("connection not dropped after {bytes:?}: {e}"),
        }
    }
}

fn framed(payload: &[u8]) -> Vec<u8> {
    let mut v = (payload.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(payload);
    v
}

fn request(client: u64, id: u64) -> ClientRequest {
    ClientRequest {
        client: ClientId(client),
        id: RequestId(id),
        op: ClientOp::Begin {
            read_only: false,
            speculative: false,
            trying_for_us: 0,
        },
    }
}

#[test]
fn envelopes_round_trip_and_check_their_version() {
    let bodies = vec![
        Body::Hello {
            from: NodeId(3),
            cluster: identity(),
        },
        Body::ClientHello {
            cluster_id: "c".into(),
            fingerprint: "f".into(),
            token: Some("t".into()),
        },
        Body::Accepted,
        Body::Welcome {
            client: ClientId(1 << 48),
        },
        Body::Refused("why".into()),
        Body::Peer {
            from: NodeId(1),
            msg: RelayMsg::Pong {
                client: ClientId(9),
                request: RequestId(4),
                node: 2,
            },
        },
        Body::Request(ClientRequest {
            client: ClientId(5),
            id: RequestId(6),
            op: ClientOp::Commit {
                txn: TxnId::new(NodeId(2), 8),
                writes: vec![(Key::numbered(1, 2), Some(Bytes::from_static(b"v")))],
                speculative: true,
            },
        }),
        Body::Response(ClientResponse {
            id: RequestId(6),
            reply: ClientReply::Aborted(AbortReason::WriteWriteConflict),
        }),
        Body::Request(ClientRequest {
            client: ClientId(4),
            id: RequestId(7),
            op: ClientOp::NodeStats,
        }),
        Body::Response(ClientResponse {
            id: RequestId(7),
            reply: ClientReply::NodeStats([("parked_reads".to_string(), 3)].into()),
        }),
    ];
    for body in bodies {
        let frame = encode_frame(&body).unwrap();
        assert_eq!(frame[0], WIRE_VERSION as u8);
        assert_eq!(decode_frame::<RelayMsg>(&frame).unwrap(), body);
        // The borrowed encoding is the encoding of an owned envelope.
        let owned = Envelope {
            version: WIRE_VERSION,
            body: body.clone(),
        };
        assert_eq!(postcard::to_stdvec(&owned).unwrap(), frame.to_vec());
    }
    // The examples of docs/cluster-config.md.
    let accepted = encode_frame(&Body::<()>::Accepted).unwrap();
    assert_eq!(accepted.to_vec(), [7, 5]);
    let begin = encode_frame(&Body::<()>::Request(request(7, 0))).unwrap();
    assert_eq!(begin.to_vec(), [7, 2, 7, 0, 0, 0, 0, 0]);
    // Client frames do not depend on the peer message type.
    let frame = encode_frame(&Body::<RelayMsg>::Request(request(1, 2))).unwrap();
    assert_eq!(
        decode_frame::<()>(&frame).unwrap(),
        Body::Request(request(1, 2))
    );

    let other = Envelope::<()> {
        version: WIRE_VERSION + 1,
        body: hello(0),
    };
    let frame = postcard::to_stdvec(&other).unwrap();
    assert!(matches!(
        decode_frame::<()>(&frame),
        Err(FrameError::Version { found }) if found == WIRE_VERSION + 1
    ));
    let mut long = encode_frame(&hello(0)).unwrap().to_vec();
    long.push(0);
    assert!(matches!(
        decode_frame::<()>(&long),
        Err(FrameError::Trailing(1))
    ));
    assert!(matches!(
        decode_frame::<()>(&[WIRE_VERSION as u8, 0xff]),
        Err(FrameError::Decode(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_round_trips_through_one_node() {
    let nodes = cluster(1, "lan", true).await;
    let s = session(nodes[0].local_addr()).await;
    let mut txn = s.begin(false).await.unwrap();
    assert_eq!(txn.snapshot(), Timestamp(0), "pinged itself");
    let key = Key::numbered(3, 4);
    let v = txn.read(&key).await.unwrap().unwrap();
    assert_eq!(&v[..], key.as_bytes());
    txn.commit().await.unwrap();
    for n in nodes {
        n.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_handed_off_runs_on_the_nodes_worker_pool_and_comes_back_as_an_input() {
    let nodes = cluster(1, "lan", true).await;
    let s = session(nodes[0].local_addr()).await;
    for _ in 0..20 {
        let txn = s.begin(false).await.unwrap();
        assert_eq!(txn.commit().await.unwrap(), Timestamp(1), "ran on a worker");
    }
    for n in nodes {
        n.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_exchange_messages_over_tcp() {
    let nodes = cluster(3, "lan", true).await;
    for (i, node) in nodes.iter().enumerate() {
        let s = session(node.local_addr()).await;
        for _ in 0..3 {
            let txn = s.begin(false).await.unwrap();
            assert_eq!(txn.snapshot(), Timestamp((i as u64 + 1) % 3));
            assert_eq!(txn.id().coordinator(), NodeId(i as u32));
            txn.abort().await;
        }
    }
    for n in nodes {
        n.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frames_drop_the_connection_not_the_node() {
    let nodes = cluster(1, "lan", true).await;
    let addr = nodes[0].local_addr();
    // A length prefix beyond the frame limit.
    let mut huge = vec![0xff, 0xff, 0xff, 0xff];
    huge.extend_from_slice(b"garbage");
    // Frames that do not decode, of the wrong version, or out of place.
    let bad_version = postcard::to_stdvec(&Envelope::<()> {
        version: WIRE_VERSION + 1,
        body: Body::Request(request(1, 0)),
    })
    .unwrap();
    let peer_first = encode_frame(&Body::Peer {
        from: NodeId(0),
        msg: RelayMsg::Ping {
            client: ClientId(1),
            request: RequestId(0),
        },
    })
    .unwrap();
    let response = encode_frame(&Body::<()>::Response(ClientResponse {
        id: RequestId(0),
        reply: ClientReply::Value(None),
    }))
    .unwrap();
    let request_first = encode_frame(&Body::<()>::Request(request(2, 0))).unwrap();
    let client_then_peer_hello =
        [client_hello(), framed(&encode_frame(&hello(0)).unwrap())].concat();
    let tasks = tokio::task::spawn_blocking(move || {
        assert_dropped(addr, &huge);
        assert_dropped(addr, &framed(&[0xff, 0xff, 0xff, 0xff, 0xff]));
        assert_dropped(addr, &framed(b"\x02\x07hello"));
        assert_dropped(addr, &framed(&bad_version));
        assert_dropped(addr, &framed(&peer_first));
        assert_dropped(addr, &framed(&response));
        // A peer that does not exist, or that claims to be the node itself.
        assert_dropped(addr, &framed(&encode_frame(&hello(5)).unwrap()));
        assert_dropped(addr, &framed(&encode_frame(&hello(0)).unwrap()));
        assert_dropped(addr, &framed(&request_first));
        assert_dropped(addr, &client_then_peer_hello);
    });
    tasks.await.unwrap();
    // The node still serves a well-formed client.
    let s = session(addr).await;
    let txn = s.begin(false).await.unwrap();
    txn.commit().await.unwrap();
    for n in nodes {
        n.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_connection_is_its_own_client_and_keeps_its_transactions() {
    let nodes = cluster(2, "lan", true).await;
    let addr = nodes[0].local_addr();
    let a = TcpTransport::connect(addr, NodeId(0), &client_config())
        .await
        .unwrap();
    let b = TcpTransport::connect(addr, NodeId(0), &client_config())
        .await
        .unwrap();
    assert_ne!(
        a.client_id(),
        b.client_id(),
        "the node assigns distinct ids"
    );
    assert_eq!(a.client_id().0 >> 48, 0, "ids carry the node");
    let txn = match a
        .call(ClientOp::Begin {
            read_only: false,
            speculative: false,
            trying_for_us: 0,
        })
        .await
        .unwrap()
    {
        ClientReply::Begun { txn, .. } => txn,
        other => panic!("{other:?}"),
    };
    // Another connection cannot touch it, even knowing its id.
    assert_eq!(
        b.call(ClientOp::Abort { txn }).await.unwrap(),
        ClientReply::Rejected(RequestError::UnknownTransaction(txn))
    );
    // Its own connection can.
    let commit = ClientOp::Commit {
        txn,
        writes: Vec::new(),
        speculative: false,
    };
    assert!(matches!(
        a.call(commit).await.unwrap(),
        ClientReply::Committed { .. }
    ));
    for n in nodes {
        n.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_of_another_cluster_or_without_the_token_are_refused() {
    let (mut ls, addrs) = listeners(1).await;
    let mut cfg = config(&addrs);
    cfg.client_token = Some("sesame".into());
    let node = serve_on::<Relay>(env(0, 1, "lan"), ls.pop().unwrap(), cfg).unwrap();
    let addr = node.local_addr();
    let refusal =
        async |config: ClientConfig| match TcpTransport::connect(addr, NodeId(0), &config).await {
            Ok(_) => panic!("admitted"),
            Err(e) => {
                assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
                e.to_string()
            }
        };
    assert!(
        refusal(client_config())
            .await
            .contains("requires a client token")
    );
    let mut wrong = client_config();
    wrong.token = Some("open".into());
    assert!(refusal(wrong).await.contains("wrong client token"));
    let mut other = client_config();
    other.token = Some("sesame".into());
    other.cluster_id = "prod".into();
    assert!(
        refusal(other)
            .await
            .contains("belongs to cluster 'test', not 'prod'")
    );
    let mut stale = client_config();
    stale.token = Some("sesame".into());
    stale.fingerprint = "0000000000000000".into();
    assert!(refusal(stale).await.contains("cluster file differs"));
    let mut good = client_config();
    good.token = Some("sesame".into());
    let s = Session::new(TcpTransport::connect(addr, NodeId(0), &good).await.unwrap());
    s.begin(false).await.unwrap().commit().await.unwrap();
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_with_another_configuration_is_refused_with_the_difference() {
    let (ls, addrs) = listeners(2).await;
    let mut nodes = Vec::new();
    for (i, l) in ls.into_iter().enumerate() {
        let mut cfg = config(&addrs);
        if i == 1 {
            cfg.identity
                .settings
                .push(("replication".into(), "3".into()));
        }
        nodes.push(serve_on::<Relay>(env(i as u32, 2, "lan"), l, cfg).unwrap());
    }
    // Node 0 pings node 1 for every begin; node 1 never lets it in, so the begin times out.
    let mut quick = client_config();
    quick.request_timeout = Duration::from_millis(500);
    let t = TcpTransport::connect(addrs[0], NodeId(0), &quick)
        .await
        .unwrap();
    assert!(matches!(
        Session::new(t).begin(false).await,
        Err(TxnError::Unavailable(TransportError::Timeout(_)))
    ));
    // What node 1 answers such a hello.
    let mut s = std::net::TcpStream::connect(addrs[1]).unwrap();
    s.write_all(&framed(&encode_frame(&hello(0)).unwrap()))
        .unwrap();
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).unwrap();
    let Body::<()>::Refused(why) = decode_frame(&answer[4..]).unwrap() else {
        panic!("not refused");
    };
    assert!(why.contains("replication = 3 here, (unset) there"), "{why}");
    for n in nodes {
        n.shutdown().await;
    }
}

/// A TLS cluster of `n` nodes (certificates from `pki`), each node holding certificate
/// `certs[i]` of the PKI.
async fn tls_cluster(pki: &GeneratedPki, certs: &[usize]) -> Vec<TcpNodeHandle> {
    let n = certs.len();
    let (ls, addrs) = listeners(n).await;
    ls.into_iter()
        .enumerate()
        .map(|(i, l)| {
            let node = &pki.nodes[certs[i]];
            let tls = NodeTls::from_pem(
                NodeId(certs[i] as u32),
                pki.ca_cert.as_bytes(),
                node.cert.as_bytes(),
                node.key.as_bytes(),
            )
            .unwrap();
            let mut cfg = config(&addrs);
            cfg.tls = Some(Arc::new(tls));
            serve_on::<Relay>(env(i as u32, n, "lan"), l, cfg).unwrap()
        })
        .collect()
}

fn tls_client(pki: &GeneratedPki, timeout: Duration) -> ClientConfig {
    let mut config = client_config();
    config.tls = Some(ClientTls::from_pem(pki.ca_cert.as_bytes()).unwrap());
    config.request_timeout = timeout;
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_talk_over_mutual_tls_and_an_impostor_is_refused() {
    let pki = generate_pki("test", 3).unwrap();
    let nodes = tls_cluster(&pki, &[0, 1, 2]).await;
    for (i, node) in nodes.iter().enumerate() {
        let t = TcpTransport::connect(
            node.local_addr(),
            NodeId(i as u32),
            &tls_client(&pki, Duration::from_secs(5)),
        )
        .await
        .unwrap();
        let session = Session::new(t);
        let txn = session.begin(false).await.unwrap();
        assert_eq!(
            txn.snapshot(),
            Timestamp((i as u64 + 1) % 3),
            "pinged its peer over TLS"
        );
    }
    // A plaintext client cannot talk to a TLS node, nor a client that expects another node.
    let plain = TcpTransport::connect(nodes[0].local_addr(), NodeId(0), &client_config()).await;
    assert!(plain.is_err());
    let wrong_name = TcpTransport::connect(
        nodes[0].local_addr(),
        NodeId(1),
        &tls_client(&pki, Duration::from_secs(5)),
    )
    .await;
    assert!(
        wrong_name.is_err(),
        "node 0's certificate does not name node 1"
    );
    for n in nodes {
        n.shutdown().await;
    }

    // Node 1 of this cluster holds node 0's certificate: it cannot pass for node 1 to node 0
    // (so node 0's pings to node 1 never arrive either: node 0 checks node 1's name).
    let nodes = tls_cluster(&pki, &[0, 0]).await;
    let t = TcpTransport::connect(
        nodes[0].local_addr(),
        NodeId(0),
        &tls_client(&pki, Duration::from_millis(500)),
    )
    .await
    .unwrap();
    assert!(matches!(
        Session::new(t).begin(false).await,
        Err(TxnError::Unavailable(TransportError::Timeout(_)))
    ));
    for n in nodes {
        n.shutdown().await;
    }
}

#[test]
fn a_node_refuses_a_certificate_issued_for_another_node() {
    let pki = generate_pki("test", 2).unwrap();
    let e = NodeTls::from_pem(
        NodeId(1),
        pki.ca_cert.as_bytes(),
        pki.nodes[0].cert.as_bytes(),
        pki.nodes[0].key.as_bytes(),
    )
    .unwrap_err();
    assert!(e.contains("not issued for node n1"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_are_redialled_when_they_come_back() {
    let (mut ls, addrs) = listeners(2).await;
    let l1 = ls.pop().unwrap();
    let l0 = ls.pop().unwrap();
    drop(l1); // node 1 is down
    let n0 = serve_on::<Relay>(env(0, 2, "lan"), l0, config(&addrs)).unwrap();
    let mut quick = client_config();
    quick.request_timeout = Duration::from_millis(300);
    let t = TcpTransport::connect(n0.local_addr(), NodeId(0), &quick)
        .await
        .unwrap();
    let s = Session::new(t);
    assert!(matches!(
        s.begin(false).await,
        Err(TxnError::Unavailable(TransportError::Timeout(_)))
    ));

    let begin_eventually = async |s: &Session<TcpTransport>| {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match s.begin(false).await {
                Ok(txn) => return txn.snapshot(),
                Err(e) => assert!(Instant::now() < deadline, "still failing: {e}"),
            }
        }
    };
    let n1 = serve::<Relay>(env(1, 2, "lan"), addrs[1], config(&addrs))
        .await
        .unwrap();
    assert_eq!(begin_eventually(&s).await, Timestamp(1));

    // Node 1 restarts: node 0 notices the closed connection and dials again.
    n1.shutdown().await;
    let n1 = serve::<Relay>(env(1, 2, "lan"), addrs[1], config(&addrs))
        .await
        .unwrap();
    assert_eq!(begin_eventually(&s).await, Timestamp(1));
    n0.shutdown().await;
    n1.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_wait_for_a_link_that_is_not_up_yet() {
    // Node 1 starts 300 ms after node 0, which has a client already: its begin pings node 1
    // before node 0 could dial it. The ping waits for the link instead of being dropped, so
    // the begin is answered soon after node 1 is up (Relay has no timeout or retry: a dropped
    // ping would leave it unanswered until the client's 5 s timeout).
    let (mut ls, addrs) = listeners(2).await;
    let l1 = ls.pop().unwrap();
    let l0 = ls.pop().unwrap();
    drop(l1);
    let n0 = serve_on::<Relay>(env(0, 2, "lan"), l0, config(&addrs)).unwrap();
    let s = session(n0.local_addr()).await;
    let begun = tokio::spawn(async move {
        let started = Instant::now();
        let snapshot = s.begin(false).await.map(|txn| txn.snapshot());
        (snapshot, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let n1 = serve::<Relay>(env(1, 2, "lan"), addrs[1], config(&addrs))
        .await
        .unwrap();
    let (snapshot, took) = begun.await.unwrap();
    assert_eq!(snapshot.unwrap(), Timestamp(1), "answered by node 1");
    assert!(
        took < Duration::from_secs(2),
        "the begin took {took:?}: its ping was not carried once the link came up"
    );
    n0.shutdown().await;
    n1.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_for_a_peer_down_longer_than_the_peer_timeout_are_dropped() {
    // Waiting is bounded: a ping sent while node 1 is down, and still down a peer timeout
    // later, is dropped rather than delivered late; a ping sent once it is back is answered.
    let (mut ls, addrs) = listeners(2).await;
    let l1 = ls.pop().unwrap();
    let l0 = ls.pop().unwrap();
    drop(l1);
    let n0 = serve_on::<Relay>(env(0, 2, "lan"), l0, config(&addrs)).unwrap();
    let s = session(n0.local_addr()).await;
    let stale = tokio::spawn(async move { s.begin(false).await.map(|txn| txn.snapshot()) });
    tokio::time::sleep(Limits::default().peer_timeout * 2).await;
    let n1 = serve::<Relay>(env(1, 2, "lan"), addrs[1], config(&addrs))
        .await
        .unwrap();
    let fresh = session(n0.local_addr()).await;
    assert_eq!(fresh.begin(false).await.unwrap().snapshot(), Timestamp(1));
    // The stale ping's answer would have come back with the fresh one's.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !stale.is_finished(),
        "a ping older than the peer timeout was delivered"
    );
    stale.abort();
    n0.shutdown().await;
    n1.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_is_emulated_between_data_centres() {
    // 3dc: VA and OR are 67 ms apart, so a ping-pong between nodes 0 and 1 takes a round trip.
    for emulate in [true, false] {
        let nodes = cluster(3, "3dc", emulate).await;
        let s = session(nodes[0].local_addr()).await;
        s.begin(false).await.unwrap().abort().await;
        let start = Instant::now();
        s.begin(false).await.unwrap().abort().await;
        let took = start.elapsed();
        if emulate {
            assert!(took >= Duration::from_millis(60), "took {took:?}");
        } else {
            assert!(took < Duration::from_millis(60), "took {took:?}");
        }
        for n in nodes {
            n.shutdown().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_node_disconnects_its_clients() {
    let nodes = cluster(1, "lan", true).await;
    let s = session(nodes[0].local_addr()).await;
    s.begin(false).await.unwrap().abort().await;
    for n in nodes {
        n.shutdown().await;
    }
    assert!(matches!(
        s.begin(false).await,
        Err(TxnError::Unavailable(TransportError::Disconnected(_)))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_are_bounded_in_size_and_in_time() {
    let limits = Limits {
        frame_timeout: Duration::from_millis(500),
        max_frame_len: 1024,
        ..Limits::default()
    };
    let node = limited_node(limits).await;
    let addr = node.local_addr();
    tokio::task::spawn_blocking(move || {
        // Before its hello, a connection may announce no more than HELLO_FRAME_LEN.
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(&((HELLO_FRAME_LEN as u32 + 1).to_be_bytes()))
            .unwrap();
        assert!(closed_within(&mut s, Duration::from_secs(2)));
        // A frame that starts and never ends is cut off after frame_timeout.
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(&client_hello()).unwrap();
        s.write_all(&[0, 0, 0, 100, 6, 2]).unwrap();
        let started = Instant::now();
        assert!(closed_within(&mut s, Duration::from_secs(5)));
        assert!(
            started.elapsed() >= Duration::from_millis(400),
            "{:?}",
            started.elapsed()
        );
        // After the hello, a client frame may be no longer than max_frame_len.
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(&client_hello()).unwrap();
        s.write_all(&2048u32.to_be_bytes()).unwrap();
        assert!(closed_within(&mut s, Duration::from_secs(2)));
    })
    .await
    .unwrap();
    let s = session(addr).await;
    s.begin(false).await.unwrap().commit().await.unwrap();
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_bounded_while_handshaking_and_as_clients() {
    let limits = Limits {
        max_handshakes: 2,
        max_clients: 1,
        ..Limits::default()
    };
    let node = limited_node(limits).await;
    let addr = node.local_addr();
    tokio::task::spawn_blocking(move || {
        // Two connections that say nothing hold both handshake slots: a third is closed.
        let _a = std::net::TcpStream::connect(addr).unwrap();
        let _b = std::net::TcpStream::connect(addr).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        assert!(closed_within(&mut c, Duration::from_secs(2)));
    })
    .await
    .unwrap();
    // Once the silent ones time out (5 s), the client slot is the limit: one client at a time.
    tokio::time::sleep(HANDSHAKE_TIMEOUT + Duration::from_millis(500)).await;
    let first = session(addr).await;
    let refused = TcpTransport::connect(addr, NodeId(0), &client_config()).await;
    let Err(e) = refused else {
        panic!("a second client was admitted");
    };
    assert!(
        e.to_string().contains("clients are connected already"),
        "{e}"
    );
    first.begin(false).await.unwrap().commit().await.unwrap();
    drop(first);
    // Its slot is free again once it is gone.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match TcpTransport::connect(addr, NodeId(0), &client_config()).await {
            Ok(_) => break,
            Err(e) => assert!(Instant::now() < deadline, "slot not released: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_clients_are_closed_and_pipelined_requests_all_answered() {
    let limits = Limits {
        client_idle_timeout: Duration::from_millis(300),
        max_requests_in_flight: 2,
        ..Limits::default()
    };
    let node = limited_node(limits).await;
    let addr = node.local_addr();
    tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(&client_hello()).unwrap();
        // Ten requests at once, five times the in-flight limit: every one is answered.
        let mut burst = Vec::new();
        for id in 0..10 {
            burst.extend(framed(
                &encode_frame(&Body::<()>::Request(request(0, id))).unwrap(),
            ));
        }
        s.write_all(&burst).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut answered = 0;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        // The welcome, then ten responses.
        while answered < 11 {
            let n = s.read(&mut chunk).unwrap();
            assert!(n > 0, "closed after {answered} frames");
            buf.extend_from_slice(&chunk[..n]);
            while buf.len() >= 4 {
                let len = u32::from_be_bytes(buf[..4].try_into().unwrap()) as usize;
                if buf.len() < 4 + len {
                    break;
                }
                buf.drain(..4 + len);
                answered += 1;
            }
        }
        // Then nothing more is sent: the node closes the idle connection.
        let started = Instant::now();
        assert!(closed_within(&mut s, Duration::from_secs(5)));
        assert!(started.elapsed() >= Duration::from_millis(200));
    })
    .await
    .unwrap();
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_peer_is_given_up_within_the_peer_timeout_and_dialled_again() {
    // Node 1 is a stand-in that accepts node 0's hello and then stalls: it never echoes a
    // heartbeat, as a SIGSTOPped process or a cut link would not.
    let stalled = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (l0, _) = listeners(1).await;
    let l0 = l0.into_iter().next().unwrap();
    let addrs = [l0.local_addr().unwrap(), stalled.local_addr().unwrap()];
    let accepts = std::thread::spawn(move || {
        let mut times = Vec::new();
        let mut held = Vec::new();
        for _ in 0..2 {
            let (mut s, _) = stalled.accept().unwrap();
            times.push(Instant::now());
            let mut len = [0u8; 4];
            s.read_exact(&mut len).unwrap();
            let mut hello = vec![0u8; u32::from_be_bytes(len) as usize];
            s.read_exact(&mut hello).unwrap();
            s.write_all(&framed(&encode_frame(&Body::<()>::Accepted).unwrap()))
                .unwrap();
            held.push(s);
        }
        times
    });
    let node = serve_on::<Relay>(env(0, 2, "lan"), l0, config(&addrs)).unwrap();
    let times = tokio::task::spawn_blocking(move || accepts.join().unwrap())
        .await
        .unwrap();
    let gap = times[1] - times[0];
    let timeout = Limits::default().peer_timeout;
    assert!(
        gap >= timeout && gap < timeout * 2 + Duration::from_millis(500),
        "the stalled link was redialled after {gap:?}"
    );
    node.shutdown().await;
}
