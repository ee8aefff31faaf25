//! `augur bench` against PostgreSQL records histories that `augur check --input` checks at the
//! peer's level, with every client on one clock. Runs only when `AUGUR_PG_URL` names a server
//! (`scripts/postgres.sh start` prints one); otherwise it says SKIPPED, and fails instead when
//! `AUGUR_REQUIRE_PG` is set (CI sets it).

use crate::augur;
use augur_types::history::{History, Op};
use std::collections::HashMap;

fn pg_url(test: &str) -> Option<String> {
    match std::env::var("AUGUR_PG_URL") {
        Ok(url) => Some(url),
        Err(_) if std::env::var_os("AUGUR_REQUIRE_PG").is_some() => {
            panic!("{test}: AUGUR_REQUIRE_PG is set but AUGUR_PG_URL is not")
        }
        Err(_) => {
            eprintln!("SKIPPED {test}: AUGUR_PG_URL is not set (scripts/postgres.sh start)");
            None
        }
    }
}

/// Every committed read of a written value was completed after its writer was invoked: what
/// a history whose clients count time from one origin shows (each PostgreSQL connection used
/// to count from its own start, and a reader could finish before its writer began).
fn one_clock(history: &History) -> Result<(), String> {
    let mut writer = HashMap::new();
    for t in &history.txns {
        for op in &t.ops {
            if let Op::Write {
                key,
                value: Some(value),
            } = op
            {
                writer.insert((key.as_str(), value.as_str()), t);
            }
        }
    }
    for reader in history.txns.iter().filter(|t| t.is_committed()) {
        for op in &reader.ops {
            let Op::Read {
                key,
                value: Some(value),
            } = op
            else {
                continue;
            };
            let Some(w) = writer.get(&(key.as_str(), value.as_str())) else {
                continue;
            };
            if w.index != reader.index && w.invoke_us > reader.complete_us {
                return Err(format!(
                    "attempt {} (finished at {} us) read {key} = {value}, written by attempt {} \
                     invoked at {} us",
                    reader.index, reader.complete_us, w.index, w.invoke_us
                ));
            }
        }
    }
    Ok(())
}

/// `augur check --input path` with `args`, with the solver's step budget deciding rather than
/// the wall time of a loaded machine.
fn check_file(path: &std::path::Path, args: &[&str]) -> std::process::Output {
    let path = path.to_str().expect("a UTF-8 path");
    let mut all = vec!["check", "--input", path, "--solver-seconds", "120"];
    all.extend_from_slice(args);
    augur(&all)
}

#[test]
fn postgres_histories_share_one_clock_and_pass_at_the_peers_levels() {
    let Some(url) = pg_url("postgres_histories_share_one_clock_and_pass_at_the_peers_levels")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for workload in ["rw-register", "list-append"] {
        let history = dir.path().join(format!("{workload}.jsonl"));
        let out = augur(&[
            "bench",
            "--protocol",
            "postgres-serializable,postgres-repeatable-read",
            "--workload",
            workload,
            "--pg-url",
            &url,
            "--duration",
            "1",
            "--warmup",
            "0",
            "--clients",
            "4",
            "--history",
            history.to_str().unwrap(),
            "--out",
            dir.path().join(format!("out-{workload}")).to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{workload}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for peer in ["postgres-serializable", "postgres-repeatable-read"] {
            let path = dir.path().join(format!("{workload}-{peer}.jsonl"));
            let text = std::fs::read_to_string(&path).expect("the peer's history");
            let recorded = augur_check::jsonl::read(text.as_bytes()).expect("a history");
            assert!(recorded.txns.len() > 20, "{peer} on {workload}: too short");
            if let Err(e) = one_clock(&recorded) {
                panic!("{peer} on {workload}: {e}");
            }
            let checked = check_file(&path, &[]);
            let stdout = String::from_utf8_lossy(&checked.stdout);
            assert!(
                checked.status.success(),
                "{peer} on {workload}: {stdout}{}",
                String::from_utf8_lossy(&checked.stderr)
            );
            assert!(stdout.contains("valid: no anomaly"), "{stdout}");
        }
        // The level can be named: PostgreSQL's serializable histories pass as serializable
        // whatever the header says.
        let serializable = dir
            .path()
            .join(format!("{workload}-postgres-serializable.jsonl"));
        let named = check_file(&serializable, &["--level", "serializable"]);
        assert!(
            named.status.success() && String::from_utf8_lossy(&named.stdout).contains("as given"),
            "{}",
            String::from_utf8_lossy(&named.stdout)
        );
    }
}
