//! `tpcc`: the TPC-C benchmark (TPC Benchmark C, Standard Specification, revision 5.11) over
//! augur's key-value interface.
//!
//! # Data
//!
//! The nine tables of Clause 1.3 are rows under keys whose shard tag is the warehouse, so every
//! row of warehouse `w` lives in partition `w mod partitions` and warehouses spread round-robin
//! over the partitions; [`schema`] gives the key layout and the row encodings. Without scans or
//! secondary indexes, the lookups the transactions need are explicit rows kept up to date by the
//! transactions themselves: D_NEXT_O_ID in DISTRICT; per customer, the O_ID of its most recent
//! order (Order-Status); per district, the lowest undelivered NO_O_ID (Delivery); per district and
//! last name, the C_IDs sorted by C_FIRST (Payment and Order-Status by name). ORDER-LINE rows are
//! keyed by OL_NUMBER and their count is O_OL_CNT. ITEM, read-only, is copied into every
//! warehouse's shard (loaded per warehouse), so New-Order reads items where its warehouse lives.
//!
//! [`Workload::load`] populates the database as Clause 4.3.3.1 says ([`load`]): per warehouse,
//! 100,000 ITEM and STOCK rows, 10 districts of 3,000 customers (with C_LAST from the syllables
//! for C_IDs 1..=1000 and NURand(255,0,999) beyond) and one HISTORY row each, 3,000 orders per
//! district for a random permutation of the customers, 5..=15 lines each, the last 900
//! undelivered and in NEW-ORDER. Each load procedure writes one bounded batch (at most
//! [`load::MAX_BATCH`] keys) and generates its rows when it runs, from generators seeded by the
//! rows' identifiers, so the batches need no memory up front and agree with each other. A
//! full-size warehouse is 638,948 rows written by 4,241 load transactions.
//!
//! # Transactions
//!
//! The five transactions of Clauses 2.4–2.8 ([`txns`]), named `new-order`, `payment`,
//! `order-status`, `delivery` and `stock-level`, with the inputs the clauses prescribe: NURand
//! customers and items with the run-time constants C of Clause 2.1.6 (C_LAST's differing from the
//! load's as 2.1.6.1 requires), 5..=15 lines, a rollback of 1% of New-Orders through an unused
//! item number on the last line, a remote supply warehouse for `remote_new_order` (1%) of lines
//! and a remote customer for `remote_payment` (15%) of Payments when there are several
//! warehouses, 60% of Payment and Order-Status customers chosen by last name (the one at position
//! ⌈n/2⌉ by C_FIRST). Delivery delivers one order of each of the 10 districts in *one* transaction:
//! Clause 2.7.2 lets it be queued and run deferred, and 2.7.4 lets each district be its own
//! transaction, but a database interface without a queue runs the business transaction at once.
//! Stock-Level counts the distinct items of the district's last 20 orders whose stock is under a
//! threshold drawn from 10..=20. Each transaction also ships as a one-shot call of workload
//! `tpcc` under its name, carrying all its inputs.
//!
//! # Mixes
//!
//! `preset` sets the weights of new-order / payment / order-status / delivery / stock-level:
//!
//! | preset       | NO | P  | OS | D | SL | |
//! |--------------|----|----|----|---|----|-|
//! | `spec`       | 45 | 43 |  4 | 4 |  4 | Clause 5.2.3's minimum shares, New-Order the rest |
//! | `str-a`      |  5 | 83 | 12 | 0 |  0 | STR's TPC-C A |
//! | `str-b`      | 45 | 43 | 12 | 0 |  0 | STR's TPC-C B |
//! | `str-c`      |  5 | 43 | 52 | 0 |  0 | STR's TPC-C C |
//! | `sparkle-U`  | (U−4)/2 | (U−4)/2 | (100−U)/2 | 4 | (100−U)/2 | U = 10, 50, 90 |
//!
//! `sparkle-U` makes U% of transactions updates: Delivery keeps its 4%, New-Order and Payment
//! split the remaining U − 4 equally; the read-only 100 − U% split equally between Order-Status and
//! Stock-Level. So `sparkle-10` is 3/3/45/4/45, `sparkle-50` 23/23/25/4/25, `sparkle-90`
//! 43/43/5/4/5. Five comma-separated weights in that order give any other mix.
//!
//! # Warehouses of a client
//!
//! TPC-C's terminals each keep one home warehouse (and Stock-Level one district). Here each
//! transaction draws its home warehouse when it is generated, unless `fixed_home=on`: then each
//! client keeps one, the client's rank among its node's clients choosing among the node's
//! warehouses in turn, so clients of one node have distinct home warehouses while there are no
//! more of them than warehouses (Sparkle's conflict-free TPC-C, §5.3, has concurrent requests
//! on disjoint warehouses). The warehouses drawn from, or chosen among: with `home_warehouse=local`
//! uniformly among the warehouses whose partition the client's coordinator replicates (all of
//! them if it replicates none), with `master` among those whose partition it is the master of (as
//! `local` if it masters none), with `uniform` among all warehouses. `master` makes Payment's
//! contention on the warehouse and district rows local only, as STR §8.2 describes it; with
//! `local` every replica's clients write the same rows. Stock-Level draws its district
//! uniformly; `stock_level_districts` > 1 makes it scan that many consecutive districts, 20
//! orders each, and count the distinct low-stock items over all of them (each against its own
//! warehouse's stock): past district 10 the scan goes on in the next warehouse (wrapping after
//! the last), so up to 20 districts need two warehouses.
//!
//! # Audit
//!
//! [`Workload::audit`] checks the consistency conditions of Clause 3.3.2.1–3.3.2.10 and 3.3.2.12
//! in one read-only transaction ([`audit`]); 3.3.2.11 holds only for the initial population and is
//! left out.
//!
//! # Settings and deviations
//!
//! | setting                  | default | |
//! |--------------------------|---------|-|
//! | `warehouses`             | 1       | W |
//! | `preset`                 | `spec`  | the mix, above |
//! | `stock_level_districts`  | 1       | districts one Stock-Level scans (1 is the spec; ≤ 20) |
//! | `remote_new_order`       | 0.01    | share of New-Order lines from another warehouse |
//! | `remote_payment`         | 0.15    | share of Payments for another warehouse's customer |
//! | `home_warehouse`         | `local` | `local`, `master` or `uniform`, above |
//! | `fixed_home`             | `off`   | `on`: each client keeps one home warehouse, above |
//! | `keying_and_think_time`  | `off`   | `on` makes [`Tpcc::pause`] return Clause 5.2.5's times |
//! | `data_size`              | `spec`  | `compact` shortens the filler columns |
//! | `customers_per_district` | 3000    | scales the database down (1..=3000) |
//! | `items`                  | 100000  | scales the database down (1..=100000) |
//!
//! Anything but the defaults of the rates, `stock_level_districts`, `data_size`, the mix and the
//! scale is a deviation from the specification, and [`Workload::settings`] lists every deviation
//! in force under `deviations`, together with the fixed ones:
//!
//! * Dates (C_SINCE, H_DATE, O_ENTRY_D, OL_DELIVERY_D) are a logical clock shared by the
//!   workload's clients, 1 for the population and counting up from 2 as transactions are
//!   generated: procedures have no clock, and wall time would make simulations irreproducible.
//! * Home warehouses (unless `fixed_home=on`) and Stock-Level districts are drawn per
//!   transaction (above).
//! * a-strings are drawn from the 62 letters and digits (Clause 4.3.2.2 asks for 128 characters).
//! * No keying or think time by default: the closed loop runs transactions back to back (or with
//!   its own `--think-ms`). With `keying_and_think_time=on` the closed loop sleeps
//!   [`Tpcc::pause`] (keying plus think time) before each transaction; the open loop (`--rate`)
//!   paces by its arrival rate instead.
//! * `data_size=compact` draws C_DATA from 30..=50 characters (and truncates Payment's at 50, not
//!   500), S_DIST_01..10 and OL_DIST_INFO as 4 characters (not 24), I_DATA and S_DATA from 8..=16
//!   (not 26..=50).
//! * With fewer customers, the last 30% of each district's orders start undelivered (900 of
//!   3000), last names run over 0..min(999, customers − 1) for both loading and lookups, C_IDs
//!   are NURand(1023, 1, customers) and items NURand(8191, 1, items); D_YTD and W_YTD start at
//!   the sums of the HISTORY rows, as the full-size 30,000.00 and 300,000.00 do.

pub mod audit;
pub mod load;
pub mod random;
pub mod schema;
pub mod txns;

#[cfg(test)]
mod tests;

pub(crate) use txns::instantiate;

use crate::bad_value as bad;
use crate::reject_unknown;
use crate::{Audit, Home, Workload, WorkloadError, parse};
use augur_client::Procedure;
use augur_types::{NodeId, PartitionId, Placement};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use random::NuRandC;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Settings accepted through `--set`.
pub const SETTINGS: &[&str] = &[
    "warehouses",
    "preset",
    "stock_level_districts",
    "remote_new_order",
    "remote_payment",
    "home_warehouse",
    "fixed_home",
    "keying_and_think_time",
    "data_size",
    "customers_per_district",
    "items",
];

/// The most warehouses (the audit reads every row of every warehouse).
pub const MAX_WAREHOUSES: u32 = 100_000;

/// The most districts one Stock-Level may scan: DST's sweep (§5.1, Fig. 10) ends at 20, two
/// warehouses' worth.
pub const MAX_STOCK_LEVEL_DISTRICTS: u8 = 20;
/// Customers per district and items at full scale (Clause 4.3.3.1).
pub const SPEC_CUSTOMERS: u16 = 3000;
pub const SPEC_ITEMS: u32 = 100_000;
/// The date of every row the population writes.
pub const LOAD_DATE: u64 = 1;

/// The five transaction types, in the order weights are given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    NewOrder,
    Payment,
    OrderStatus,
    Delivery,
    StockLevel,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::NewOrder,
        Kind::Payment,
        Kind::OrderStatus,
        Kind::Delivery,
        Kind::StockLevel,
    ];

    /// The procedure name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::NewOrder => "new-order",
            Kind::Payment => "payment",
            Kind::OrderStatus => "order-status",
            Kind::Delivery => "delivery",
            Kind::StockLevel => "stock-level",
        }
    }

    pub fn read_only(self) -> bool {
        matches!(self, Kind::OrderStatus | Kind::StockLevel)
    }

    /// Clause 5.2.5.7's minimum keying time and mean think time, in seconds.
    pub fn keying_and_mean_think_s(self) -> (f64, f64) {
        match self {
            Kind::NewOrder => (18.0, 12.0),
            Kind::Payment => (3.0, 12.0),
            Kind::OrderStatus => (2.0, 10.0),
            Kind::Delivery => (2.0, 5.0),
            Kind::StockLevel => (2.0, 5.0),
        }
    }

    fn of_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// The weights of the named presets, in [`Kind::ALL`] order.
pub fn preset_weights(preset: &str) -> Option<[u32; 5]> {
    let sparkle = |update: u32| {
        let (rw, ro) = ((update - 4) / 2, (100 - update) / 2);
        [rw, rw, ro, 4, ro]
    };
    Some(match preset {
        "spec" => [45, 43, 4, 4, 4],
        "str-a" => [5, 83, 12, 0, 0],
        "str-b" => [45, 43, 12, 0, 0],
        "str-c" => [5, 43, 52, 0, 0],
        "sparkle-10" => sparkle(10),
        "sparkle-50" => sparkle(50),
        "sparkle-90" => sparkle(90),
        _ => return None,
    })
}

const PRESETS: &[&str] = &[
    "spec",
    "str-a",
    "str-b",
    "str-c",
    "sparkle-10",
    "sparkle-50",
    "sparkle-90",
];

/// How long the filler columns are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataSize {
    Spec,
    Compact,
}

impl DataSize {
    /// C_DATA's length at load.
    pub fn c_data(self) -> (usize, usize) {
        match self {
            DataSize::Spec => (300, 500),
            DataSize::Compact => (30, 50),
        }
    }

    /// The most characters Payment leaves in a bad-credit customer's C_DATA.
    pub fn c_data_cap(self) -> usize {
        self.c_data().1
    }

    /// The length of S_DIST_01..10 and of the initial orders' OL_DIST_INFO.
    pub fn dist_info(self) -> usize {
        match self {
            DataSize::Spec => 24,
            DataSize::Compact => 4,
        }
    }

    /// The length of I_DATA and S_DATA (at least 8, for "ORIGINAL").
    pub fn item_data(self) -> (usize, usize) {
        match self {
            DataSize::Spec => (26, 50),
            DataSize::Compact => (8, 16),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub warehouses: u32,
    /// The preset as given (a name, or weights).
    pub preset: String,
    /// The weights in force, in [`Kind::ALL`] order.
    pub weights: [u32; 5],
    pub stock_level_districts: u8,
    pub remote_new_order: f64,
    pub remote_payment: f64,
    pub home_warehouse: Home,
    /// Each client keeps one home warehouse ([`Workload::next_for`]).
    pub fixed_home: bool,
    pub keying_and_think_time: bool,
    pub data_size: DataSize,
    pub customers_per_district: u16,
    pub items: u32,
}

fn parse_preset(value: &str) -> Result<[u32; 5], WorkloadError> {
    if let Some(weights) = preset_weights(value) {
        return Ok(weights);
    }
    let parts: Vec<&str> = value.split(',').collect();
    let usage = || {
        format!(
            "give a preset ({}) or five weights for new-order,payment,order-status,delivery,\
             stock-level",
            PRESETS.join(", ")
        )
    };
    if parts.len() != 5 {
        return Err(bad("preset", value, usage()));
    }
    let mut weights = [0u32; 5];
    for (w, part) in weights.iter_mut().zip(parts) {
        *w = part
            .trim()
            .parse()
            .map_err(|_| bad("preset", value, usage()))?;
    }
    if weights.iter().all(|w| *w == 0) {
        return Err(bad("preset", value, "at least one weight must be positive"));
    }
    Ok(weights)
}

fn parse_switch(key: &str, value: &str) -> Result<bool, WorkloadError> {
    match value {
        "on" | "true" => Ok(true),
        "off" | "false" => Ok(false),
        other => Err(bad(key, other, "must be on or off")),
    }
}

impl Settings {
    pub fn from_given(given: &BTreeMap<String, String>) -> Result<Settings, WorkloadError> {
        reject_unknown("tpcc", SETTINGS, given)?;
        let get = |key: &str, default: &str| given.get(key).cloned().unwrap_or(default.into());
        let preset = get("preset", "spec");
        let weights = parse_preset(&preset)?;
        let home_warehouse = Home::parse("home_warehouse", &get("home_warehouse", "local"))?;
        let data_size = match get("data_size", "spec").as_str() {
            "spec" => DataSize::Spec,
            "compact" => DataSize::Compact,
            other => return Err(bad("data_size", other, "must be spec or compact")),
        };
        let settings = Settings {
            warehouses: parse("warehouses", &get("warehouses", "1"))?,
            preset,
            weights,
            stock_level_districts: parse(
                "stock_level_districts",
                &get("stock_level_districts", "1"),
            )?,
            remote_new_order: parse("remote_new_order", &get("remote_new_order", "0.01"))?,
            remote_payment: parse("remote_payment", &get("remote_payment", "0.15"))?,
            home_warehouse,
            fixed_home: parse_switch("fixed_home", &get("fixed_home", "off"))?,
            keying_and_think_time: parse_switch(
                "keying_and_think_time",
                &get("keying_and_think_time", "off"),
            )?,
            data_size,
            customers_per_district: parse(
                "customers_per_district",
                &get("customers_per_district", "3000"),
            )?,
            items: parse("items", &get("items", "100000"))?,
        };
        if !(1..=MAX_WAREHOUSES).contains(&settings.warehouses) {
            let why = format!("must be within 1..={MAX_WAREHOUSES}");
            return Err(bad("warehouses", settings.warehouses, why));
        }
        let districts = u32::from(schema::DISTRICTS) * settings.warehouses;
        let most = u32::from(MAX_STOCK_LEVEL_DISTRICTS).min(districts);
        if !(1..=most).contains(&u32::from(settings.stock_level_districts)) {
            let why = format!(
                "must be within 1..={most} (at most {MAX_STOCK_LEVEL_DISTRICTS}, and {} districts per warehouse)",
                schema::DISTRICTS
            );
            return Err(bad(
                "stock_level_districts",
                settings.stock_level_districts,
                why,
            ));
        }
        for (key, rate) in [
            ("remote_new_order", settings.remote_new_order),
            ("remote_payment", settings.remote_payment),
        ] {
            if !(0.0..=1.0).contains(&rate) {
                return Err(bad(key, rate, "must be within 0..=1"));
            }
        }
        if !(1..=SPEC_CUSTOMERS).contains(&settings.customers_per_district) {
            let why = format!("must be within 1..={SPEC_CUSTOMERS}");
            return Err(bad(
                "customers_per_district",
                settings.customers_per_district,
                why,
            ));
        }
        if !(1..=SPEC_ITEMS).contains(&settings.items) {
            let why = format!("must be within 1..={SPEC_ITEMS}");
            return Err(bad("items", settings.items, why));
        }
        Ok(settings)
    }

    /// The deviations from the specification these settings make, fixed ones included.
    pub fn deviations(&self) -> Vec<String> {
        let drawn = if self.fixed_home {
            "Stock-Level district drawn per transaction, not fixed per terminal"
        } else {
            "home warehouse and Stock-Level district drawn per transaction, not fixed per terminal"
        };
        let mut out = vec![
            "dates are a logical clock (1 = population), not wall-clock time".to_string(),
            drawn.to_string(),
            "a-strings use 62 letters and digits".to_string(),
        ];
        if self.keying_and_think_time {
            out.push(
                "keying and think times are slept by the closed loop before each transaction, \
                 not around it"
                    .to_string(),
            );
        } else {
            out.push("no keying or think time".to_string());
        }
        if self.preset != "spec" {
            out.push(format!(
                "mix {} (new-order/payment/order-status/delivery/stock-level {:?}), not Clause \
                 5.2.3's",
                self.preset, self.weights
            ));
        }
        if self.remote_new_order != 0.01 {
            out.push(format!(
                "remote supply warehouse for {} of New-Order lines (spec 0.01)",
                self.remote_new_order
            ));
        }
        if self.remote_payment != 0.15 {
            out.push(format!(
                "remote customer for {} of Payments (spec 0.15)",
                self.remote_payment
            ));
        }
        if self.stock_level_districts != 1 {
            out.push(format!(
                "Stock-Level scans {} districts (spec 1)",
                self.stock_level_districts
            ));
        }
        if self.data_size == DataSize::Compact {
            out.push("compact filler columns (C_DATA, S_DIST_xx, I_DATA, S_DATA)".to_string());
        }
        if self.customers_per_district != SPEC_CUSTOMERS {
            out.push(format!(
                "{} customers and initial orders per district (spec 3000)",
                self.customers_per_district
            ));
        }
        if self.items != SPEC_ITEMS {
            out.push(format!("{} items (spec 100000)", self.items));
        }
        out
    }
}

/// The seed the NURand constants are drawn from: fixed, so every run (and the load and the audit
/// of one run) agree, and chosen independently of any run's own seed as Clause 2.1.6.1 asks.
const CONSTANTS_SEED: u64 = 0x7470_6363;

/// What the load, the transactions and the audit share.
#[derive(Clone, Debug)]
pub struct Config {
    pub settings: Settings,
    /// NURand's C for the population.
    pub load_c: NuRandC,
    /// NURand's C for the transactions' inputs.
    pub run_c: NuRandC,
}

impl Config {
    pub fn new(settings: Settings) -> Config {
        let (load_c, run_c) = NuRandC::draw(&mut ChaCha8Rng::seed_from_u64(CONSTANTS_SEED));
        Config {
            settings,
            load_c,
            run_c,
        }
    }

    pub fn warehouses(&self) -> u32 {
        self.settings.warehouses
    }

    pub fn customers(&self) -> u16 {
        self.settings.customers_per_district
    }

    pub fn items(&self) -> u32 {
        self.settings.items
    }

    /// The largest last-name number in use: the first 1000 customers of a district take the names
    /// 0..=999 in order, so with fewer customers only their names exist.
    pub fn max_name(&self) -> u16 {
        (self.customers() - 1).min(999)
    }

    /// The first O_ID of the initial population still undelivered: 2101 of 3000, the last 30%.
    pub fn first_new_order(&self) -> u32 {
        let c = u32::from(self.customers());
        c - c * 3 / 10 + 1
    }
}

pub struct Tpcc {
    config: Arc<Config>,
    /// The sum of the weights.
    total_weight: u32,
    /// Per node: the warehouses its clients draw home warehouses from.
    home_warehouses: Vec<Vec<u32>>,
    all_warehouses: Vec<u32>,
    /// The logical clock dates are drawn from.
    clock: Arc<AtomicU64>,
}

impl Tpcc {
    pub fn new(
        given: &BTreeMap<String, String>,
        placement: Arc<Placement>,
    ) -> Result<Tpcc, WorkloadError> {
        let settings = Settings::from_given(given)?;
        let all_warehouses: Vec<u32> = (1..=settings.warehouses).collect();
        let partitions = placement.partition_count().max(1) as u32;
        let home_warehouses = placement
            .nodes()
            .map(|node| {
                let homes = settings.home_warehouse.partitions(&placement, node);
                let chosen: Vec<u32> = all_warehouses
                    .iter()
                    .copied()
                    .filter(|w| homes.contains(&PartitionId(w % partitions)))
                    .collect();
                if chosen.is_empty() {
                    all_warehouses.clone()
                } else {
                    chosen
                }
            })
            .collect();
        let total_weight = settings.weights.iter().sum();
        Ok(Tpcc {
            config: Arc::new(Config::new(settings)),
            total_weight,
            home_warehouses,
            all_warehouses,
            clock: Arc::new(AtomicU64::new(LOAD_DATE + 1)),
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The next transaction for a client of `home`: its home warehouse the `rank`th of
    /// `home`'s in turn (`fixed_home`), or drawn.
    fn draw(&self, home: NodeId, rank: Option<usize>, rng: &mut ChaCha8Rng) -> Box<dyn Procedure> {
        let kind = self.draw_kind(rng);
        let homes = self.warehouses_of(home);
        let w = match rank {
            Some(rank) => homes[rank % homes.len()],
            None => homes[rng.random_range(0..homes.len())],
        };
        let date = self.clock.fetch_add(1, Ordering::Relaxed);
        txns::draw(&self.config, kind, w, date, rng)
    }

    /// The warehouses a client of `home` draws its home warehouse from.
    pub fn warehouses_of(&self, home: NodeId) -> &[u32] {
        self.home_warehouses
            .get(home.0 as usize)
            .unwrap_or(&self.all_warehouses)
    }

    fn draw_kind(&self, rng: &mut ChaCha8Rng) -> Kind {
        let mut x = rng.random_range(0..self.total_weight);
        for (kind, w) in Kind::ALL.into_iter().zip(self.config.settings.weights) {
            if x < w {
                return kind;
            }
            x -= w;
        }
        unreachable!("the weights sum to total_weight")
    }

    /// The pause a terminal would take around a transaction of type `procedure` (its name), or
    /// `None` with `keying_and_think_time=off`: Clause 5.2.5.7's minimum keying time plus a think
    /// time drawn from the negative exponential distribution of the clause's mean, truncated at
    /// ten times the mean (Clause 5.2.5.4). The keying time precedes a transaction and the think
    /// time follows it; a closed loop may sleep their sum before each transaction. Procedures
    /// cannot sleep, so the closed loop applies it.
    pub fn pause(&self, procedure: &str, rng: &mut ChaCha8Rng) -> Option<Duration> {
        if !self.config.settings.keying_and_think_time {
            return None;
        }
        let (keying, mean) = Kind::of_name(procedure)?.keying_and_mean_think_s();
        let r: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
        let think = (-r.ln() * mean).min(10.0 * mean);
        Some(Duration::from_secs_f64(keying + think))
    }

    /// [`Tpcc::pause`] in milliseconds.
    pub fn think_time_ms(&self, procedure: &str, rng: &mut ChaCha8Rng) -> Option<f64> {
        self.pause(procedure, rng).map(|d| d.as_secs_f64() * 1000.0)
    }
}

impl Workload for Tpcc {
    fn name(&self) -> &'static str {
        "tpcc"
    }

    fn pause(&self, procedure: &str, rng: &mut ChaCha8Rng) -> Option<Duration> {
        Tpcc::pause(self, procedure, rng)
    }

    fn next(&self, home: NodeId, rng: &mut ChaCha8Rng) -> Box<dyn Procedure> {
        self.draw(home, None, rng)
    }

    fn next_for(&self, home: NodeId, rank: usize, rng: &mut ChaCha8Rng) -> Box<dyn Procedure> {
        self.draw(home, self.config.settings.fixed_home.then_some(rank), rng)
    }

    fn settings(&self) -> serde_json::Value {
        let c = &self.config;
        let s = &c.settings;
        let weights: serde_json::Map<String, serde_json::Value> = Kind::ALL
            .iter()
            .zip(s.weights)
            .map(|(k, w)| (k.name().to_string(), w.into()))
            .collect();
        serde_json::json!({
            "warehouses": s.warehouses,
            "preset": s.preset,
            "weights": weights,
            "stock_level_districts": s.stock_level_districts,
            "remote_new_order": s.remote_new_order,
            "remote_payment": s.remote_payment,
            "home_warehouse": s.home_warehouse.name(),
            "fixed_home": if s.fixed_home { "on" } else { "off" },
            "keying_and_think_time": if s.keying_and_think_time { "on" } else { "off" },
            "data_size": match s.data_size {
                DataSize::Spec => "spec",
                DataSize::Compact => "compact",
            },
            "customers_per_district": s.customers_per_district,
            "items": s.items,
            "nurand_c": { "load": c.load_c, "run": c.run_c },
            "delivery": "10 districts in one transaction",
            "deviations": s.deviations(),
        })
    }

    fn load(&self) -> Vec<Box<dyn Procedure>> {
        load::batches(&self.config)
    }

    fn audit(&self) -> Option<Box<dyn Audit>> {
        Some(Box::new(audit::TpccAudit::new(Arc::clone(&self.config))))
    }
}
