//! PostgreSQL, the reference peer, described like augur's protocols so that `--protocol` can
//! name it (`postgres-serializable`, `postgres-repeatable-read`); the binary's `bench::pg` runs it.

use augur_protocols::registry::{
    Engine, INTERACTIVE_ONLY, IsolationLevel, NetworkModel, ProtocolInfo,
};

/// PostgreSQL at the two isolation levels it is compared at, described like augur's protocols.
pub const PEERS: &[ProtocolInfo] = &[
    ProtocolInfo {
        name: "postgres-serializable",
        isolation: IsolationLevel::Serializable,
        isolation_with: &[],
        paper: "reference peer: PostgreSQL SERIALIZABLE (serializable snapshot isolation)",
        summary: "one PostgreSQL server, table kv(k bytea primary key, v bytea), interactive transactions",
        engine: Engine::External,
        commit_order_evidence: false,
        promises: &[],
        network: NetworkModel {
            tolerates_loss: false,
            tolerates_reordering: false,
        },
        mutants: &[],
        settings: &[],
        speculation: None,
        forms: INTERACTIVE_ONLY,
    },
    ProtocolInfo {
        name: "postgres-repeatable-read",
        isolation: IsolationLevel::SnapshotIsolation,
        isolation_with: &[],
        paper: "reference peer: PostgreSQL REPEATABLE READ (snapshot isolation)",
        summary: "one PostgreSQL server, table kv(k bytea primary key, v bytea), interactive transactions",
        engine: Engine::External,
        commit_order_evidence: false,
        promises: &[],
        network: NetworkModel {
            tolerates_loss: false,
            tolerates_reordering: false,
        },
        mutants: &[],
        settings: &[],
        speculation: None,
        forms: INTERACTIVE_ONLY,
    },
];

/// The peer registered under `name`, if it is one.
pub fn peer(name: &str) -> Option<&'static ProtocolInfo> {
    PEERS.iter().find(|p| p.name == name)
}

/// Whether a PostgreSQL server answers at `url` (a quick connection attempt).
pub fn reachable(url: &str) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let connect =
            augur_postgres::tokio_postgres::connect(url, augur_postgres::tokio_postgres::NoTls);
        match tokio::time::timeout(std::time::Duration::from_secs(3), connect).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("no answer within 3 s".into()),
        }
    })
}
