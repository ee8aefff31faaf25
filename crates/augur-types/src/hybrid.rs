//! Hybrid timestamps: a physical clock reading and a logical counter packed into one
//! [`Timestamp`], as DST's decentralized scalar timestamps use them (Wei et al., NSDI '21, §3.4).
//!
//! # Layout: 52 physical bits of microseconds, 12 logical bits
//!
//! The paper packs 48 physical bits over 16 logical ones and does not give the physical unit
//! (its code uses milliseconds shifted left by 12). augur's clocks count microseconds: since the
//! Unix epoch on real runtimes (about 2^50.6 today) and from 10^9 in the simulator. 48 bits of
//! microseconds would not hold a real clock, so the split here is **52 physical bits of
//! microseconds and 12 logical bits**: 2^52 µs is about 142 years after 1970, and microseconds
//! keep the physical part as fine as the clock it comes from.
//!
//! * [`Hybrid::at`]`(now)` is `(now, 0)`: where a transaction's timestamp starts.
//! * "+1" ([`Timestamp::next`]) increments the logical part. A carry out of the 12 logical bits
//!   (4,096 increments past one reading) adds one microsecond to the physical part. That is
//!   harmless: DST's correctness needs only that "+1" makes a *larger* scalar, which it does
//!   whatever the carry; the physical part matters only for freshness (§3.4's staleness bound),
//!   which a carry loosens by a microsecond per 4,096 dependent commits within that microsecond.
//! * A hybrid value is *not* a time: [`Timestamp::micros`] and [`Timestamp::since`] on one
//!   return 4,096 times the physical reading plus the counter, which means nothing. Use
//!   [`Hybrid::physical`] for the microseconds, and [`Hybrid::span`] to turn a duration into
//!   hybrid units.

use crate::Timestamp;
use std::time::Duration;

/// Hybrid timestamps (see the module docs): constructors and accessors over [`Timestamp`], which
/// is what protocols store and send.
#[derive(Clone, Copy, Debug)]
pub struct Hybrid;

impl Hybrid {
    /// Bits of the logical counter.
    pub const LOGICAL_BITS: u32 = 12;

    /// The hybrid timestamp of physical clock reading `now` (microseconds) with logical part 0.
    /// Saturates for a reading beyond 2^52 µs (the year 2112).
    pub fn at(now: Timestamp) -> Timestamp {
        Timestamp(
            now.0
                .checked_shl(Self::LOGICAL_BITS)
                .filter(|v| v >> Self::LOGICAL_BITS == now.0)
                .unwrap_or(u64::MAX),
        )
    }

    /// The physical part of `ts`, in microseconds.
    pub fn physical(ts: Timestamp) -> Timestamp {
        Timestamp(ts.0 >> Self::LOGICAL_BITS)
    }

    /// The logical part of `ts`.
    pub fn logical(ts: Timestamp) -> u64 {
        ts.0 & ((1 << Self::LOGICAL_BITS) - 1)
    }

    /// `d` in hybrid units: what `at(t + d) - at(t)` is.
    pub fn span(d: Duration) -> u64 {
        Self::at(Timestamp(d.as_micros().min(u64::MAX.into()) as u64)).0
    }

    /// `ts` moved `d` later (saturating).
    pub fn add(ts: Timestamp, d: Duration) -> Timestamp {
        Timestamp(ts.0.saturating_add(Self::span(d)))
    }

    /// `ts` moved `d` earlier (saturating at zero).
    pub fn sub(ts: Timestamp, d: Duration) -> Timestamp {
        Timestamp(ts.0.saturating_sub(Self::span(d)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_and_simulated_clocks_fit_and_plus_one_is_logical() {
        // 2025-01-01 in µs since 1970, and the simulator's epoch.
        for now in [1_735_689_600_000_000u64, 1_000_000_000] {
            let ts = Hybrid::at(Timestamp(now));
            assert_eq!(Hybrid::physical(ts), Timestamp(now));
            assert_eq!(Hybrid::logical(ts), 0);
            let next = ts.next();
            assert_eq!(Hybrid::physical(next), Timestamp(now));
            assert_eq!(Hybrid::logical(next), 1);
            assert!(next < Hybrid::at(Timestamp(now + 1)));
        }
        // A carry out of the logical part moves the physical part one microsecond: still larger.
        let full = Timestamp(Hybrid::at(Timestamp(7)).0 + (1 << Hybrid::LOGICAL_BITS) - 1);
        assert_eq!(full.next(), Hybrid::at(Timestamp(8)));
        assert_eq!(Hybrid::at(Timestamp(u64::MAX >> 4)), Timestamp::MAX);
        let t = Hybrid::at(Timestamp(5_000));
        assert_eq!(
            Hybrid::sub(
                Hybrid::add(t, Duration::from_millis(3)),
                Duration::from_millis(3)
            ),
            t
        );
        assert_eq!(
            Hybrid::physical(Hybrid::add(t, Duration::from_millis(3))),
            Timestamp(8_000)
        );
    }
}
