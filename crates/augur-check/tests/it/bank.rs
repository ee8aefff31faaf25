//! The `bank` invariants over small hand-built histories.

use augur_check::bank::check_bank;
use augur_check::{AnomalyKind, CheckReport};
use augur_types::IsolationLevel;
use augur_types::history::{
    HISTORY_FORMAT, History, HistoryHeader, Op, RecordedOutcome, TxnRecord,
};

/// Three accounts of 10: keys `0/0`, `1/1`, `0/2` (two partitions).
fn history(settings: &[(&str, &str)], txns: Vec<TxnRecord>) -> History {
    History {
        header: HistoryHeader {
            format: HISTORY_FORMAT,
            protocol: "test".into(),
            workload: "bank".into(),
            seed: 1,
            isolation: "snapshot isolation".into(),
            faults: "none".into(),
            settings: settings
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        },
        txns,
    }
}

const SMALL: &[(&str, &str)] = &[("accounts", "3"), ("initial_balance", "10")];

fn read(key: &str, value: Option<&str>) -> Op {
    Op::Read {
        key: key.into(),
        value: value.map(Into::into),
    }
}

fn write(key: &str, value: &str) -> Op {
    Op::Write {
        key: key.into(),
        value: Some(value.into()),
    }
}

fn committed() -> RecordedOutcome {
    RecordedOutcome::Committed { commit_ts: 1 }
}

fn aborted() -> RecordedOutcome {
    RecordedOutcome::Aborted {
        reason: "validation_failed".into(),
    }
}

fn txn(index: usize, name: &str, ops: Vec<Op>, outcome: RecordedOutcome) -> TxnRecord {
    TxnRecord {
        index,
        client: index as u64 % 2,
        txn: Some(index as u64 + 100),
        name: name.into(),
        read_only: name == "scan",
        invoke_us: 10 * index as u64,
        complete_us: 10 * index as u64 + 5,
        ops,
        outcome,
        ops_unknown: false,
        call: None,
    }
}

/// Move 4 from account 0 to account 1, both opening balances.
fn transfer(index: usize) -> TxnRecord {
    let ops = vec![
        read("0/0", None),
        read("1/1", None),
        write("0/0", "6"),
        write("1/1", "14"),
    ];
    txn(index, "transfer", ops, committed())
}

fn scan(index: usize, balances: [Option<&str>; 3], outcome: RecordedOutcome) -> TxnRecord {
    let ops = ["0/0", "1/1", "0/2"]
        .iter()
        .zip(balances)
        .map(|(k, v)| read(k, v))
        .collect();
    txn(index, "scan", ops, outcome)
}

fn kinds(report: &CheckReport) -> Vec<AnomalyKind> {
    report.anomalies.iter().map(|a| a.kind).collect()
}

#[test]
fn a_valid_history_passes() {
    let h = history(
        SMALL,
        vec![
            scan(0, [None, None, None], committed()),
            transfer(1),
            scan(2, [Some("6"), Some("14"), None], committed()),
            // A rolled-back transfer: the source could not cover 7.
            txn(
                3,
                "transfer",
                vec![read("0/2", None), read("0/0", Some("6"))],
                RecordedOutcome::Aborted {
                    reason: "user_rollback".into(),
                },
            ),
            scan(
                4,
                [Some("6"), Some("14"), Some("10")],
                RecordedOutcome::Unknown,
            ),
        ],
    );
    for level in [
        IsolationLevel::ReadCommitted,
        IsolationLevel::ParallelSnapshotIsolation,
        IsolationLevel::SnapshotIsolation,
        IsolationLevel::Spsi,
    ] {
        let report = check_bank(&h, level).unwrap();
        assert!(report.anomalies.is_empty(), "{:?}", report.anomalies);
        assert!(report.is_valid());
        let s = &report.stats;
        assert_eq!((s.txns, s.committed, s.aborted, s.unknown), (5, 3, 1, 1));
    }
}

#[test]
fn a_scan_with_a_wrong_sum_is_reported() {
    // T2 sees the transfer's debit but not its credit.
    let h = history(
        SMALL,
        vec![transfer(0), scan(1, [Some("6"), None, None], committed())],
    );
    let si = check_bank(&h, IsolationLevel::SnapshotIsolation).unwrap();
    assert_eq!(kinds(&si), [AnomalyKind::BankTotal]);
    let a = &si.anomalies[0];
    assert!(a.proscribed);
    assert!(!si.is_valid());
    assert_eq!(a.txns, [1]);
    assert_eq!(a.keys, ["0/0", "1/1", "0/2"]);
    assert!(a.explanation.starts_with("T1 (client 1) scan"), "{a}");
    assert!(
        a.explanation
            .contains("0/0=6, 1/1=absent (10), 0/2=absent (10): sum 26, expected 30"),
        "{a}"
    );

    // Parallel snapshot isolation's snapshots are atomic too.
    let psi = check_bank(&h, IsolationLevel::ParallelSnapshotIsolation).unwrap();
    assert_eq!(kinds(&psi), [AnomalyKind::BankTotal]);
    assert!(!psi.is_valid());

    let rc = check_bank(&h, IsolationLevel::ReadCommitted).unwrap();
    assert_eq!(kinds(&rc), [AnomalyKind::BankTotal]);
    assert!(!rc.anomalies[0].proscribed);
    assert!(rc.is_valid());
}

#[test]
fn aborted_scans_count_only_where_aborted_transactions_are_constrained() {
    let h = history(
        SMALL,
        vec![
            transfer(0),
            scan(1, [Some("6"), Some("10"), Some("10")], aborted()),
        ],
    );
    assert!(
        check_bank(&h, IsolationLevel::SnapshotIsolation)
            .unwrap()
            .anomalies
            .is_empty()
    );
    let spsi = check_bank(&h, IsolationLevel::Spsi).unwrap();
    assert_eq!(kinds(&spsi), [AnomalyKind::BankTotal]);
    assert!(spsi.anomalies[0].proscribed);
    assert!(
        spsi.anomalies[0].explanation.contains("aborted"),
        "{}",
        spsi.anomalies[0]
    );
}

#[test]
fn scans_of_unknown_outcome_count_only_where_aborted_transactions_are_constrained() {
    // The scan may have aborted: a protocol that validates reads at commit can read the debit
    // without the credit and then abort, and its client may never hear of the abort.
    let h = history(
        SMALL,
        vec![
            transfer(0),
            scan(1, [Some("6"), None, None], RecordedOutcome::Unknown),
        ],
    );
    for level in [
        IsolationLevel::SnapshotIsolation,
        IsolationLevel::StrictSerializable,
    ] {
        let report = check_bank(&h, level).unwrap();
        assert!(
            report.anomalies.is_empty(),
            "{level}: {:?}",
            report.anomalies
        );
    }
    let spsi = check_bank(&h, IsolationLevel::Spsi).unwrap();
    assert_eq!(kinds(&spsi), [AnomalyKind::BankTotal]);
    assert!(spsi.anomalies[0].explanation.contains("outcome unknown"));
}

#[test]
fn incomplete_scans_are_not_summed() {
    let partial = txn(
        1,
        "scan",
        vec![read("0/0", Some("6")), read("1/1", None)],
        RecordedOutcome::Unknown,
    );
    let h = history(SMALL, vec![transfer(0), partial]);
    assert!(
        check_bank(&h, IsolationLevel::Spsi)
            .unwrap()
            .anomalies
            .is_empty()
    );
}

#[test]
fn negative_balances_are_reported() {
    let overdraw = txn(
        1,
        "transfer",
        vec![
            read("0/0", Some("6")),
            read("1/1", Some("14")),
            write("0/0", "-1"),
            write("1/1", "21"),
        ],
        committed(),
    );
    let h = history(
        SMALL,
        vec![
            transfer(0),
            overdraw,
            scan(2, [Some("-1"), Some("21"), None], committed()),
        ],
    );
    let report = check_bank(&h, IsolationLevel::SnapshotIsolation).unwrap();
    assert_eq!(
        kinds(&report),
        [AnomalyKind::NegativeBalance, AnomalyKind::NegativeBalance]
    );
    let wrote = &report.anomalies[0];
    assert!(wrote.proscribed);
    assert_eq!(
        (wrote.txns.as_slice(), wrote.keys.as_slice()),
        (&[1][..], &["0/0".to_string()][..])
    );
    assert!(wrote.explanation.contains("wrote 0/0=-1"), "{wrote}");
    assert!(report.anomalies[1].explanation.contains("read 0/0=-1"));
    // The scan's sum is right (30), so no bank-total.
    let rc = check_bank(&h, IsolationLevel::ReadCommitted).unwrap();
    assert!(rc.is_valid() && rc.anomalies.len() == 2);
}

#[test]
fn unreadable_balances_are_garbage_reads() {
    let h = history(SMALL, vec![scan(0, [Some("ten"), None, None], committed())]);
    let report = check_bank(&h, IsolationLevel::ReadCommitted).unwrap();
    assert_eq!(kinds(&report), [AnomalyKind::GarbageRead]);
    assert!(report.anomalies[0].proscribed);
    assert!(report.anomalies[0].explanation.contains("0/0=\"ten\""));
}

#[test]
fn settings_default_and_bad_ones_are_errors() {
    // Eight accounts of 100 when the header says nothing.
    let keys: Vec<String> = (0..8).map(|i| format!("{}/{i}", i % 3)).collect();
    let mut ops: Vec<Op> = keys.iter().map(|k| read(k, None)).collect();
    let h = history(&[], vec![txn(0, "scan", ops.clone(), committed())]);
    assert!(
        check_bank(&h, IsolationLevel::Serializable)
            .unwrap()
            .anomalies
            .is_empty()
    );
    ops[7] = read(&keys[7], Some("99"));
    let h = history(&[], vec![txn(0, "scan", ops, committed())]);
    let report = check_bank(&h, IsolationLevel::Serializable).unwrap();
    assert!(
        report.anomalies[0]
            .explanation
            .contains("sum 799, expected 800")
    );

    for bad in [
        ("accounts", "many"),
        ("accounts", "0"),
        ("initial_balance", "1.5"),
    ] {
        let e = check_bank(&history(&[bad], vec![]), IsolationLevel::Serializable).unwrap_err();
        assert!(e.contains(bad.0), "{e}");
    }
}
