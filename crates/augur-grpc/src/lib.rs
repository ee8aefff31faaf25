//! The language-neutral client API of an augur node: the gRPC service of
//! `proto/augur/v1/augur.proto`, which `augur node` serves on the address its cluster file entry
//! names as `grpc`, beside the peer port. docs/client-api.md describes it for client authors.
//!
//! The service is a front end of the node it runs in, not a client of it: each call or session
//! opens a client session on the node's own inbox ([`NodeClients`]), so a gRPC transaction is
//! coordinated by this node exactly like one from a TCP client connection, under the same
//! checks, limits and metrics, and the node forgets the session when the call ends. One-shot
//! procedures are not offered here: their arguments are typed values with no protobuf form yet.
//!
//! Access: when the cluster requires a client token, a call must carry it as
//! `authorization: Bearer TOKEN` metadata. Over TLS ([`tls_config`]) the node presents its own
//! certificate (name `node-ID.augur`), so clients verify it with the cluster's CA.

use augur_client::{Session, Transport, Txn, TxnError};
use augur_runtime::tcp::NodeClients;
use augur_types::{AbortReason, Key, Timestamp, Value};
use futures::{Stream, StreamExt};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tonic::{Request, Response, Status, Streaming};

/// The code generated from `augur.proto` (messages, the server trait and a client).
pub mod proto {
    #![allow(missing_docs, clippy::all)]
    tonic::include_proto!("augur.v1");
}

use proto::augur_server::{Augur, AugurServer};
use proto::{session_reply, session_request, transact_reply};

/// What a node tells about itself in `Status`.
#[derive(Clone, Debug)]
pub struct NodeInfo {
    pub node: u32,
    pub cluster_id: String,
    pub protocol: String,
    pub fingerprint: String,
}

/// The gRPC service of one node.
pub struct AugurApi {
    clients: NodeClients,
    info: NodeInfo,
    request_timeout: Duration,
    /// Calls and sessions in progress (at most the node's `limits.max_clients`).
    sessions: Arc<Semaphore>,
}

impl AugurApi {
    /// The service of the node `clients` opens sessions on, allowing `max_sessions` calls and
    /// sessions at once, each request waiting at most `request_timeout` for its reply.
    pub fn new(
        clients: NodeClients,
        info: NodeInfo,
        max_sessions: usize,
        request_timeout: Duration,
    ) -> AugurApi {
        AugurApi {
            clients,
            info,
            request_timeout,
            sessions: Arc::new(Semaphore::new(max_sessions)),
        }
    }

    /// The service, ready for a [`tonic::transport::Server`].
    pub fn into_server(self) -> AugurServer<AugurApi> {
        AugurServer::new(self)
    }

    /// Admit a call: its token, then a place among the sessions.
    fn admit<T>(&self, request: &Request<T>) -> Result<OwnedSemaphorePermit, Status> {
        let token = match request.metadata().get("authorization") {
            None => None,
            Some(value) => Some(
                value
                    .to_str()
                    .ok()
                    .and_then(|v| v.strip_prefix("Bearer "))
                    .ok_or_else(|| {
                        Status::unauthenticated("authorization metadata must be `Bearer TOKEN`")
                    })?,
            ),
        };
        self.clients.admit(token).map_err(Status::unauthenticated)?;
        self.sessions.clone().try_acquire_owned().map_err(|_| {
            Status::resource_exhausted(
                "this node serves as many clients as limits.max_clients allows",
            )
        })
    }

    fn session(&self) -> Session<Box<dyn Transport>> {
        Session::new(self.clients.open(self.request_timeout))
    }
}

/// A key from the wire (its size is checked with the rest of the request by the node).
fn key(bytes: &[u8]) -> Key {
    Key::from_bytes(bytes)
}

fn aborted(reason: AbortReason) -> proto::Aborted {
    proto::Aborted {
        reason: reason.name().to_string(),
        description: reason.describe().to_string(),
        retryable: reason.is_retryable(),
    }
}

fn committed(commit_ts: Timestamp) -> proto::Committed {
    proto::Committed {
        commit_ts: commit_ts.0,
    }
}

/// The gRPC error for a request that got no answer other than an abort.
fn status(error: TxnError) -> Status {
    match error {
        TxnError::Aborted(reason) => Status::aborted(reason.describe()),
        TxnError::Rejected(error) => Status::invalid_argument(error.to_string()),
        TxnError::Unavailable(error) => Status::unavailable(format!(
            "{error} (if this was a commit, its outcome is unknown)"
        )),
        TxnError::Protocol(reply) => Status::internal(format!("unexpected reply {reply:?}")),
    }
}

type SessionStream = Pin<Box<dyn Stream<Item = Result<proto::SessionReply, Status>> + Send>>;

#[tonic::async_trait]
impl Augur for AugurApi {
    async fn status(
        &self,
        request: Request<proto::StatusRequest>,
    ) -> Result<Response<proto::StatusReply>, Status> {
        let _permit = self.admit(&request)?;
        let info = &self.info;
        Ok(Response::new(proto::StatusReply {
            node: info.node,
            cluster_id: info.cluster_id.clone(),
            protocol: info.protocol.clone(),
            fingerprint: info.fingerprint.clone(),
        }))
    }

    async fn transact(
        &self,
        request: Request<proto::TransactRequest>,
    ) -> Result<Response<proto::TransactReply>, Status> {
        let _permit = self.admit(&request)?;
        let body = request.into_inner();
        let session = self.session();
        let mut reads = Vec::with_capacity(body.reads.len());
        let outcome = async {
            let mut txn = begin(&session, body.writes.is_empty(), body.trying_for_us).await?;
            for read in &body.reads {
                let value = txn.read(&key(read)).await?;
                reads.push(proto::KeyValue {
                    key: read.clone(),
                    value: value.map(|v| v.to_vec()),
                });
            }
            for write in body.writes {
                txn.write(key(&write.key), write.value.map(Value::from))?;
            }
            txn.commit().await
        }
        .await;
        let outcome = match outcome {
            Ok(commit_ts) => transact_reply::Outcome::Committed(committed(commit_ts)),
            Err(TxnError::Aborted(reason)) => transact_reply::Outcome::Aborted(aborted(reason)),
            Err(other) => return Err(status(other)),
        };
        Ok(Response::new(proto::TransactReply {
            outcome: Some(outcome),
            reads,
        }))
    }

    type SessionStream = SessionStream;

    async fn session(
        &self,
        request: Request<Streaming<proto::SessionRequest>>,
    ) -> Result<Response<SessionStream>, Status> {
        let permit = self.admit(&request)?;
        let requests = request.into_inner();
        let session = self.session();
        // A reply is sent only when the client asks for the next one, so a client that stops
        // reading stops its session rather than filling the node's memory.
        let (replies, stream) = mpsc::channel(1);
        tokio::spawn(async move {
            let _permit = permit;
            serve_session(session, requests, replies).await;
        });
        let stream = futures::stream::unfold(stream, |mut stream| async move {
            stream.recv().await.map(|reply| (reply, stream))
        });
        Ok(Response::new(Box::pin(stream)))
    }
}

/// Begin a transaction in `session` that the client has been trying for `trying_for_us`
/// microseconds (its age under wait-die; the node bounds what it believes).
async fn begin<T: Transport>(
    session: &Session<T>,
    read_only: bool,
    trying_for_us: u64,
) -> Result<Txn<'_, T>, TxnError> {
    let now = session.transport().now();
    let _trying = session.trying_since(now.saturating_sub(Duration::from_micros(trying_for_us)));
    session.begin(read_only).await
}

/// Answer each request of an interactive session in turn, until the client ends the stream or
/// an error ends the session; an open transaction is then rolled back.
async fn serve_session(
    session: Session<Box<dyn Transport>>,
    mut requests: Streaming<proto::SessionRequest>,
    replies: mpsc::Sender<Result<proto::SessionReply, Status>>,
) {
    use session_reply::Reply;
    use session_request::Op;
    let mut open = None;
    loop {
        let op = match requests.message().await {
            Ok(Some(request)) => request.op,
            Ok(None) | Err(_) => break,
        };
        let reply = match (op, open.as_mut()) {
            (None, _) => Err(Status::invalid_argument(
                "a session request names no operation",
            )),
            (Some(Op::Begin(_)), Some(_)) => Err(Status::failed_precondition(
                "a transaction is already open in this session: commit or abort it first",
            )),
            (Some(Op::Begin(asked)), None) => {
                match begin(&session, asked.read_only, asked.trying_for_us).await {
                    Ok(txn) => {
                        let snapshot = txn.snapshot().0;
                        open = Some(txn);
                        Ok(Reply::Begun(proto::Begun { snapshot }))
                    }
                    Err(TxnError::Aborted(reason)) => Ok(Reply::Aborted(aborted(reason))),
                    Err(other) => Err(status(other)),
                }
            }
            (Some(_), None) => Err(Status::failed_precondition(
                "no transaction is open in this session: begin one first",
            )),
            (Some(Op::Get(get)), Some(txn)) => match txn.read(&key(&get.key)).await {
                Ok(value) => Ok(Reply::Value(proto::KeyValue {
                    key: get.key,
                    value: value.map(|v| v.to_vec()),
                })),
                Err(TxnError::Aborted(reason)) => {
                    open = None;
                    Ok(Reply::Aborted(aborted(reason)))
                }
                Err(other) => Err(status(other)),
            },
            (Some(Op::Put(put)), Some(txn)) => txn
                .write(key(&put.key), Some(Value::from(put.value)))
                .map(|()| Reply::Written(proto::Written {}))
                .map_err(status),
            (Some(Op::Delete(delete)), Some(txn)) => txn
                .write(key(&delete.key), None)
                .map(|()| Reply::Written(proto::Written {}))
                .map_err(status),
            (Some(Op::Commit(_)), Some(_)) => {
                let txn = open.take().expect("matched an open transaction");
                match txn.commit().await {
                    Ok(commit_ts) => Ok(Reply::Committed(committed(commit_ts))),
                    Err(TxnError::Aborted(reason)) => Ok(Reply::Aborted(aborted(reason))),
                    Err(other) => Err(status(other)),
                }
            }
            (Some(Op::Abort(_)), Some(_)) => {
                let txn = open.take().expect("matched an open transaction");
                txn.abort().await;
                Ok(Reply::Aborted(aborted(AbortReason::UserRollback)))
            }
        };
        let failed = reply.is_err();
        let reply = reply.map(|reply| proto::SessionReply { reply: Some(reply) });
        if replies.send(reply).await.is_err() || failed {
            break;
        }
    }
    if let Some(txn) = open {
        txn.abort().await;
    }
}

/// TLS for the gRPC port from the node's certificate and key (PEM), as its peers know it.
pub fn tls_config(cert_pem: &[u8], key_pem: &[u8]) -> tonic::transport::ServerTlsConfig {
    tonic::transport::ServerTlsConfig::new()
        .identity(tonic::transport::Identity::from_pem(cert_pem, key_pem))
}

/// How the gRPC port bounds its connections.
#[derive(Clone, Debug)]
pub struct ServeLimits {
    /// Connections open at once; beyond, a new connection is closed at once.
    pub max_connections: usize,
    /// Concurrent calls and sessions on one connection (HTTP/2 streams).
    pub max_streams_per_connection: u32,
    /// How often an idle connection is pinged, and how long the answer may take before the
    /// connection is closed: a client that vanished is noticed within the sum.
    pub keepalive: Duration,
}

/// Serve `api` on `listener` until `shutdown` completes, with TLS if `tls` is given.
pub async fn serve(
    api: AugurApi,
    listener: tokio::net::TcpListener,
    tls: Option<tonic::transport::ServerTlsConfig>,
    limits: ServeLimits,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), tonic::transport::Error> {
    let mut server = tonic::transport::Server::builder()
        .max_concurrent_streams(limits.max_streams_per_connection)
        .http2_keepalive_interval(Some(limits.keepalive))
        .http2_keepalive_timeout(Some(limits.keepalive));
    if let Some(tls) = tls {
        server = server.tls_config(tls)?;
    }
    let connections = Arc::new(Semaphore::new(limits.max_connections));
    let incoming =
        tokio_stream::wrappers::TcpListenerStream::new(listener).filter_map(move |conn| {
            let connections = connections.clone();
            async move {
                match conn {
                    Ok(stream) => match connections.try_acquire_owned() {
                        Ok(permit) => {
                            // Replies are small and answer a waiting client: send them at once.
                            let _ = stream.set_nodelay(true);
                            Some(Ok(connection::Counted::new(stream, permit)))
                        }
                        Err(_) => {
                            tracing::warn!(
                                "gRPC connection refused: {} are open (limits.max_clients)",
                                limits.max_connections
                            );
                            None
                        }
                    },
                    Err(error) => Some(Err(error)),
                }
            }
        });
    server
        .add_service(api.into_server())
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
}

mod connection {
    //! A connection that holds its place among the port's connections until it closes.

    use std::io;
    use std::pin::Pin;
    use std::task::{Context, Poll};
    use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
    use tokio::net::TcpStream;
    use tokio::sync::OwnedSemaphorePermit;
    use tonic::transport::server::{Connected, TcpConnectInfo};

    pub(super) struct Counted {
        stream: TcpStream,
        _place: OwnedSemaphorePermit,
    }

    impl Counted {
        pub(super) fn new(stream: TcpStream, place: OwnedSemaphorePermit) -> Counted {
            Counted {
                stream,
                _place: place,
            }
        }
    }

    impl Connected for Counted {
        type ConnectInfo = TcpConnectInfo;

        fn connect_info(&self) -> TcpConnectInfo {
            self.stream.connect_info()
        }
    }

    impl AsyncRead for Counted {
        fn poll_read(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            Pin::new(&mut self.stream).poll_read(cx, buf)
        }
    }

    impl AsyncWrite for Counted {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            Pin::new(&mut self.stream).poll_write(cx, buf)
        }

        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.stream).poll_flush(cx)
        }

        fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.stream).poll_shutdown(cx)
        }

        fn poll_write_vectored(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            bufs: &[io::IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
        }

        fn is_write_vectored(&self) -> bool {
            self.stream.is_write_vectored()
        }
    }
}
