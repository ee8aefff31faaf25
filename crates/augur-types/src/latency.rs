//! Latency profiles: the data centres of a deployment and the round-trip times between them.
//!
//! `ec2-9dc` holds the nine Amazon EC2 regions of STR §8 in the paper's replication order. Its
//! inter-region round-trip times are median figures from the public AWS inter-region latency
//! matrix published at cloudping.co, rounded to whole milliseconds. They are inputs to an
//! experiment, not measurements of this machine, and can be replaced by a custom matrix.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Named profiles accepted by `--latency`.
pub const PROFILE_NAMES: &[&str] = &["lan", "3dc", "ec2-9dc"];

/// The DCs of a profile and the round-trip times between them (and within each).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencyProfile {
    pub name: String,
    pub dcs: Vec<String>,
    /// Round-trip time in microseconds between DC `i` and DC `j`; the diagonal is the RTT between
    /// two nodes of one DC.
    pub rtt_us: Vec<Vec<u64>>,
}

/// Nine EC2 regions in STR §8's replication order.
const EC2_DCS: [&str; 9] = ["IE", "SU", "SY", "OR", "SG", "CA", "FR", "TY", "VA"];

/// Median RTT in ms (cloudping.co, AWS inter-region matrix), in `EC2_DCS` order.
const EC2_RTT_MS: [[u64; 9]; 9] = [
    //IE  SU   SY   OR   SG   CA   FR   TY   VA
    [0, 235, 255, 120, 178, 137, 25, 205, 68],  // IE
    [235, 0, 138, 124, 73, 134, 230, 33, 175],  // SU
    [255, 138, 0, 139, 92, 138, 250, 105, 198], // SY
    [120, 124, 139, 0, 162, 21, 140, 97, 67],   // OR
    [178, 73, 92, 162, 0, 170, 160, 69, 215],   // SG
    [137, 134, 138, 21, 170, 0, 147, 107, 62],  // CA
    [25, 230, 250, 140, 160, 147, 0, 225, 90],  // FR
    [205, 33, 105, 97, 69, 107, 225, 0, 145],   // TY
    [68, 175, 198, 67, 215, 62, 90, 145, 0],    // VA
];

/// Round-trip time between two nodes of one data centre.
const INTRA_DC_RTT_US: u64 = 200;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LatencyError {
    #[error("unknown latency profile '{0}'; valid profiles: {valid}", valid = PROFILE_NAMES.join(", "))]
    UnknownProfile(String),
    #[error("latency profile '{profile}' has {available} data centres, {requested} requested")]
    TooManyDcs {
        profile: String,
        available: usize,
        requested: usize,
    },
}

impl LatencyProfile {
    /// The named profile, with all of its data centres.
    pub fn named(name: &str) -> Result<LatencyProfile, LatencyError> {
        match name {
            "lan" => Ok(LatencyProfile {
                name: name.into(),
                dcs: vec!["dc0".into()],
                rtt_us: vec![vec![INTRA_DC_RTT_US]],
            }),
            // Three regions of the EC2 matrix: North Virginia, Oregon, Ireland.
            "3dc" => Ok(Self::ec2_subset(name, &[8, 3, 0])),
            "ec2-9dc" => Ok(Self::ec2_subset(name, &[0, 1, 2, 3, 4, 5, 6, 7, 8])),
            other => Err(LatencyError::UnknownProfile(other.into())),
        }
    }

    fn ec2_subset(name: &str, regions: &[usize]) -> LatencyProfile {
        let rtt_us = regions
            .iter()
            .map(|&a| {
                regions
                    .iter()
                    .map(|&b| {
                        if a == b {
                            INTRA_DC_RTT_US
                        } else {
                            EC2_RTT_MS[a][b] * 1000
                        }
                    })
                    .collect()
            })
            .collect();
        LatencyProfile {
            name: name.into(),
            dcs: regions.iter().map(|&r| EC2_DCS[r].to_string()).collect(),
            rtt_us,
        }
    }

    /// The first `count` data centres of this profile.
    pub fn truncated(mut self, count: usize) -> Result<LatencyProfile, LatencyError> {
        if count == 0 || count > self.dcs.len() {
            return Err(LatencyError::TooManyDcs {
                profile: self.name.clone(),
                available: self.dcs.len(),
                requested: count,
            });
        }
        self.dcs.truncate(count);
        self.rtt_us.truncate(count);
        for row in &mut self.rtt_us {
            row.truncate(count);
        }
        Ok(self)
    }

    /// One-way delay between DCs `a` and `b`: half the round trip.
    pub fn one_way(&self, a: usize, b: usize) -> Duration {
        Duration::from_micros(self.rtt_us[a][b] / 2)
    }

    /// The longest round trip between two of the profile's DCs.
    pub fn longest_round_trip(&self) -> Duration {
        let longest = self.rtt_us.iter().flatten().copied().max().unwrap_or(0);
        Duration::from_micros(longest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ec2_matrix_is_symmetric() {
        for (a, row) in EC2_RTT_MS.iter().enumerate() {
            for (b, rtt) in row.iter().enumerate() {
                assert_eq!(*rtt, EC2_RTT_MS[b][a], "{} <-> {}", EC2_DCS[a], EC2_DCS[b]);
            }
        }
    }

    #[test]
    fn profiles_resolve_and_truncate() {
        let p = LatencyProfile::named("ec2-9dc").unwrap();
        assert_eq!(p.dcs.len(), 9);
        assert_eq!(p.one_way(0, 6), Duration::from_micros(12_500)); // IE-FR 25 ms RTT
        let three = LatencyProfile::named("3dc").unwrap();
        assert_eq!(three.dcs, vec!["VA", "OR", "IE"]);
        assert!(LatencyProfile::named("lan").unwrap().truncated(2).is_err());
        assert!(matches!(
            LatencyProfile::named("wan"),
            Err(LatencyError::UnknownProfile(_))
        ));
    }
}
