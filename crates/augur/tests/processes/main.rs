//! The augur crate's tests that start `augur` processes (nodes, benches, the nemesis) and talk
//! to them, in one binary; each module is the test file it was.

mod bench_signals;
mod cli;
mod crash_recovery;
mod nemesis;
mod postgres_history;
mod process_cluster;
