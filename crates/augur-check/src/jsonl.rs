//! The JSON-lines form of a history: a header line, then one transaction record per line.
//! Documented in `docs/history-format.md`.

use augur_types::history::{HISTORY_FORMAT, History, HistoryHeader, TxnRecord};
use std::io::{BufRead, Write};

#[derive(Debug, thiserror::Error)]
pub enum HistoryFileError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("line {line}: {why}")]
    Malformed { line: usize, why: String },
    #[error("history format {found} is not supported (this build reads format {HISTORY_FORMAT})")]
    Version { found: u32 },
}

/// Write `history` as JSON lines.
pub fn write(history: &History, mut out: impl Write) -> std::io::Result<()> {
    serde_json::to_writer(&mut out, &history.header)?;
    out.write_all(b"\n")?;
    for txn in &history.txns {
        serde_json::to_writer(&mut out, txn)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

/// Read a history written by [`write()`]. Records must be in index order.
pub fn read(input: impl BufRead) -> Result<History, HistoryFileError> {
    let mut lines = input.lines().enumerate();
    let header: HistoryHeader = match lines.next() {
        Some((_, line)) => {
            serde_json::from_str(&line?).map_err(|e| HistoryFileError::Malformed {
                line: 1,
                why: format!("not a history header: {e}"),
            })?
        }
        None => {
            return Err(HistoryFileError::Malformed {
                line: 1,
                why: "empty file".into(),
            });
        }
    };
    if header.format != HISTORY_FORMAT {
        return Err(HistoryFileError::Version {
            found: header.format,
        });
    }
    let mut txns = Vec::new();
    for (i, line) in lines {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let txn: TxnRecord =
            serde_json::from_str(&line).map_err(|e| HistoryFileError::Malformed {
                line: i + 1,
                why: e.to_string(),
            })?;
        if txn.index != txns.len() {
            return Err(HistoryFileError::Malformed {
                line: i + 1,
                why: format!(
                    "record index {} where {} was expected",
                    txn.index,
                    txns.len()
                ),
            });
        }
        txns.push(txn);
    }
    Ok(History { header, txns })
}

#[cfg(test)]
mod tests {
    use super::*;
    use augur_types::history::{Op, RecordedOutcome};

    #[test]
    fn a_history_round_trips_and_bad_lines_are_named() {
        let history = History {
            header: HistoryHeader {
                format: HISTORY_FORMAT,
                protocol: "nocc".into(),
                workload: "rw-register".into(),
                seed: 7,
                isolation: "none".into(),
                faults: "none".into(),
                settings: Default::default(),
            },
            txns: vec![TxnRecord {
                index: 0,
                client: 1,
                txn: Some(5),
                name: "rw".into(),
                read_only: false,
                invoke_us: 10,
                complete_us: 20,
                ops: vec![
                    Op::Read {
                        key: "0/1".into(),
                        value: None,
                    },
                    Op::Write {
                        key: "0/1".into(),
                        value: Some("3".into()),
                    },
                ],
                outcome: RecordedOutcome::Committed { commit_ts: 15 },
                ops_unknown: false,
                call: None,
            }],
        };
        let mut buf = Vec::new();
        write(&history, &mut buf).unwrap();
        assert_eq!(read(&buf[..]).unwrap(), history);
        let mut bad = buf.clone();
        bad.extend_from_slice(b"{not json}\n");
        let err = read(&bad[..]).unwrap_err().to_string();
        assert!(err.starts_with("line 3:"), "{err}");
    }
}
