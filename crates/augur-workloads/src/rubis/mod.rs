//! `rubis`: RUBiS, the Rice University Bidding System (an auction site modelled on eBay), as STR
//! (§8.2) ports it to a key-value store.
//!
//! # Data
//!
//! RUBiS's tables — USERS, ITEMS and OLD_ITEMS, BIDS, COMMENTS, BUY_NOW, CATEGORIES, REGIONS and
//! the `ids` counters — become rows as [`schema`] lays out. STR's two modifications are followed:
//! (i) every table is partitioned horizontally across the shards (one per partition), so that each
//! holds an equal portion of each table: a row's shard is its id modulo the number of shards; (ii)
//! each shard has its own id counter per table, so an insertion that needs a unique id takes it
//! from its own shard rather than from one counter shared by all. New users and items are inserted
//! in the shard of the acting user, so RegisterUser and RegisterItem allocate ids locally; bids,
//! comments and purchases are inserted in the shard of the item, the receiving user and the buyer,
//! and numbered by the acting user's shard (the bidder, the commenter, the buyer), so that every
//! insertion takes its id locally and no counter is written from every node. Without scans, the
//! lookups the interactions need are explicit rows: per-shard category and region-and-category
//! indexes of the active items (bucketed lists), a nickname index for logins and uniqueness, each
//! user's selling and bidding lists (AboutMe), and child rows clustered under the row that counts
//! them (bids under their item, comments and purchases under their user).
//!
//! [`Workload::load`] generates a database shaped by the defaults of RUBiS's generator
//! (`rubis.properties`), scaled ([`load`]): users with a region, nickname `user<id>` and password
//! `password<id>`; old (closed) items then active items, each in a uniformly drawn category, sold
//! by a user of its own shard, 80% of them single units and the rest 1..=10 units, 40% with a
//! reserve price, 10% with a buy-now price, open for 1..=7 days; each item with a uniform
//! 0..=`bids_per_item` bids of increasing amounts from random users; and one comment per item,
//! from a random user to its seller. Load transactions write at most [`load::MAX_BATCH`] keys
//! each.
//!
//! # Interactions and the mix
//!
//! The 18 interactions of RUBiS that query the database are procedures named after them
//! ([`txns`]): read-only `browse-categories`, `search-items-in-category`, `browse-regions`,
//! `browse-categories-in-region`, `search-items-in-region`, `view-item`, `view-user-info`,
//! `view-bid-history`, `buy-now`, `put-bid`, `put-comment`, `select-category-to-sell-item`,
//! `about-me`, and read-write `register-user`, `register-item`, `store-bid`, `store-buy-now`,
//! `store-comment`. RUBiS's other states (home, register, browse, sell and sell-item forms, the
//! login forms) are static pages and issue no transaction. Each interaction also ships as a
//! one-shot call of workload `rubis` under its name, carrying all its inputs.
//!
//! augur does not walk RUBiS's sessions: each interaction is drawn independently from the
//! stationary distribution of the walk over RUBiS's default (bidding) transition table, with the
//! five read-write interactions scaled together to `update_fraction` (0.15 by default: RUBiS's
//! "15% read-write" bidding mix, STR's "15% update default workload"); [`mix`] gives the table,
//! the computation and the resulting shares:
//!
//! | interaction                   | stationary % of all states | weight % (update_fraction 0.15) |
//! |-------------------------------|-------:|------:|
//! | search-items-in-category      | 15.619 | 21.16 |
//! | view-item                     | 12.305 | 16.67 |
//! | browse-categories             |  7.605 | 10.30 |
//! | search-items-in-region        |  6.355 |  8.61 |
//! | put-bid                       |  4.977 |  6.74 |
//! | store-bid                     |  3.654 |  7.52 |
//! | about-me                      |  3.545 |  4.80 |
//! | browse-regions                |  3.151 |  4.27 |
//! | browse-categories-in-region   |  3.095 |  4.19 |
//! | view-user-info                |  2.336 |  3.16 |
//! | view-bid-history              |  1.456 |  1.97 |
//! | register-user                 |  1.401 |  2.88 |
//! | buy-now                       |  1.001 |  1.36 |
//! | store-buy-now                 |  0.983 |  2.02 |
//! | select-category-to-sell-item  |  0.841 |  1.14 |
//! | register-item                 |  0.812 |  1.67 |
//! | put-comment                   |  0.451 |  0.61 |
//! | store-comment                 |  0.443 |  0.91 |
//!
//! (The static pages make up the other 29.97% of the walk.) `update_fraction=matrix` keeps the
//! walk's own proportions, 10.41% read-write.
//!
//! Each interaction acts as one user: with `home_user=local`, a user of a shard the client's
//! coordinator replicates (all users if it replicates none), with `master` of the shard it is the
//! master of (as `local` if it masters none), with `uniform` any user. With `master` the rows a
//! node's users update (their own, and their shard's id counters) are written by that node
//! alone; with `local` by the clients of every replica. The items,
//! users, categories and regions it looks at are drawn uniformly from the population (RUBiS's
//! client takes them from the page it is on); search pages are drawn geometrically with the
//! search state's self-transition probability (its "next page" link).
//!
//! # Think time
//!
//! RUBiS's transition table gives every state a *transition waiting time*, the time the emulated
//! user spends on a page before the next click: 2 s after `Browse` and for the five read-write
//! interactions, 3 s for `BrowseCategories`, `BrowseRegions`, `BrowseCategoriesInRegion`,
//! `RegisterUser` and `SelectCategoryToSellItem`, 5 s for `BuyNow`, `PutBid`, `PutComment`, 7 s for
//! the searches, the views and `AboutMe`, 10 s for `Register` — STR's "default think time (from 2
//! to 10 seconds for different transactions)". With `think_time=on`, [`Rubis::pause`] returns the
//! interaction's waiting time; with `think_time=tpcw`, TPC-W's negative exponential think time
//! (mean 7 s, at most 70 s), which RUBiS's client uses instead when its
//! `workload_use_tpcw_think_time` option is set. The closed loop sleeps it before each
//! interaction (procedures cannot sleep); with `off` (the default) clients run back to back.
//!
//! # Audit
//!
//! [`Workload::audit`] checks in one read-only transaction ([`audit`]): every item's `nb_of_bids`
//! and `max_bid` agree with its bid rows; every user's `rating` and `nb_comments` with the comments
//! received, `nb_bought` with the purchases, and the population's items' quantities with their
//! purchases; every shard's id counters exceed (and are congruent with) every id allocated in the
//! shard, and ids are unique; the indexes agree with the tables; every row decodes.
//!
//! # Settings and deviations
//!
//! | setting           | default  | |
//! |-------------------|----------|-|
//! | `users`           | 100000   | RUBiS's default database has 1,000,000; scaled 1:10 |
//! | `items`           | 3300     | active items; RUBiS's ~33,000, scaled 1:10 |
//! | `old_items`       | 50000    | closed auctions; RUBiS's 500,000, scaled 1:10 |
//! | `categories`      | 20       | RUBiS's |
//! | `regions`         | 62       | RUBiS's |
//! | `bids_per_item`   | 20       | the most bids an item has at load (RUBiS's `database_max_bids_per_item`) |
//! | `update_fraction` | 0.15     | share of read-write interactions, or `matrix` |
//! | `think_time`      | `off`    | `on` (the table's times), `tpcw`, or `off` |
//! | `home_user`       | `local`  | `local`, `master` or `uniform`, above |
//!
//! [`Workload::settings`] lists every deviation in force under `deviations`: the fixed ones below,
//! and any setting off RUBiS's defaults (the 1:10 scale included).
//!
//! * Interactions are drawn independently from the stationary mix, not walked in sessions, and
//!   the static pages issue no transaction.
//! * Dates are a logical clock in milliseconds shared by the workload's clients: the population
//!   is at [`LOAD_DATE`] (60 days after the origin, so that closed auctions have past dates) and
//!   each generated interaction advances the clock by one, so no auction closes by time during a
//!   run (RUBiS's runs are 30 minutes against auctions of 1..=7 days).
//! * The acting user, and the users and items looked at, are drawn per interaction among the
//!   population's; users and items registered during the run are not drawn.
//! * Text columns are short (item descriptions 20..=60 characters, RUBiS's up to 8192; comments
//!   10..=50, RUBiS's up to 2048), category and region names are generated, and items spread
//!   uniformly over the categories (RUBiS's categories file gives each its own count).
//! * Searches list a page of 20 index entries in insertion order (RUBiS orders by end date) and
//!   show the open auctions among them instead of filling the page.
//! * AboutMe shows the most recent [`schema::LIST_CAP`] items a user sells and bid on.
//! * The population has one comment per item (to its seller) and no purchases.
//! * Closed auctions are never moved from ITEMS to OLD_ITEMS (RUBiS has no interaction that does).

pub mod audit;
pub mod load;
pub mod mix;
pub mod schema;
pub mod txns;

#[cfg(test)]
mod tests;

pub(crate) use txns::instantiate;

use crate::bad_value as bad;
use crate::reject_unknown;
use crate::{Audit, Home, Workload, WorkloadError, parse};
use augur_client::Procedure;
use augur_types::{NodeId, Placement};
use mix::Interaction;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use schema::Layout;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Settings accepted through `--set`.
pub const SETTINGS: &[&str] = &[
    "users",
    "items",
    "old_items",
    "categories",
    "regions",
    "bids_per_item",
    "update_fraction",
    "think_time",
    "home_user",
];

/// RUBiS's default database (`rubis.properties` and its categories and regions files).
pub const RUBIS_USERS: u32 = 1_000_000;
pub const RUBIS_ITEMS: u32 = 33_000;
pub const RUBIS_OLD_ITEMS: u32 = 500_000;
pub const RUBIS_CATEGORIES: u16 = 20;
pub const RUBIS_REGIONS: u16 = 62;
pub const RUBIS_MAX_BIDS: u32 = 20;
/// The read-write share of RUBiS's bidding mix.
pub const RUBIS_UPDATE_FRACTION: f64 = 0.15;

/// The most users and items of either kind (ids are `u32`, and the audit reads every row).
pub const MAX_ROWS: u32 = 10_000_000;
/// The most bids an item gets at load (one load transaction writes an item and its bids).
pub const MAX_BIDS_PER_ITEM: u32 = 100;

/// One day of the logical clock (milliseconds).
pub const DAY: u64 = 86_400_000;
/// The date of the population: 60 days after the clock's origin.
pub const LOAD_DATE: u64 = 60 * DAY;

/// Which think time [`Rubis::pause`] offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThinkTime {
    Off,
    /// The transition table's waiting time of the interaction.
    Table,
    /// TPC-W's: negative exponential, mean 7 s, at most 70 s.
    Tpcw,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub users: u32,
    pub items: u32,
    pub old_items: u32,
    pub categories: u16,
    pub regions: u16,
    pub bids_per_item: u32,
    /// `None`: the walk's own proportions (`matrix`).
    pub update_fraction: Option<f64>,
    pub think_time: ThinkTime,
    pub home_user: Home,
}

fn within<T: PartialOrd + std::fmt::Display + Copy>(
    key: &str,
    value: T,
    min: T,
    max: T,
) -> Result<T, WorkloadError> {
    if value < min || value > max {
        return Err(bad(key, value, format!("must be within {min}..={max}")));
    }
    Ok(value)
}

impl Settings {
    pub fn from_given(given: &BTreeMap<String, String>) -> Result<Settings, WorkloadError> {
        reject_unknown("rubis", SETTINGS, given)?;
        let get = |key: &str, default: &str| given.get(key).cloned().unwrap_or(default.into());
        let update_fraction = match get("update_fraction", "0.15").as_str() {
            "matrix" => None,
            other => Some(within(
                "update_fraction",
                parse::<f64>("update_fraction", other)?,
                0.0,
                1.0,
            )?),
        };
        let think_time = match get("think_time", "off").as_str() {
            "off" | "false" => ThinkTime::Off,
            "on" | "true" | "table" => ThinkTime::Table,
            "tpcw" => ThinkTime::Tpcw,
            other => return Err(bad("think_time", other, "must be off, on or tpcw")),
        };
        let home_user = Home::parse("home_user", &get("home_user", "local"))?;
        let num = |key: &str, default: &str| parse::<u32>(key, &get(key, default));
        let small = |key: &str, default: &str| parse::<u16>(key, &get(key, default));
        Ok(Settings {
            users: within("users", num("users", "100000")?, 1, MAX_ROWS)?,
            items: within("items", num("items", "3300")?, 1, MAX_ROWS)?,
            old_items: within("old_items", num("old_items", "50000")?, 0, MAX_ROWS)?,
            categories: within("categories", small("categories", "20")?, 1, 1000)?,
            regions: within("regions", small("regions", "62")?, 1, 1000)?,
            bids_per_item: within(
                "bids_per_item",
                num("bids_per_item", "20")?,
                0,
                MAX_BIDS_PER_ITEM,
            )?,
            update_fraction,
            think_time,
            home_user,
        })
    }

    /// The deviations from RUBiS (and STR's runs) these settings make, fixed ones included.
    pub fn deviations(&self) -> Vec<String> {
        let mut out = vec![
            "interactions drawn independently from the stationary distribution of the default \
             (bidding) transition table (each state's probabilities normalised), not walked in \
             sessions; static pages issue no transaction"
                .to_string(),
            "dates are a logical clock in milliseconds (one per interaction), so no auction \
             closes by time during a run"
                .to_string(),
            "acting users, users and items drawn per interaction among the population's"
                .to_string(),
            "short generated text columns; items spread uniformly over the categories".to_string(),
            "search pages show the open auctions among 20 index entries in insertion order"
                .to_string(),
            "the population has one comment per item (to its seller) and no purchases; closed \
             auctions stay in ITEMS"
                .to_string(),
            format!(
                "AboutMe lists the {} most recent items a user sells and bid on",
                schema::LIST_CAP
            ),
        ];
        match self.think_time {
            ThinkTime::Off => out.push("no think time".to_string()),
            ThinkTime::Table => out.push(
                "the table's think times, slept by the closed loop before each interaction"
                    .to_string(),
            ),
            ThinkTime::Tpcw => out.push(
                "TPC-W think times (RUBiS's option), slept by the closed loop before each \
                 interaction"
                    .to_string(),
            ),
        }
        match self.update_fraction {
            None => out.push(format!(
                "read-write share left at the walk's {:.4} (RUBiS's mix is 0.15)",
                mix::stationary_update_fraction()
            )),
            Some(f) if f != RUBIS_UPDATE_FRACTION => {
                out.push(format!("read-write share {f} (RUBiS's bidding mix 0.15)"))
            }
            Some(_) => {}
        }
        for (what, value, rubis) in [
            ("users", self.users, RUBIS_USERS),
            ("active items", self.items, RUBIS_ITEMS),
            ("old items", self.old_items, RUBIS_OLD_ITEMS),
            ("most bids per item", self.bids_per_item, RUBIS_MAX_BIDS),
        ] {
            if value != rubis {
                out.push(format!("{value} {what} (RUBiS {rubis})"));
            }
        }
        if self.categories != RUBIS_CATEGORIES {
            out.push(format!("{} categories (RUBiS 20)", self.categories));
        }
        if self.regions != RUBIS_REGIONS {
            out.push(format!("{} regions (RUBiS 62)", self.regions));
        }
        out
    }
}

/// What the load, the interactions and the audit share.
#[derive(Clone, Debug)]
pub struct Config {
    pub settings: Settings,
    pub layout: Layout,
}

impl Config {
    pub fn new(settings: Settings, shards: u32) -> Config {
        Config {
            settings,
            layout: Layout::new(shards),
        }
    }

    /// The config of an interaction rebuilt from a one-shot call: what its body reads (the
    /// layout, the numbers of categories and regions), the other settings at their defaults.
    pub(crate) fn shipped(shards: u32, categories: u16, regions: u16) -> Config {
        let defaults = Settings::from_given(&BTreeMap::new()).expect("the defaults are valid");
        let settings = Settings {
            categories,
            regions,
            ..defaults
        };
        Config::new(settings, shards)
    }

    pub fn shards(&self) -> u32 {
        self.layout.shards
    }

    pub fn users(&self) -> u32 {
        self.settings.users
    }

    /// Items of the population, old and active: ids `1..=total_items()`.
    pub fn total_items(&self) -> u32 {
        self.settings.old_items + self.settings.items
    }

    /// The first active item; old items are `1..first_active()`.
    pub fn first_active(&self) -> u32 {
        self.settings.old_items + 1
    }

    pub fn is_old(&self, item: u32) -> bool {
        item < self.first_active()
    }

    /// The first id shard `s` gives (the population's ids start at 1).
    pub fn first_in_shard(&self, s: u32) -> u32 {
        if s == 0 { self.shards() } else { s }
    }

    /// How many of the population's users live in shard `s`.
    pub fn users_in_shard(&self, s: u32) -> u32 {
        let first = self.first_in_shard(s);
        if first > self.users() {
            0
        } else {
            (self.users() - first) / self.shards() + 1
        }
    }

    /// The `k`-th (0-based) user of the population in shard `s`.
    pub fn user_in_shard(&self, s: u32, k: u32) -> u32 {
        self.first_in_shard(s) + k * self.shards()
    }
}

pub struct Rubis {
    config: Arc<Config>,
    /// Cumulative weights of [`Interaction::ALL`], the last 1.
    cumulative: [f64; 27],
    /// Per node: the shards its clients' acting users come from (empty: all users).
    home_shards: Vec<Vec<u32>>,
    /// The logical clock dates are drawn from.
    clock: Arc<AtomicU64>,
}

impl Rubis {
    pub fn new(
        given: &BTreeMap<String, String>,
        placement: Arc<Placement>,
    ) -> Result<Rubis, WorkloadError> {
        let settings = Settings::from_given(given)?;
        let shards = placement.partition_count().max(1) as u32;
        if settings.users < shards {
            return Err(bad(
                "users",
                settings.users,
                format!("must be at least the number of partitions ({shards})"),
            ));
        }
        let home_shards = placement
            .nodes()
            .map(|node| {
                let homes = settings.home_user.partitions(&placement, node);
                homes
                    .into_iter()
                    .map(|p| p.0)
                    .filter(|s| *s < shards)
                    .collect()
            })
            .collect();
        let weights = mix::weights(settings.update_fraction);
        let mut cumulative = [0.0; 27];
        let mut sum = 0.0;
        for (c, w) in cumulative.iter_mut().zip(weights) {
            sum += w;
            *c = sum;
        }
        Ok(Rubis {
            config: Arc::new(Config::new(settings, shards)),
            cumulative,
            home_shards,
            clock: Arc::new(AtomicU64::new(LOAD_DATE + 1)),
        })
    }

    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }

    /// The weights interactions are drawn with (summing to 1), [`Interaction::ALL`] order.
    pub fn weights(&self) -> [f64; 27] {
        mix::weights(self.config.settings.update_fraction)
    }

    fn draw_interaction(&self, rng: &mut ChaCha8Rng) -> Interaction {
        let total = self.cumulative[26];
        let x = rng.random_range(0.0..total);
        let at = self.cumulative.iter().position(|c| x < *c).unwrap_or(26);
        // Static pages have zero weight: position lands on a database interaction.
        Interaction::ALL[at]
    }

    /// The acting user of an interaction generated for a client of `home`.
    pub fn draw_acting_user(&self, home: NodeId, rng: &mut ChaCha8Rng) -> u32 {
        let config = &self.config;
        let shards = self
            .home_shards
            .get(home.0 as usize)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        if shards.is_empty() {
            return rng.random_range(1..=config.users());
        }
        let s = shards[rng.random_range(0..shards.len())];
        let k = rng.random_range(0..config.users_in_shard(s));
        config.user_in_shard(s, k)
    }

    /// The shards whose users a client of `home` acts as (empty: all users).
    pub fn home_shards(&self, home: NodeId) -> &[u32] {
        self.home_shards
            .get(home.0 as usize)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// The think time of an interaction (its procedure name), or `None` with `think_time=off` or
    /// for anything else: the transition table's waiting time of the interaction with
    /// `think_time=on`, a TPC-W think time with `tpcw`. The emulated user waits it before the
    /// interaction; procedures cannot sleep, so the closed loop applies it.
    pub fn pause(&self, procedure: &str, rng: &mut ChaCha8Rng) -> Option<Duration> {
        let interaction = Interaction::of_name(procedure)?;
        match self.config.settings.think_time {
            ThinkTime::Off => None,
            ThinkTime::Table => Some(interaction.waiting_time()),
            ThinkTime::Tpcw => Some(mix::tpcw_think_time(rng.random_range(0.0..1.0))),
        }
    }

    /// [`Rubis::pause`] in milliseconds.
    pub fn think_time_ms(&self, procedure: &str, rng: &mut ChaCha8Rng) -> Option<f64> {
        self.pause(procedure, rng).map(|d| d.as_secs_f64() * 1000.0)
    }
}

impl Workload for Rubis {
    fn name(&self) -> &'static str {
        "rubis"
    }

    fn pause(&self, procedure: &str, rng: &mut ChaCha8Rng) -> Option<Duration> {
        Rubis::pause(self, procedure, rng)
    }

    fn next(&self, home: NodeId, rng: &mut ChaCha8Rng) -> Box<dyn Procedure> {
        let interaction = self.draw_interaction(rng);
        let user = self.draw_acting_user(home, rng);
        let date = self.clock.fetch_add(1, Ordering::Relaxed);
        txns::draw(&self.config, interaction, user, date, rng)
    }

    fn settings(&self) -> serde_json::Value {
        let s = &self.config.settings;
        let weights: serde_json::Map<String, serde_json::Value> = Interaction::ALL
            .iter()
            .zip(self.weights())
            .filter(|(i, _)| i.touches_database())
            .map(|(i, w)| {
                let percent = (w * 1e5).round() / 1e3;
                (i.name().to_string(), percent.into())
            })
            .collect();
        serde_json::json!({
            "users": s.users,
            "items": s.items,
            "old_items": s.old_items,
            "categories": s.categories,
            "regions": s.regions,
            "bids_per_item": s.bids_per_item,
            "update_fraction": match s.update_fraction {
                Some(f) => serde_json::json!(f),
                None => serde_json::json!("matrix"),
            },
            "think_time": match s.think_time {
                ThinkTime::Off => "off",
                ThinkTime::Table => "on",
                ThinkTime::Tpcw => "tpcw",
            },
            "home_user": s.home_user.name(),
            "shards": self.config.shards(),
            "weights_percent": weights,
            "transition_table": "RUBiS default (bidding) transition set, columns normalised",
            "deviations": s.deviations(),
        })
    }

    fn load(&self) -> Vec<Box<dyn Procedure>> {
        load::batches(&self.config)
    }

    fn audit(&self) -> Option<Box<dyn Audit>> {
        Some(Box::new(audit::RubisAudit::new(Arc::clone(&self.config))))
    }
}
