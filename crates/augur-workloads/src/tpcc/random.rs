//! The random functions of TPC-C: NURand and its run-time constants (Clause 2.1.6), the
//! last-name syllables (Clause 4.3.2.3), a-strings and n-strings (Clause 4.3.2.2), zip codes
//! (Clause 4.3.2.7) and the "ORIGINAL" marker of I_DATA and S_DATA (Clause 4.3.3.1).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The syllables C_LAST is built from, indexed by the digit they stand for (Clause 4.3.2.3).
pub const SYLLABLES: [&str; 10] = [
    "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
];

/// The A of NURand for C_LAST, C_ID and OL_I_ID (Clause 2.1.6).
pub const A_C_LAST: u32 = 255;
pub const A_C_ID: u32 = 1023;
pub const A_OL_I_ID: u32 = 8191;

/// The customer last name of number `n` (0..=999): the syllables of its three decimal digits.
pub fn last_name(n: u16) -> String {
    debug_assert!(n < 1000, "last-name numbers are 0..=999");
    let n = usize::from(n);
    [n / 100, n / 10 % 10, n % 10]
        .iter()
        .map(|digit| SYLLABLES[*digit])
        .collect()
}

/// The constants C of NURand for the three fields that use it (Clause 2.1.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct NuRandC {
    pub c_last: u32,
    pub c_id: u32,
    pub ol_i_id: u32,
}

impl NuRandC {
    /// Draw the constants for loading the database and for running against it. Clause 2.1.6.1
    /// lets C_ID's and OL_I_ID's run-time C be anything in `0..=A` (including the load value), but
    /// C_LAST's must differ from the load value by a delta within 65..=119 other than 96 and 112,
    /// so that the names looked up at run time are not exactly those the load favoured.
    pub fn draw(rng: &mut ChaCha8Rng) -> (NuRandC, NuRandC) {
        let load = NuRandC {
            c_last: rng.random_range(0..=A_C_LAST),
            c_id: rng.random_range(0..=A_C_ID),
            ol_i_id: rng.random_range(0..=A_OL_I_ID),
        };
        let c_last = loop {
            let candidate = rng.random_range(0..=A_C_LAST);
            if c_last_delta_is_valid(load.c_last, candidate) {
                break candidate;
            }
        };
        let run = NuRandC {
            c_last,
            c_id: rng.random_range(0..=A_C_ID),
            ol_i_id: rng.random_range(0..=A_OL_I_ID),
        };
        (load, run)
    }
}

/// Clause 2.1.6.1's rule for C_LAST's load and run constants.
pub fn c_last_delta_is_valid(load: u32, run: u32) -> bool {
    let delta = load.abs_diff(run);
    (65..=119).contains(&delta) && delta != 96 && delta != 112
}

/// NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x.
pub fn nurand(rng: &mut ChaCha8Rng, a: u32, x: u32, y: u32, c: u32) -> u32 {
    debug_assert!(x <= y);
    let r = rng.random_range(0..=a) | rng.random_range(x..=y);
    (r + c) % (y - x + 1) + x
}

/// The characters of a-strings. The specification asks for a character set of at least 128
/// characters; letters and digits keep every value printable and free of the field separator.
const ALPHANUMERIC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// A random a-string of a length uniform in `min..=max`.
pub fn a_string(rng: &mut ChaCha8Rng, min: usize, max: usize) -> String {
    let len = rng.random_range(min..=max);
    (0..len)
        .map(|_| char::from(ALPHANUMERIC[rng.random_range(0..ALPHANUMERIC.len())]))
        .collect()
}

/// A random n-string of `len` digits.
pub fn n_string(rng: &mut ChaCha8Rng, len: usize) -> String {
    (0..len)
        .map(|_| char::from(b'0' + rng.random_range(0..10u8)))
        .collect()
}

/// A zip code: four random digits and "11111" (Clause 4.3.2.7).
pub fn zip(rng: &mut ChaCha8Rng) -> String {
    n_string(rng, 4) + "11111"
}

/// The marker 10% of I_DATA and S_DATA values hold (Clause 4.3.3.1), which New-Order's
/// brand-generic column looks for.
pub const ORIGINAL: &str = "ORIGINAL";

/// I_DATA or S_DATA: an a-string of `min..=max` characters (`min` >= 8) that holds "ORIGINAL" at
/// a random position in 10% of the rows.
pub fn data_with_original(rng: &mut ChaCha8Rng, min: usize, max: usize) -> String {
    let mut data = a_string(rng, min, max);
    if rng.random_range(0..10) == 0 {
        let at = rng.random_range(0..=data.len() - ORIGINAL.len());
        data.replace_range(at..at + ORIGINAL.len(), ORIGINAL);
    }
    data
}

/// A generator for one row (or one stream of rows), independent of every other: population
/// batches regenerate exactly the rows another batch derived data from (a district's customer
/// names for its last-name index, say) by seeding from the same identifiers.
pub fn stream(purpose: u64, ids: &[u64]) -> ChaCha8Rng {
    // splitmix64 over the identifiers: different tuples give unrelated seeds.
    let mut h = purpose.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for id in ids {
        h = (h ^ id).wrapping_add(0x9e37_79b9_7f4a_7c15);
        h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^= h >> 31;
    }
    ChaCha8Rng::seed_from_u64(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_names_are_three_syllables() {
        assert_eq!(last_name(0), "BARBARBAR");
        assert_eq!(last_name(371), "PRICALLYOUGHT");
        assert_eq!(last_name(999), "EINGEINGEING");
        assert_eq!(last_name(40), "BARPRESBAR");
    }

    #[test]
    fn nurand_stays_in_range_and_skews() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut counts = vec![0u32; 3001];
        for _ in 0..60_000 {
            let v = nurand(&mut rng, A_C_ID, 1, 3000, 17);
            assert!((1..=3000).contains(&v));
            counts[v as usize] += 1;
        }
        // Non-uniform: the most popular value is drawn far more often than the mean of 20.
        assert!(*counts.iter().max().unwrap() > 60);
        // Tiny ranges (scaled-down databases) work too.
        for _ in 0..100 {
            assert!((0..=4).contains(&nurand(&mut rng, A_C_LAST, 0, 4, 200)));
        }
    }

    #[test]
    fn run_constants_obey_the_c_last_delta_rule() {
        for seed in 0..200 {
            let (load, run) = NuRandC::draw(&mut ChaCha8Rng::seed_from_u64(seed));
            assert!(
                c_last_delta_is_valid(load.c_last, run.c_last),
                "{load:?} {run:?}"
            );
            assert!(run.c_last <= A_C_LAST && run.c_id <= A_C_ID && run.ol_i_id <= A_OL_I_ID);
        }
        assert!(!c_last_delta_is_valid(0, 96));
        assert!(!c_last_delta_is_valid(200, 88));
        assert!(c_last_delta_is_valid(0, 65));
        assert!(!c_last_delta_is_valid(0, 120));
    }

    #[test]
    fn strings_have_the_asked_shape() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let mut originals = 0;
        for _ in 0..2000 {
            let s = a_string(&mut rng, 10, 20);
            assert!((10..=20).contains(&s.len()));
            assert!(s.bytes().all(|b| b.is_ascii_alphanumeric()));
            let d = data_with_original(&mut rng, 8, 16);
            assert!((8..=16).contains(&d.len()));
            originals += usize::from(d.contains(ORIGINAL));
        }
        assert!((120..=280).contains(&originals), "{originals}");
        let z = zip(&mut rng);
        assert_eq!(z.len(), 9);
        assert!(z.ends_with("11111") && z.bytes().all(|b| b.is_ascii_digit()));
    }

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let a: u64 = stream(1, &[2, 3]).random();
        assert_eq!(a, stream(1, &[2, 3]).random::<u64>());
        assert_ne!(a, stream(1, &[3, 2]).random::<u64>());
        assert_ne!(a, stream(2, &[2, 3]).random::<u64>());
    }
}
