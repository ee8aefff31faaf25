//! Measures the resident memory of a store holding N keys with one committed 100-byte value each.
//!
//! Usage: `cargo run --release -p augur-storage --example memory [N]` (N defaults to 1,000,000).
//! Linux only: resident memory comes from `VmRSS` in `/proc/self/status`.

use augur_storage::{Key, MvStore, Timestamp, TxnId, Value};

const VALUE_BYTES: usize = 100;

/// Resident set size of this process in bytes, if the platform reports it.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn main() {
    let keys: u64 = match std::env::args().nth(1) {
        Some(arg) => arg.parse().expect("N must be a number of keys"),
        None => 1_000_000,
    };
    let before = resident_bytes().expect("VmRSS unavailable (not Linux?)");

    // Grown one key at a time, as a replica receiving writes would: no capacity hint.
    let mut store = MvStore::<()>::new();
    for i in 0..keys {
        // Each value is its own allocation, as values arriving in separate messages would be.
        let value = Value::from(vec![(i % 251) as u8; VALUE_BYTES]);
        store
            .entry(&Key::numbered((i % 64) as u32, i))
            .put_committed(TxnId(i), Timestamp(1), Some(value));
    }

    let after = resident_bytes().expect("VmRSS unavailable");
    assert_eq!(store.key_count() as u64, keys);
    assert_eq!(store.version_count() as u64, keys);
    let grown = after.saturating_sub(before);
    println!("keys:              {keys}");
    println!("value bytes:       {VALUE_BYTES}");
    println!("VmRSS before:      {:.1} MiB", mib(before));
    println!("VmRSS after:       {:.1} MiB", mib(after));
    println!("VmRSS growth:      {:.1} MiB", mib(grown));
    if keys > 0 {
        println!(
            "per key:           {:.1} bytes ({:.1} beyond the value itself)",
            grown as f64 / keys as f64,
            grown as f64 / keys as f64 - VALUE_BYTES as f64
        );
    }
}
