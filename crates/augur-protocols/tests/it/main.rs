//! Every integration test of augur-protocols in one binary (one link of raft-rs and the runtime
//! instead of one per file); each module is the test file it was, run with
//! `cargo test -p augur-protocols --test it MODULE::`.

mod at_coordinator;
mod clocksi_rep;
mod common;
mod determinism;
mod dst;
mod failover;
mod golden_clocksi_rep;
mod golden_coverage;
mod golden_lock_commit;
mod golden_nocc_planet;
mod golden_ordered;
mod golden_replicated;
mod golden_rococo;
mod golden_sss;
mod golden_str;
mod golden_walter;
mod gts;
mod handlers_lock_commit;
mod occ;
mod rc;
mod rococo;
mod sequencer;
mod sss_scenarios;
mod str_scenarios;
mod two_pl;
mod twopc_baseline;
mod vts;
mod walter;
mod wire_fuzz;
