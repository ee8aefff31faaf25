//! Against a real server: run only when `AUGUR_PG_URL` names one (`scripts/postgres.sh start`
//! prints it); otherwise each test says SKIPPED on standard error, and fails instead when
//! `AUGUR_REQUIRE_PG` is set (CI sets it, so that a missing server cannot pass unseen). Keys carry the test's name and the process id, so tests share the table with each
//! other and with earlier runs without seeing each other's data.

use augur_client::augur_types::{AbortReason, ClientId, ClientOp, ClientReply, Key, TxnId, Value};
use augur_client::{Session, Transport, TransportError, TxnError};
use augur_postgres::{IsolationMode, PgTransport, prepare_schema};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Tests run one at a time: SERIALIZABLE takes predicate locks on whole B-tree leaf pages, so
/// concurrent tests on neighbouring keys would abort each other's transactions.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The server's URL, with the table created, and the right to run; `None` (and a note) when no
/// server is configured.
async fn server(test: &str) -> Option<(String, tokio::sync::MutexGuard<'static, ()>)> {
    let Ok(url) = std::env::var("AUGUR_PG_URL") else {
        if std::env::var_os("AUGUR_REQUIRE_PG").is_some() {
            panic!("{test}: AUGUR_REQUIRE_PG is set but AUGUR_PG_URL is not: no server to test");
        }
        // Written to the stream itself, not through eprintln!, which the test harness
        // swallows for a test that passes: a skip must be seen.
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED {test}: AUGUR_PG_URL is not set (scripts/postgres.sh start prints one)"
        );
        return None;
    };
    let turn = SERIAL.lock().await;
    prepare_schema(&url).await.expect("create the kv table");
    Some((url, turn))
}

static NEXT_CLIENT: AtomicU64 = AtomicU64::new(1);

async fn session(url: &str, mode: IsolationMode) -> Session<PgTransport> {
    // Distinct client ids per process run, so application names tell connections apart.
    let id = u64::from(std::process::id()) * 1000 + NEXT_CLIENT.fetch_add(1, Ordering::Relaxed);
    let transport = PgTransport::connect(url, ClientId(id), mode)
        .await
        .expect("connect");
    Session::new(transport)
}

fn key(test: &str, name: &str) -> Key {
    Key::tagged(
        0,
        format!("{test}/{}/{name}", std::process::id()).as_bytes(),
    )
}

fn val(s: &str) -> Option<Value> {
    Some(Value::copy_from_slice(s.as_bytes()))
}

#[tokio::test]
async fn committed_writes_are_read_back() {
    let Some((url, _turn)) = server("committed_writes_are_read_back").await else {
        return;
    };
    for mode in IsolationMode::ALL {
        let test = format!("round-trip-{mode}");
        let (a, b) = (key(&test, "a"), key(&test, "b"));
        let s = session(&url, mode).await;

        // A blind write commits in one round trip (BEGIN, writes and COMMIT pipelined).
        let mut t = s.begin(false).await.unwrap();
        t.write(a.clone(), val("1")).unwrap();
        t.write(b.clone(), val("2")).unwrap();
        let ts1 = t.commit().await.expect("commit");

        let mut t = s.begin(false).await.unwrap();
        assert_eq!(t.read(&a).await.unwrap(), val("1"));
        assert_eq!(t.read(&b).await.unwrap(), val("2"));
        t.write(a.clone(), val("one")).unwrap();
        t.write(b.clone(), None).unwrap();
        let ts2 = t.commit().await.expect("commit");
        assert!(ts2 > ts1, "commit timestamps increase");

        // From another connection, read-only.
        let other = session(&url, mode).await;
        let mut t = other.begin(true).await.unwrap();
        assert_eq!(t.read(&a).await.unwrap(), val("one"));
        assert_eq!(t.read(&b).await.unwrap(), None, "the delete took effect");
        t.commit().await.expect("read-only commit");

        // A rolled-back write leaves nothing behind.
        let mut t = s.begin(false).await.unwrap();
        assert_eq!(t.read(&a).await.unwrap(), val("one"));
        t.write(a.clone(), val("never")).unwrap();
        t.abort().await;
        let mut t = other.begin(true).await.unwrap();
        assert_eq!(t.read(&a).await.unwrap(), val("one"));
        t.abort().await;
    }
}

/// Two SERIALIZABLE transactions read, then write, the same key: whichever way their commits
/// interleave, exactly one commits.
#[tokio::test]
async fn concurrent_writers_of_one_key_one_aborts() {
    let Some((url, _turn)) = server("concurrent_writers_of_one_key_one_aborts").await else {
        return;
    };
    let test = "ww";
    let setup = session(&url, IsolationMode::Serializable).await;
    let mut t = setup.begin(false).await.unwrap();
    t.write(key(test, "x"), val("0")).unwrap();
    t.commit().await.unwrap();

    let s1 = session(&url, IsolationMode::Serializable).await;
    let s2 = session(&url, IsolationMode::Serializable).await;
    // x exists (update conflict), y does not (two inserts of one new key).
    for (round, name) in ["x", "y", "x", "y"].into_iter().enumerate() {
        let k = key(test, name);
        let mut t1 = s1.begin(false).await.unwrap();
        let mut t2 = s2.begin(false).await.unwrap();
        // Reading fixes each snapshot before either commits.
        let _ = t1.read(&k).await.unwrap();
        let _ = t2.read(&k).await.unwrap();
        t1.write(k.clone(), val("1")).unwrap();
        t2.write(k.clone(), val("2")).unwrap();
        let (r1, r2) = if round < 2 {
            // One after the other.
            let r1 = t1.commit().await;
            (r1, t2.commit().await)
        } else {
            // Both commits in flight at once: the second writer waits for the first's row lock.
            tokio::join!(t1.commit(), t2.commit())
        };
        eprintln!("{name}, round {round}: {r1:?} / {r2:?}");
        let aborted: Vec<AbortReason> = [&r1, &r2]
            .into_iter()
            .filter_map(|r| match r {
                Err(TxnError::Aborted(reason)) => Some(*reason),
                Ok(_) => None,
                Err(e) => panic!("unexpected failure {e}"),
            })
            .collect();
        assert_eq!(
            aborted.len(),
            1,
            "exactly one of the two commits: {r1:?} {r2:?}"
        );
        assert!(
            matches!(
                aborted[0],
                AbortReason::WriteWriteConflict | AbortReason::ValidationFailed
            ),
            "a conflict abort, got {}",
            aborted[0]
        );
        if round == 0 {
            assert_eq!(r2, Err(TxnError::Aborted(AbortReason::WriteWriteConflict)));
        }
    }
}

/// The two-doctors example: each transaction sees both doctors on call and takes itself off.
/// Returns whether each of the two committed.
async fn two_doctors(url: &str, mode: IsolationMode) -> (bool, bool) {
    let test = format!("skew-{mode}");
    let (alice, bob) = (key(&test, "alice"), key(&test, "bob"));
    let setup = session(url, mode).await;
    let mut t = setup.begin(false).await.unwrap();
    t.write(alice.clone(), val("on")).unwrap();
    t.write(bob.clone(), val("on")).unwrap();
    t.commit().await.unwrap();

    let s1 = session(url, mode).await;
    let s2 = session(url, mode).await;
    let mut t1 = s1.begin(false).await.unwrap();
    let mut t2 = s2.begin(false).await.unwrap();
    for t in [&mut t1, &mut t2] {
        assert_eq!(t.read(&alice).await.unwrap(), val("on"));
        assert_eq!(t.read(&bob).await.unwrap(), val("on"));
    }
    t1.write(alice.clone(), val("off")).unwrap();
    t2.write(bob.clone(), val("off")).unwrap();
    let r1 = t1.commit().await;
    let r2 = t2.commit().await;
    eprintln!("{mode}: {r1:?} / {r2:?}");
    for r in [&r1, &r2] {
        assert!(
            matches!(r, Ok(_) | Err(TxnError::Aborted(_))),
            "unexpected {r:?}"
        );
    }

    let mut t = setup.begin(true).await.unwrap();
    let on = [t.read(&alice).await.unwrap(), t.read(&bob).await.unwrap()];
    t.abort().await;
    let on_call = on.iter().filter(|v| **v == val("on")).count();
    assert_eq!(
        on_call,
        2 - usize::from(r1.is_ok()) - usize::from(r2.is_ok()),
        "the committed ones took themselves off"
    );
    (r1.is_ok(), r2.is_ok())
}

#[tokio::test]
async fn repeatable_read_allows_write_skew_serializable_refuses_it() {
    let Some((url, _turn)) =
        server("repeatable_read_allows_write_skew_serializable_refuses_it").await
    else {
        return;
    };
    assert_eq!(
        two_doctors(&url, IsolationMode::RepeatableRead).await,
        (true, true),
        "snapshot isolation commits both: nobody is on call"
    );
    let (c1, c2) = two_doctors(&url, IsolationMode::Serializable).await;
    assert!(c1 ^ c2, "SERIALIZABLE commits exactly one of the two");
}

/// Unknown, finished and abandoned transactions; `READ ONLY` and the cost-free paths.
#[tokio::test]
async fn transaction_bookkeeping() {
    let Some((url, _turn)) = server("transaction_bookkeeping").await else {
        return;
    };
    let k = key("bookkeeping", "k");
    let s = session(&url, IsolationMode::Serializable).await;
    let tr = s.transport();
    let read = |txn: TxnId| ClientOp::Read {
        txn,
        key: k.clone(),
    };

    // A transaction abandoned after a read (its connection-side transaction still open) is
    // rolled back ahead of the next one, which works normally.
    let ClientReply::Begun { txn: old, .. } = tr
        .call(ClientOp::Begin {
            read_only: false,
            speculative: false,
            trying_for_us: 0,
        })
        .await
        .unwrap()
    else {
        panic!("begin")
    };
    assert_eq!(tr.call(read(old)).await.unwrap(), ClientReply::Value(None));
    let mut t = s.begin(false).await.unwrap();
    assert_eq!(t.read(&k).await.unwrap(), None);
    t.write(k.clone(), val("v")).unwrap();
    t.commit()
        .await
        .expect("commit after an abandoned transaction");
    // The abandoned one is gone.
    assert_eq!(
        tr.call(read(old)).await.unwrap(),
        ClientReply::Aborted(AbortReason::TransactionLost)
    );
    assert_eq!(
        tr.call(ClientOp::Abort { txn: old }).await.unwrap(),
        ClientReply::Aborted(AbortReason::UserRollback)
    );

    // An abandoned transaction with writes that never reached the server, then a blind write.
    let mut t = s.begin(false).await.unwrap();
    assert_eq!(t.read(&k).await.unwrap(), val("v"));
    drop(t);
    let mut t = s.begin(false).await.unwrap();
    t.write(k.clone(), val("w")).unwrap();
    t.commit()
        .await
        .expect("blind write after an abandoned one");

    // Read-only transactions cannot write, even if a client ships writes.
    let ClientReply::Begun { txn, .. } = tr
        .call(ClientOp::Begin {
            read_only: true,
            speculative: false,
            trying_for_us: 0,
        })
        .await
        .unwrap()
    else {
        panic!("begin")
    };
    assert!(matches!(
        tr.call(ClientOp::Commit {
            txn,
            writes: vec![(k.clone(), val("x"))],
            speculative: false,
        })
        .await
        .unwrap(),
        ClientReply::Rejected(_)
    ));
    // An empty transaction commits without a statement; one with reads only commits too.
    let t = s.begin(true).await.unwrap();
    t.commit().await.expect("empty commit");
    let mut t = s.begin(true).await.unwrap();
    assert_eq!(t.read(&k).await.unwrap(), val("w"));
    t.commit().await.expect("read-only commit");
    // A transaction that reached the server is rolled back on abort.
    let mut t = s.begin(false).await.unwrap();
    assert_eq!(t.read(&k).await.unwrap(), val("w"));
    t.abort().await;
    let pid: i32 = tr
        .client()
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let admin = session(&url, IsolationMode::Serializable).await;
    let state: String = admin
        .transport()
        .client()
        .query_one("SELECT state FROM pg_stat_activity WHERE pid = $1", &[&pid])
        .await
        .unwrap()
        .get(0);
    assert_eq!(state, "idle", "no transaction left open");
}

/// A connection the server terminates answers `Disconnected`; a commit cut off that way has an
/// unknown outcome.
#[tokio::test]
async fn a_lost_connection_is_disconnected() {
    let Some((url, _turn)) = server("a_lost_connection_is_disconnected").await else {
        return;
    };
    let s = session(&url, IsolationMode::RepeatableRead).await;
    let pid: i32 = s
        .transport()
        .client()
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let admin = session(&url, IsolationMode::RepeatableRead).await;
    let mut t = s.begin(false).await.unwrap();
    assert_eq!(t.read(&key("lost", "k")).await.unwrap(), None);
    let killed: bool = admin
        .transport()
        .client()
        .query_one("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .unwrap()
        .get(0);
    assert!(killed);
    // The client learns of it at its next request.
    tokio::time::sleep(Duration::from_millis(100)).await;
    t.write(key("lost", "k"), val("v")).unwrap();
    match t.commit().await {
        Err(TxnError::Unavailable(TransportError::Disconnected(why))) => {
            eprintln!("disconnected: {why}")
        }
        other => panic!("expected Disconnected, got {other:?}"),
    }
    assert!(matches!(
        s.begin(false).await,
        Err(TxnError::Unavailable(TransportError::Disconnected(_)))
    ));
}

/// A call that outlives the request timeout answers `Timeout`, and the transport goes on.
#[tokio::test]
async fn a_blocked_call_times_out_and_the_transport_recovers() {
    let Some((url, _turn)) = server("a_blocked_call_times_out_and_the_transport_recovers").await
    else {
        return;
    };
    let k = key("timeout", "k");
    let holder = session(&url, IsolationMode::RepeatableRead).await;
    // Hold the row lock of k with a plain SQL transaction on the holder's connection.
    let c = holder.transport().client();
    c.batch_execute("BEGIN").await.unwrap();
    c.execute(
        "INSERT INTO kv VALUES ($1, 'held') ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v",
        &[&k.as_bytes()],
    )
    .await
    .unwrap();

    let id = ClientId(u64::from(std::process::id()) * 1000 + 999);
    let blocked = PgTransport::connect(&url, id, IsolationMode::RepeatableRead)
        .await
        .unwrap()
        .with_request_timeout(Duration::from_millis(300));
    let s = Session::new(blocked);
    let mut t = s.begin(false).await.unwrap();
    t.write(k.clone(), val("mine")).unwrap();
    let started = Instant::now();
    assert_eq!(
        t.commit().await,
        Err(TxnError::Unavailable(TransportError::Timeout(
            Duration::from_millis(300)
        )))
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    // The transport asked the server to cancel the blocked upsert; give the cancel request time
    // to arrive before the lock is released (otherwise the commit goes through, which a timed-out
    // commit, whose outcome is unknown, may).
    tokio::time::sleep(Duration::from_millis(500)).await;
    c.batch_execute("ROLLBACK").await.unwrap();

    // The timed-out statement was cancelled and its transaction is rolled back ahead of the next.
    let mut t = s.begin(false).await.unwrap();
    assert_eq!(t.read(&k).await.unwrap(), None, "neither write committed");
    t.write(k.clone(), val("later")).unwrap();
    t.commit().await.expect("the transport recovered");
}

/// Clients move money between a few hot accounts, in random order (deadlocks included): every
/// failure is a typed conflict abort, never an error or a lost outcome, and the total is
/// conserved at both levels (REPEATABLE READ prevents lost updates too).
#[tokio::test]
async fn contended_transfers_conserve_the_total() {
    let Some((url, _turn)) = server("contended_transfers_conserve_the_total").await else {
        return;
    };
    const ACCOUNTS: u64 = 6;
    const CLIENTS: u64 = 8;
    const TRANSFERS: u64 = 60;
    for mode in IsolationMode::ALL {
        let test = format!("bank-{mode}");
        let account = |i: u64| key(&test, &format!("acct{i}"));
        let setup = session(&url, mode).await;
        let mut t = setup.begin(false).await.unwrap();
        for i in 0..ACCOUNTS {
            t.write(account(i), val("100")).unwrap();
        }
        t.commit().await.unwrap();

        let mut clients = Vec::new();
        for c in 0..CLIENTS {
            let s = session(&url, mode).await;
            let accounts: Vec<Key> = (0..ACCOUNTS).map(account).collect();
            clients.push(tokio::spawn(async move {
                let mut aborts: Vec<AbortReason> = Vec::new();
                // A small deterministic generator per client.
                let mut x = c * 7919 + 1;
                let mut next = move || {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x
                };
                for _ in 0..TRANSFERS {
                    let from = (next() % ACCOUNTS) as usize;
                    let to = (from + 1 + (next() % (ACCOUNTS - 1)) as usize) % ACCOUNTS as usize;
                    loop {
                        let mut t = s.begin(false).await.unwrap();
                        let result = async {
                            let a = t.read(&accounts[from]).await?.unwrap();
                            let b = t.read(&accounts[to]).await?.unwrap();
                            let a: i64 = std::str::from_utf8(&a).unwrap().parse().unwrap();
                            let b: i64 = std::str::from_utf8(&b).unwrap().parse().unwrap();
                            t.write(accounts[from].clone(), val(&(a - 1).to_string()))?;
                            t.write(accounts[to].clone(), val(&(b + 1).to_string()))?;
                            Ok::<_, TxnError>(())
                        }
                        .await;
                        let result = match result {
                            Ok(()) => t.commit().await.map(|_| ()),
                            Err(e) => Err(e),
                        };
                        match result {
                            Ok(()) => break,
                            Err(TxnError::Aborted(r)) => aborts.push(r),
                            Err(e) => panic!("client {c}: {e}"),
                        }
                    }
                }
                aborts
            }));
        }
        let mut reasons = std::collections::BTreeMap::new();
        for c in clients {
            for r in c.await.unwrap() {
                *reasons.entry(r).or_insert(0) += 1;
            }
        }
        eprintln!("{mode}: aborts by reason {reasons:?}");
        assert!(reasons.keys().all(|r| matches!(
            r,
            AbortReason::WriteWriteConflict
                | AbortReason::ValidationFailed
                | AbortReason::LockTimeout
        )));
        let mut t = setup.begin(true).await.unwrap();
        let mut total = 0;
        for i in 0..ACCOUNTS {
            let v = t.read(&account(i)).await.unwrap().unwrap();
            total += std::str::from_utf8(&v).unwrap().parse::<i64>().unwrap();
        }
        t.commit().await.unwrap();
        assert_eq!(total, 100 * ACCOUNTS as i64, "{mode}: money is conserved");
    }
}

/// Not a check: prints the round-trip latency of the hot paths (run with `--nocapture`).
#[tokio::test]
async fn round_trip_latency() {
    let Some((url, _turn)) = server("round_trip_latency").await else {
        return;
    };
    const N: u32 = 2000;
    for mode in IsolationMode::ALL {
        let s = session(&url, mode).await;
        let k = key(&format!("latency-{mode}"), "k");
        let mut t = s.begin(false).await.unwrap();
        t.write(k.clone(), val("0")).unwrap();
        t.commit().await.unwrap();

        // The floor: one prepared statement, one round trip, outside any transaction.
        let select = s
            .transport()
            .client()
            .prepare("SELECT v FROM kv WHERE k = $1")
            .await
            .unwrap();
        let started = Instant::now();
        for _ in 0..N {
            let row = s
                .transport()
                .client()
                .query_opt(&select, &[&k.as_bytes()])
                .await
                .unwrap();
            assert!(row.is_some());
        }
        let bare = started.elapsed() / N;

        let started = Instant::now();
        for _ in 0..N {
            let mut t = s.begin(true).await.unwrap();
            t.read(&k).await.unwrap();
            t.commit().await.unwrap();
        }
        let read_only = started.elapsed() / N;

        let started = Instant::now();
        for i in 0..N {
            let mut t = s.begin(false).await.unwrap();
            t.read(&k).await.unwrap();
            t.write(k.clone(), val(&i.to_string())).unwrap();
            t.commit().await.unwrap();
        }
        let read_write = started.elapsed() / N;

        let started = Instant::now();
        for _ in 0..N {
            let mut t = s.begin(false).await.unwrap();
            t.read(&k).await.unwrap();
            t.abort().await;
        }
        let rolled_back = started.elapsed() / N;
        eprintln!(
            "{mode}: bare SELECT {bare:?}; read-only txn (1 read + commit) {read_only:?}; \
             read-write txn (1 read + 1 write + commit) {read_write:?}; \
             read + rollback {rolled_back:?}"
        );
    }
}
