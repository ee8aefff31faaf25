//! PostgreSQL as a reference peer.
//!
//! [`PgTransport`] implements the augur client [`Transport`] over one PostgreSQL connection, so
//! the workloads that drive augur's protocols run unchanged as interactive transactions on a
//! single PostgreSQL server (see `docs/postgres.md`). Data lives in one table,
//! `kv(k bytea primary key, v bytea not null)`; [`prepare_schema`] creates it and [`truncate`]
//! empties it.
//!
//! How the client operations map onto SQL, with prepared statements, prepared once per connection:
//!
//! - `Begin` does no I/O. `BEGIN ISOLATION LEVEL SERIALIZABLE` or `REPEATABLE READ` (plus
//!   `READ ONLY` for read-only transactions, [`IsolationMode`] decides the level) is pipelined
//!   with the transaction's first statement, as the JDBC driver does: PostgreSQL takes the
//!   snapshot at the first statement after `BEGIN` anyway, so this saves a round trip and changes
//!   nothing else.
//! - `Read` runs `SELECT v FROM kv WHERE k = $1`: one round trip.
//! - `Commit` pipelines one `INSERT .. ON CONFLICT (k) DO UPDATE` or `DELETE` per buffered write
//!   and the `COMMIT` in one round trip. Every statement is sent before any reply is awaited, in
//!   order; the first failure in pipeline order decides the outcome (a statement that fails puts
//!   the transaction in the failed state, after which PostgreSQL turns the `COMMIT` into a
//!   rollback).
//! - `Abort` runs `ROLLBACK` if the transaction has sent anything.
//!
//! Errors map onto [`AbortReason`]s by SQLSTATE (see [`abort_reason`]); connection failures are
//! [`TransportError::Disconnected`]. PostgreSQL exposes no commit timestamp: `Committed` carries
//! the next value of a process-wide counter, taken when the `COMMIT` reply arrives. It orders the
//! commits one process observed in real time, but is *not* PostgreSQL's serialization or version
//! order (two commits on different connections may be observed in either order), so the checker
//! must not use it as version-order evidence. `Begun` carries the counter's current value as its
//! snapshot, for information only.
//!
//! One transport runs one transaction at a time, like the connection beneath it: `Begin` while a
//! transaction is open abandons that one (it is rolled back, pipelined with the next statement),
//! and operations naming any but the current transaction answer `Aborted(TransactionLost)`.

use augur_client::augur_types::{
    AbortReason, ClientId, ClientOp, ClientReply, Key, NodeId, RequestError, Timestamp, TxnId,
    Value,
};
use augur_client::{Transport, TransportError};
use futures::future::BoxFuture;
use std::fmt;
use std::future::poll_fn;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config, NoTls, Statement};

pub use tokio_postgres;

/// The server `scripts/postgres.sh start` runs, with its default port.
pub const DEFAULT_URL: &str = "host=127.0.0.1 port=15432 user=postgres dbname=postgres";

/// How long a call waits for PostgreSQL by default, and the default connect timeout.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The statement that creates the table every transport reads and writes.
pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS kv (k bytea PRIMARY KEY, v bytea NOT NULL)";

const SELECT: &str = "SELECT v FROM kv WHERE k = $1";
const UPSERT: &str =
    "INSERT INTO kv (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v";
const DELETE: &str = "DELETE FROM kv WHERE k = $1";

/// The isolation level transactions run at: one `augur bench` protocol each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IsolationMode {
    /// `SERIALIZABLE`: serializable snapshot isolation (SSI).
    Serializable,
    /// `REPEATABLE READ`: snapshot isolation; write skew is allowed.
    RepeatableRead,
}

impl IsolationMode {
    pub const ALL: [IsolationMode; 2] =
        [IsolationMode::Serializable, IsolationMode::RepeatableRead];

    /// The `augur bench --protocol` name.
    pub fn protocol_name(self) -> &'static str {
        match self {
            IsolationMode::Serializable => "postgres-serializable",
            IsolationMode::RepeatableRead => "postgres-repeatable-read",
        }
    }

    /// The mode a `--protocol` name stands for, if it is one of [`Self::protocol_name`]'s.
    pub fn from_protocol_name(name: &str) -> Option<IsolationMode> {
        IsolationMode::ALL
            .into_iter()
            .find(|m| m.protocol_name() == name)
    }

    /// The SQL name of the level.
    pub fn sql(self) -> &'static str {
        match self {
            IsolationMode::Serializable => "SERIALIZABLE",
            IsolationMode::RepeatableRead => "REPEATABLE READ",
        }
    }

    fn begin(self, read_only: bool) -> &'static str {
        match (self, read_only) {
            (IsolationMode::Serializable, false) => "BEGIN ISOLATION LEVEL SERIALIZABLE",
            (IsolationMode::Serializable, true) => "BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY",
            (IsolationMode::RepeatableRead, false) => "BEGIN ISOLATION LEVEL REPEATABLE READ",
            (IsolationMode::RepeatableRead, true) => {
                "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
            }
        }
    }
}

impl fmt::Display for IsolationMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.protocol_name())
    }
}

/// Connect for administration (no statements prepared).
async fn admin(url: &str) -> Result<Client, tokio_postgres::Error> {
    let mut config: Config = url.parse()?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(DEFAULT_REQUEST_TIMEOUT);
    }
    if config.get_application_name().is_none() {
        config.application_name("augur-admin");
    }
    let (client, connection) = config.connect(NoTls).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!("postgres admin connection ended: {e}");
        }
    });
    Ok(client)
}

/// Create the `kv` table unless it exists. Safe to call concurrently.
pub async fn prepare_schema(url: &str) -> Result<(), tokio_postgres::Error> {
    let client = admin(url).await?;
    match client.batch_execute(SCHEMA).await {
        // Two concurrent `CREATE TABLE IF NOT EXISTS` can both miss the table and collide on the
        // catalog; the loser finds it there the second time.
        Err(e)
            if e.code() == Some(&SqlState::UNIQUE_VIOLATION)
                || e.code() == Some(&SqlState::DUPLICATE_TABLE) =>
        {
            client.batch_execute(SCHEMA).await
        }
        other => other,
    }
}

/// Delete every row of the `kv` table, for a fresh run. Waits for open transactions on it.
pub async fn truncate(url: &str) -> Result<(), tokio_postgres::Error> {
    admin(url).await?.batch_execute("TRUNCATE kv").await
}

/// Orders commits observed by this process; see the crate documentation.
static COMMITS: AtomicU64 = AtomicU64::new(0);

fn next_commit_ts() -> Timestamp {
    Timestamp(COMMITS.fetch_add(1, Ordering::Relaxed) + 1)
}

/// How a failed statement ends the call.
enum Failure {
    /// The transaction is over (or never started) and none of its writes took effect.
    Aborted(AbortReason),
    /// The connection is gone or unusable.
    Disconnected(String),
}

/// The [`AbortReason`] closest to a PostgreSQL error, or `None` if the error means the connection
/// is lost (its class 08, an administrator or crash shutdown, or no SQLSTATE and an I/O error or
/// closed connection).
///
/// | SQLSTATE | condition | reason |
/// |---|---|---|
/// | 40001, message "…due to concurrent update/delete" | first-updater-wins conflict | `WriteWriteConflict` |
/// | 40001, any other message | SSI read/write dependencies | `ValidationFailed` |
/// | 40P01 | deadlock detected | `LockTimeout` |
/// | 55P03 | lock not available (`lock_timeout`) | `LockTimeout` |
/// | 57014 | query cancelled (`statement_timeout`, or the transport's timeout) | `Timeout` |
/// | anything else | | `InvalidRequest`, logged as a warning |
///
/// The 40001 split reads the server's message, so it needs `lc_messages` in English (the script
/// sets `C`); in another language every 40001 maps to `ValidationFailed`.
pub fn abort_reason(e: &tokio_postgres::Error) -> Option<AbortReason> {
    match classify(e) {
        Failure::Aborted(r) => Some(r),
        Failure::Disconnected(_) => None,
    }
}

fn classify(e: &tokio_postgres::Error) -> Failure {
    let Some(db) = e.as_db_error() else {
        let io = std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>());
        if e.is_closed() || io {
            return Failure::Disconnected(e.to_string());
        }
        tracing::warn!("postgres client error: {e}");
        return Failure::Aborted(AbortReason::InvalidRequest);
    };
    let code = db.code();
    let reason = if *code == SqlState::T_R_SERIALIZATION_FAILURE {
        if db
            .message()
            .starts_with("could not serialize access due to concurrent")
        {
            AbortReason::WriteWriteConflict
        } else {
            AbortReason::ValidationFailed
        }
    } else if *code == SqlState::T_R_DEADLOCK_DETECTED || *code == SqlState::LOCK_NOT_AVAILABLE {
        AbortReason::LockTimeout
    } else if *code == SqlState::QUERY_CANCELED {
        AbortReason::Timeout
    } else if code.code().starts_with("08")
        || *code == SqlState::ADMIN_SHUTDOWN
        || *code == SqlState::CRASH_SHUTDOWN
        || *code == SqlState::CANNOT_CONNECT_NOW
    {
        return Failure::Disconnected(format!("{}: {}", code.code(), db.message()));
    } else {
        tracing::warn!(
            "postgres error {} ({}) mapped to invalid_request",
            code.code(),
            db.message()
        );
        AbortReason::InvalidRequest
    };
    Failure::Aborted(reason)
}

/// The transaction a transport runs.
#[derive(Clone, Copy, Debug)]
struct Current {
    id: TxnId,
    read_only: bool,
    /// Its `BEGIN` was sent (with its first statement).
    begun: bool,
}

#[derive(Debug, Default)]
struct State {
    current: Option<Current>,
    /// The server may hold a transaction this transport no longer tracks (abandoned, or its call
    /// timed out): a `ROLLBACK` goes ahead of the next `BEGIN`.
    dirty: bool,
    /// A call is exchanging statements; still set at the next call if that one was dropped.
    in_flight: bool,
    next_seq: u64,
}

impl State {
    /// The transaction `txn` if it is the current one.
    fn current(&self, txn: TxnId) -> Option<Current> {
        self.current.filter(|c| c.id == txn)
    }
}

/// The prepared statements of one connection.
struct Statements {
    select: Statement,
    upsert: Statement,
    delete: Statement,
    begin_rw: Statement,
    begin_ro: Statement,
    commit: Statement,
    rollback: Statement,
}

type Exec<'a> = BoxFuture<'a, Result<u64, tokio_postgres::Error>>;

/// Run `steps` pipelined: each is sent (first polled) in order before any reply is awaited.
/// Returns the first failure in pipeline order and its position.
async fn pipeline(mut steps: Vec<Option<Exec<'_>>>) -> Option<(usize, tokio_postgres::Error)> {
    let mut first: Option<(usize, tokio_postgres::Error)> = None;
    poll_fn(|cx| {
        let mut busy = false;
        for (i, slot) in steps.iter_mut().enumerate() {
            let Some(step) = slot else { continue };
            match step.as_mut().poll(cx) {
                Poll::Pending => busy = true,
                Poll::Ready(result) => {
                    *slot = None;
                    if let Err(e) = result
                        && first.as_ref().is_none_or(|(j, _)| i < *j)
                    {
                        first = Some((i, e));
                    }
                }
            }
        }
        if busy { Poll::Pending } else { Poll::Ready(()) }
    })
    .await;
    first
}

/// An augur client session backed by one PostgreSQL connection.
pub struct PgTransport {
    client_id: ClientId,
    mode: IsolationMode,
    db: Client,
    stmts: Statements,
    state: tokio::sync::Mutex<State>,
    timeout: Duration,
    origin: Instant,
}

impl PgTransport {
    /// Connect to `url` (a libpq-style `key=value` string or a `postgresql://` URL) as client
    /// `client`, and prepare the statements. The connection's `application_name` is
    /// `augur-client-<id>` unless the URL sets one. Needs a tokio runtime: the connection runs as
    /// a spawned task. The `kv` table must exist ([`prepare_schema`]).
    pub async fn connect(
        url: &str,
        client: ClientId,
        mode: IsolationMode,
    ) -> Result<PgTransport, tokio_postgres::Error> {
        let mut config: Config = url.parse()?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(DEFAULT_REQUEST_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name(format!("augur-client-{}", client.0));
        }
        let (db, connection) = config.connect(NoTls).await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("postgres connection of client {} ended: {e}", client.0);
            }
        });
        let (select, upsert, delete, begin_rw, begin_ro, commit, rollback) = futures::try_join!(
            db.prepare(SELECT),
            db.prepare(UPSERT),
            db.prepare(DELETE),
            db.prepare(mode.begin(false)),
            db.prepare(mode.begin(true)),
            db.prepare("COMMIT"),
            db.prepare("ROLLBACK"),
        )?;
        Ok(PgTransport {
            client_id: client,
            mode,
            db,
            stmts: Statements {
                select,
                upsert,
                delete,
                begin_rw,
                begin_ro,
                commit,
                rollback,
            },
            state: tokio::sync::Mutex::new(State::default()),
            timeout: DEFAULT_REQUEST_TIMEOUT,
            origin: Instant::now(),
        })
    }

    /// Count this session's time (`Transport::now`, the times a history records) from
    /// `origin` instead of from its connection: every session of one run takes the same origin,
    /// so that the times different sessions record compare (one session's transaction that
    /// finished before another's began shows so in the history).
    pub fn with_origin(mut self, origin: Instant) -> PgTransport {
        self.origin = origin;
        self
    }

    /// Bound every call by `timeout` instead of [`DEFAULT_REQUEST_TIMEOUT`]. A call that runs out
    /// of time answers [`TransportError::Timeout`], asks the server to cancel its statement, and
    /// forgets its transaction (rolled back ahead of the next one).
    pub fn with_request_timeout(mut self, timeout: Duration) -> PgTransport {
        self.timeout = timeout;
        self
    }

    pub fn mode(&self) -> IsolationMode {
        self.mode
    }

    /// The underlying connection, for inspection in tests and tools. Running statements on it
    /// while a transaction is open interleaves them with that transaction.
    pub fn client(&self) -> &Client {
        &self.db
    }

    fn begin_statement(&self, read_only: bool) -> &Statement {
        if read_only {
            &self.stmts.begin_ro
        } else {
            &self.stmts.begin_rw
        }
    }

    /// `stmt` executed, if given; nothing otherwise.
    async fn maybe(&self, stmt: Option<&Statement>) -> Option<Result<u64, tokio_postgres::Error>> {
        match stmt {
            Some(s) => Some(self.db.execute(s, &[]).await),
            None => None,
        }
    }

    fn begin(&self, st: &mut State, read_only: bool) -> ClientReply {
        if st.current.is_some_and(|c| c.begun) {
            st.dirty = true;
        }
        st.next_seq += 1;
        // The client id goes where a coordinator's node id would, so ids differ across clients.
        let id = TxnId::new(NodeId((self.client_id.0 & 0xffff) as u32), st.next_seq);
        st.current = Some(Current {
            id,
            read_only,
            begun: false,
        });
        ClientReply::Begun {
            txn: id,
            snapshot: Timestamp(COMMITS.load(Ordering::Relaxed)),
        }
    }

    async fn read(
        &self,
        st: &mut State,
        txn: TxnId,
        key: &Key,
    ) -> Result<ClientReply, TransportError> {
        let Some(cur) = st.current(txn) else {
            return Ok(ClientReply::Aborted(AbortReason::TransactionLost));
        };
        let rollback = st.dirty.then_some(&self.stmts.rollback);
        let begin = (!cur.begun).then(|| self.begin_statement(cur.read_only));
        let key = key.as_bytes();
        let params: [&(dyn ToSql + Sync); 1] = [&key];
        st.in_flight = true;
        let (rolled_back, begun, row) = tokio::join!(
            biased;
            self.maybe(rollback),
            self.maybe(begin),
            self.db.query_opt(&self.stmts.select, &params),
        );
        st.in_flight = false;
        st.dirty = false;
        if let Some(cur) = &mut st.current {
            cur.begun = true;
        }
        // A failed ROLLBACK of an abandoned transaction matters only if the connection is gone.
        if let Some(Err(e)) = rolled_back
            && let Failure::Disconnected(why) = classify(&e)
        {
            st.current = None;
            return Err(TransportError::Disconnected(why));
        }
        let row = match (begun, row) {
            (Some(Err(e)), _) | (_, Err(e)) => return self.fail(st, &e).await,
            (_, Ok(row)) => row,
        };
        match row.map(|r| r.try_get::<_, &[u8]>(0).map(Value::copy_from_slice)) {
            None => Ok(ClientReply::Value(None)),
            Some(Ok(v)) => Ok(ClientReply::Value(Some(v))),
            Some(Err(e)) => self.fail(st, &e).await,
        }
    }

    /// A statement of the current (begun) transaction failed: roll it back and say why.
    async fn fail(
        &self,
        st: &mut State,
        e: &tokio_postgres::Error,
    ) -> Result<ClientReply, TransportError> {
        st.current = None;
        match classify(e) {
            Failure::Disconnected(why) => Err(TransportError::Disconnected(why)),
            Failure::Aborted(reason) => {
                // The failed transaction keeps its locks until it is rolled back.
                st.in_flight = true;
                if self.db.execute(&self.stmts.rollback, &[]).await.is_err() {
                    st.dirty = true;
                }
                st.in_flight = false;
                Ok(ClientReply::Aborted(reason))
            }
        }
    }

    async fn commit(
        &self,
        st: &mut State,
        txn: TxnId,
        writes: &[(Key, Option<Value>)],
    ) -> Result<ClientReply, TransportError> {
        let Some(cur) = st.current(txn) else {
            return Ok(ClientReply::Aborted(AbortReason::TransactionLost));
        };
        if cur.read_only && !writes.is_empty() {
            if cur.begun {
                st.dirty = true;
            }
            st.current = None;
            return Ok(ClientReply::Rejected(RequestError::WriteInReadOnly(txn)));
        }
        st.current = None;
        if !cur.begun && writes.is_empty() {
            // Nothing read, nothing written: nothing to tell the server.
            return Ok(ClientReply::Committed {
                commit_ts: next_commit_ts(),
            });
        }
        let db = &self.db;
        let mut steps: Vec<Option<Exec<'_>>> = Vec::with_capacity(writes.len() + 2);
        if !cur.begun {
            steps.push(Some(Box::pin(
                db.execute(self.begin_statement(cur.read_only), &[]),
            )));
        }
        let writes_at = steps.len();
        for (k, v) in writes {
            let k = k.as_bytes();
            steps.push(Some(match v {
                Some(v) => Box::pin(db.execute_raw(&self.stmts.upsert, [k, &v[..]])),
                None => Box::pin(db.execute_raw(&self.stmts.delete, [k])),
            }));
        }
        steps.push(Some(Box::pin(db.execute(&self.stmts.commit, &[]))));
        let rollback = st.dirty.then_some(&self.stmts.rollback);
        st.in_flight = true;
        let (rolled_back, failed) = tokio::join!(biased; self.maybe(rollback), pipeline(steps));
        st.in_flight = false;
        st.dirty = false;
        // A failed ROLLBACK of an abandoned transaction matters only if the connection is gone,
        // and then the statements behind it failed too.
        if let Some(Err(e)) = rolled_back {
            tracing::debug!("rollback ahead of a commit failed: {e}");
        }
        let Some((at, e)) = failed else {
            return Ok(ClientReply::Committed {
                commit_ts: next_commit_ts(),
            });
        };
        match classify(&e) {
            Failure::Disconnected(why) => Err(TransportError::Disconnected(why)),
            // Without its BEGIN the writes ran, and committed, one by one: the outcome is not
            // the transaction's. (BEGIN fails only when the server is in deep trouble.)
            Failure::Aborted(_) if at < writes_at => {
                st.dirty = true;
                Err(TransportError::Disconnected(format!(
                    "BEGIN failed, outcome unknown: {e}"
                )))
            }
            // A failed write makes PostgreSQL roll the transaction back at COMMIT; a failed
            // COMMIT ends it too.
            Failure::Aborted(reason) => Ok(ClientReply::Aborted(reason)),
        }
    }

    async fn abort(&self, st: &mut State, txn: TxnId) -> Result<ClientReply, TransportError> {
        let reply = ClientReply::Aborted(AbortReason::UserRollback);
        let Some(cur) = st.current(txn) else {
            return Ok(reply);
        };
        st.current = None;
        if !cur.begun && !st.dirty {
            return Ok(reply);
        }
        st.in_flight = true;
        let result = self.db.execute(&self.stmts.rollback, &[]).await;
        st.in_flight = false;
        st.dirty = false;
        match result {
            Err(e) => match classify(&e) {
                Failure::Disconnected(why) => Err(TransportError::Disconnected(why)),
                Failure::Aborted(_) => Ok(reply),
            },
            Ok(_) => Ok(reply),
        }
    }

    async fn exchange(&self, st: &mut State, op: ClientOp) -> Result<ClientReply, TransportError> {
        match op {
            ClientOp::Begin { read_only, .. } => Ok(self.begin(st, read_only)),
            ClientOp::Read { txn, key } => self.read(st, txn, &key).await,
            ClientOp::Commit { txn, writes, .. } => self.commit(st, txn, &writes).await,
            ClientOp::Abort { txn } => self.abort(st, txn).await,
            // PostgreSQL never commits speculatively, so there is nothing to wait for.
            ClientOp::AwaitOutcome { txn } => {
                Ok(ClientReply::Rejected(RequestError::UnknownTransaction(txn)))
            }
            // PostgreSQL's own statistics are not augur protocol counters.
            ClientOp::NodeStats => Ok(ClientReply::NodeStats(Default::default())),
            // augur's procedures are not stored procedures in the server.
            ClientOp::Execute { .. } => Ok(ClientReply::Rejected(RequestError::UnsupportedForm(
                "one-shot".to_string(),
            ))),
        }
    }
}

impl Transport for PgTransport {
    fn client_id(&self) -> ClientId {
        self.client_id
    }

    fn call(&self, op: ClientOp) -> BoxFuture<'_, Result<ClientReply, TransportError>> {
        Box::pin(async move {
            let mut st = self.state.lock().await;
            if st.in_flight {
                // The previous call was dropped mid-exchange: its transaction is in an unknown
                // state on the server.
                st.in_flight = false;
                st.dirty = true;
                st.current = None;
            }
            if self.db.is_closed() {
                return Err(TransportError::Disconnected(
                    "the postgres connection is closed".into(),
                ));
            }
            match tokio::time::timeout(self.timeout, self.exchange(&mut st, op)).await {
                Ok(result) => result,
                Err(_) => {
                    st.in_flight = false;
                    st.dirty = true;
                    st.current = None;
                    let cancel = self.db.cancel_token();
                    tokio::spawn(async move {
                        if let Err(e) = cancel.cancel_query(NoTls).await {
                            tracing::debug!("cancelling a timed-out postgres statement: {e}");
                        }
                    });
                    Err(TransportError::Timeout(self.timeout))
                }
            }
        })
    }

    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn sleep(&self, d: Duration) -> BoxFuture<'_, ()> {
        Box::pin(tokio::time::sleep(d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_names_round_trip() {
        for m in IsolationMode::ALL {
            assert_eq!(
                IsolationMode::from_protocol_name(m.protocol_name()),
                Some(m)
            );
        }
        assert_eq!(IsolationMode::from_protocol_name("postgres"), None);
        assert_eq!(
            IsolationMode::RepeatableRead.begin(true),
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        );
    }

    #[test]
    fn commit_timestamps_increase() {
        let a = next_commit_ts();
        let b = next_commit_ts();
        assert!(b > a);
    }
}
