//! A transaction's age under wait-die, as every protocol with wait-die reckons it.
//!
//! Under wait-die a transaction that meets an older lock holder waits and one that meets a
//! younger holder dies; the older always wins, so deadlock cannot occur. That is only fair if
//! a transaction keeps its age when it retries: an attempt aged by its own begin time is the
//! youngest again after every abort and dies again behind the same newcomers, for ever under
//! contention. So the client says how long it has been trying to commit the transaction
//! (`trying_for_us` of `ClientOp::Begin` and `ClientOp::Execute`, measured from its first
//! attempt), and the coordinator dates the attempt back by that much, believing at most
//! [`MAX_CLAIMED_AGE`] of it so that no client can make others die behind it for longer.

use augur_types::Timestamp;
use std::time::Duration;

/// The most seniority a coordinator grants a transaction for having tried before.
pub const MAX_CLAIMED_AGE: Duration = Duration::from_secs(10);

/// The wait-die age of a transaction begun at a coordinator whose clock reads `now`, whose
/// client has been trying it for `trying_for_us` microseconds: smaller is older.
pub fn wait_die_age(now: Timestamp, trying_for_us: u64) -> Timestamp {
    let believed = trying_for_us.min(MAX_CLAIMED_AGE.as_micros() as u64);
    Timestamp(now.0.saturating_sub(believed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_is_dated_back_by_what_its_client_claims_up_to_the_limit() {
        let now = Timestamp(60_000_000);
        assert_eq!(wait_die_age(now, 0), now);
        assert_eq!(wait_die_age(now, 1_500), Timestamp(59_998_500));
        let limit = MAX_CLAIMED_AGE.as_micros() as u64;
        assert_eq!(wait_die_age(now, u64::MAX), Timestamp(now.0 - limit));
        assert_eq!(wait_die_age(Timestamp(5), 1_000), Timestamp(0));
    }
}
