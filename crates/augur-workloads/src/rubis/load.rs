//! The initial database, shaped by the defaults of RUBiS's generator (scaled by the settings), and
//! written through ordinary transactions in batches of at most [`MAX_BATCH`] keys.
//!
//! Every row is drawn from a generator seeded by its table and id ([`random::stream`]), so any
//! batch can regenerate what it needs of another's rows, and the interactions and the audit can
//! regenerate the population's items (their sellers, their initial quantities). What relates rows
//! across batches is computed once up front ([`Population`]): which items each user sells (and so
//! which comments it received), the distinct items each user bid on, and the index lists.
//!
//! * Users `1..=users`: `Great<u>`, `User<u>`, nickname `user<u>`, password `password<u>`, a
//!   uniform region; rating the sum of the comments received.
//! * Items `1..=old_items` are closed auctions (OLD_ITEMS) that ended within the 30 days before
//!   [`LOAD_DATE`], the next `items` are open (ITEMS), started within the last day. Each has a
//!   uniform category and a seller drawn uniformly among the users of its own shard (so a user's
//!   items live with the user); 80% are single units and the others 1..=10 units, 40% have a
//!   reserve price and 10% a buy-now price (RUBiS's `database_percentage_*` defaults); auctions
//!   last 1..=7 days.
//! * Item `i` has a uniform 0..=`bids_per_item` bids of increasing amounts from uniformly drawn
//!   users; its `n`-th bid has id `((i / S) · B + n) · S + i mod S` (`B` = max(bids_per_item, 1)),
//!   unique and in the item's shard.
//! * Item `i` has one comment, id `i`, from a uniformly drawn user to its seller, rated one of
//!   -5, -3, 0, 3, 5.
//! * No purchases. Each shard's counters start above every id the population gave in it.

use super::schema::*;
use super::{Config, DAY, LOAD_DATE};
use crate::tpcc::random::{self, a_string};
use crate::tpcc::schema::Row;
use augur_client::Procedure;
use augur_types::{Key, Value};
use rand::Rng;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The most keys one load transaction writes.
pub const MAX_BATCH: usize = 200;
/// Users per batch: each writes its row, its nickname row and up to two lists.
const USERS_PER_BATCH: u32 = 50;
/// Counters per shard.
const SHARDS_PER_BATCH: u32 = 40;

/// What each generator stream is for.
mod purpose {
    pub const REGION: u64 = 101;
    pub const OWNER: u64 = 102;
    pub const ITEM: u64 = 103;
    pub const BIDDERS: u64 = 104;
    pub const BIDS: u64 = 105;
    pub const COMMENT: u64 = 106;
}

/// The ratings a comment can give.
pub const RATINGS: [i32; 5] = [-5, -3, 0, 3, 5];

/// What relates the population's rows across batches.
#[derive(Default)]
pub struct Population {
    /// Per user `u`, the items it sells, ascending: `sold[sold_start[u - 1]..sold_start[u]]`.
    sold_start: Vec<u32>,
    sold: Vec<u32>,
    /// Per user, the distinct items it bid on, ascending (same layout).
    bid_start: Vec<u32>,
    bid_on: Vec<u32>,
    /// Per item `i`, its number of bids: `bid_counts[i - 1]`.
    bid_counts: Vec<u8>,
    /// The index lists, each ascending.
    pub index: BTreeMap<IndexList, Vec<u32>>,
}

impl std::fmt::Debug for Population {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Population({} items sold, {} (user, item bid on), {} index lists)",
            self.sold.len(),
            self.bid_on.len(),
            self.index.len()
        )
    }
}

fn csr(users: u32, mut pairs: Vec<(u32, u32)>) -> (Vec<u32>, Vec<u32>) {
    pairs.sort_unstable();
    pairs.dedup();
    let mut start = vec![0u32; users as usize + 1];
    for (u, _) in &pairs {
        start[*u as usize] += 1;
    }
    for u in 1..start.len() {
        start[u] += start[u - 1];
    }
    (start, pairs.into_iter().map(|(_, i)| i).collect())
}

impl Population {
    pub fn new(config: &Config) -> Population {
        let mut sold = Vec::with_capacity(config.total_items() as usize);
        let mut bids = Vec::new();
        let mut bid_counts = Vec::with_capacity(config.total_items() as usize);
        let mut index: BTreeMap<IndexList, Vec<u32>> = BTreeMap::new();
        for i in 1..=config.total_items() {
            let (seller, category) = item_owner(config, i);
            sold.push((seller, i));
            let bidders = bidders(config, i);
            bid_counts.push(bidders.len() as u8);
            for u in bidders {
                bids.push((u, i));
            }
            if !config.is_old(i) {
                let shard = config.layout.shard_of(i);
                let region = user_region(config, seller);
                index
                    .entry(IndexList::Category { shard, category })
                    .or_default()
                    .push(i);
                index
                    .entry(IndexList::Region {
                        shard,
                        region,
                        category,
                    })
                    .or_default()
                    .push(i);
            }
        }
        let (sold_start, sold) = csr(config.users(), sold);
        let (bid_start, bid_on) = csr(config.users(), bids);
        Population {
            sold_start,
            sold,
            bid_start,
            bid_on,
            bid_counts,
            index,
        }
    }

    /// How many bids item `i` has at load.
    pub fn bids_of(&self, i: u32) -> usize {
        usize::from(self.bid_counts[i as usize - 1])
    }

    /// The items user `u` sells, ascending.
    pub fn sold_by(&self, u: u32) -> &[u32] {
        let u = u as usize;
        &self.sold[self.sold_start[u - 1] as usize..self.sold_start[u] as usize]
    }

    /// The distinct items user `u` bid on, ascending.
    pub fn bid_on_by(&self, u: u32) -> &[u32] {
        let u = u as usize;
        &self.bid_on[self.bid_start[u - 1] as usize..self.bid_start[u] as usize]
    }

    /// The receiver and number of the `j`-th comment (0-based, in (user, n) order).
    fn comment_at(&self, j: u32) -> (u32, u32, u32) {
        // The first user whose range ends after j.
        let u = self.sold_start.partition_point(|end| *end <= j) as u32;
        let n = j - self.sold_start[u as usize - 1] + 1;
        (u, n, self.sold[j as usize])
    }
}

/// The most recent `LIST_CAP` of an ascending list, newest first.
fn recent(ids: &[u32]) -> IdList {
    IdList(ids.iter().rev().take(LIST_CAP).copied().collect())
}

/// One batch of rows.
#[derive(Clone, Debug)]
pub enum Part {
    /// Categories then regions, numbered `first..=last` over both.
    Static { first: u32, last: u32 },
    /// The id counters of shards `first..=last`.
    Counters { first: u32, last: u32 },
    /// Users `first..=last`: their rows, nickname rows and lists.
    Users {
        first: u32,
        last: u32,
        population: Arc<Population>,
    },
    /// Comments `first..=last` (0-based, in (receiver, n) order).
    Comments {
        first: u32,
        last: u32,
        population: Arc<Population>,
    },
    /// Items `first..=last` and their bids.
    Items { first: u32, last: u32 },
    /// Index lists: for each, buckets `first..=last` (and the head with bucket 0).
    Index {
        lists: Vec<(IndexList, u32, u32)>,
        population: Arc<Population>,
    },
}

/// The whole population.
pub fn batches(config: &Arc<Config>) -> Vec<Box<dyn Procedure>> {
    batch_parts(config)
        .into_iter()
        .map(|part| {
            let config = Arc::clone(config);
            crate::load_rows(move || rows(&config, &part))
        })
        .collect()
}

/// The parts [`batches`] loads, in order.
pub fn batch_parts(config: &Config) -> Vec<Part> {
    let population = Arc::new(Population::new(config));
    let mut parts = Vec::new();
    let statics = u32::from(config.settings.categories) + u32::from(config.settings.regions);
    for first in (1..=statics).step_by(MAX_BATCH) {
        let last = (first + MAX_BATCH as u32 - 1).min(statics);
        parts.push(Part::Static { first, last });
    }
    let shards = config.shards();
    for first in (0..shards).step_by(SHARDS_PER_BATCH as usize) {
        let last = (first + SHARDS_PER_BATCH - 1).min(shards - 1);
        parts.push(Part::Counters { first, last });
    }
    let users = config.users();
    for first in (1..=users).step_by(USERS_PER_BATCH as usize) {
        let last = (first + USERS_PER_BATCH - 1).min(users);
        let population = Arc::clone(&population);
        parts.push(Part::Users {
            first,
            last,
            population,
        });
    }
    let comments = config.total_items();
    for first in (0..comments).step_by(MAX_BATCH) {
        let last = (first + MAX_BATCH as u32 - 1).min(comments - 1);
        let population = Arc::clone(&population);
        parts.push(Part::Comments {
            first,
            last,
            population,
        });
    }
    // Items with their bids, as many as fit.
    let mut first = 1;
    let mut keys = 0;
    for i in 1..=config.total_items() {
        let n = 1 + population.bids_of(i);
        if keys + n > MAX_BATCH {
            parts.push(Part::Items { first, last: i - 1 });
            (first, keys) = (i, 0);
        }
        keys += n;
    }
    parts.push(Part::Items {
        first,
        last: config.total_items(),
    });
    // Index lists, packed.
    let mut lists = Vec::new();
    let mut keys = 0;
    for (list, ids) in &population.index {
        let buckets = (ids.len() as u32).div_ceil(BUCKET);
        let mut bucket = 0;
        while bucket < buckets {
            let head = usize::from(bucket == 0);
            let room = MAX_BATCH - keys;
            if room <= head {
                parts.push(Part::Index {
                    lists: std::mem::take(&mut lists),
                    population: Arc::clone(&population),
                });
                keys = 0;
                continue;
            }
            let take = ((room - head) as u32).min(buckets - bucket);
            lists.push((*list, bucket, bucket + take - 1));
            keys += head + take as usize;
            bucket += take;
        }
    }
    if !lists.is_empty() {
        parts.push(Part::Index { lists, population });
    }
    parts
}

/// The rows of `part`.
pub fn rows(config: &Config, part: &Part) -> Vec<(Key, Value)> {
    let layout = &config.layout;
    let mut out = Vec::new();
    match part {
        Part::Static { first, last } => {
            let categories = u32::from(config.settings.categories);
            for x in *first..=*last {
                if x <= categories {
                    let c = x as u16;
                    out.push((layout.category(c), category_name(c).encode()));
                } else {
                    let r = (x - categories) as u16;
                    out.push((layout.region(r), region_name(r).encode()));
                }
            }
        }
        Part::Counters { first, last } => {
            for s in *first..=*last {
                for table in Table::ALL {
                    let next = Id(initial_counter(config, s, table));
                    out.push((layout.counter(s, table), next.encode()));
                }
            }
        }
        Part::Users {
            first,
            last,
            population,
        } => {
            for u in *first..=*last {
                let row = user(config, population, u);
                out.push((layout.nickname(&row.nickname), Id(u).encode()));
                out.push((layout.user(u), row.encode()));
                let sold = population.sold_by(u);
                if !sold.is_empty() {
                    out.push((layout.selling(u), recent(sold).encode()));
                }
                let bid_on = population.bid_on_by(u);
                if !bid_on.is_empty() {
                    out.push((layout.bidding(u), recent(bid_on).encode()));
                }
            }
        }
        Part::Comments {
            first,
            last,
            population,
        } => {
            for j in *first..=*last {
                let (to, n, item) = population.comment_at(j);
                out.push((layout.comment(to, n), comment(config, item).encode()));
            }
        }
        Part::Items { first, last } => {
            for i in *first..=*last {
                let (row, bids) = item_with_bids(config, i);
                let key = if config.is_old(i) {
                    layout.old_item(i)
                } else {
                    layout.item(i)
                };
                out.push((key, row.encode()));
                for (n, bid) in (1..).zip(&bids) {
                    out.push((layout.bid(i, n), bid.encode()));
                }
            }
        }
        Part::Index { lists, population } => {
            for (list, first, last) in lists {
                let ids = &population.index[list];
                if *first == 0 {
                    out.push((layout.index_head(*list), Id(ids.len() as u32).encode()));
                }
                for bucket in *first..=*last {
                    let from = (bucket * BUCKET) as usize;
                    let to = (from + BUCKET as usize).min(ids.len());
                    let row = IdList(ids[from..to].to_vec());
                    out.push((layout.index_bucket(*list, bucket), row.encode()));
                }
            }
        }
    }
    out
}

pub fn category_name(c: u16) -> Name {
    Name(format!("Category {c}"))
}

pub fn region_name(r: u16) -> Name {
    Name(format!("Region {r}"))
}

/// The population's highest bid id bound: every loaded bid id is at most this.
fn max_loaded_bid(config: &Config) -> u32 {
    let s = config.shards();
    let b = config.settings.bids_per_item.max(1);
    ((config.total_items() / s) * b + b) * s + (s - 1)
}

/// The id of item `i`'s `n`-th bid of the population.
pub fn loaded_bid_id(config: &Config, i: u32, n: u32) -> u32 {
    let s = config.shards();
    let b = config.settings.bids_per_item.max(1);
    ((i / s) * b + n) * s + i % s
}

/// Shard `s`'s counter of `table` after the population.
pub fn initial_counter(config: &Config, s: u32, table: Table) -> u32 {
    let above = match table {
        Table::Users => config.users(),
        Table::Items | Table::Comments => config.total_items(),
        Table::Bids => max_loaded_bid(config),
        Table::BuyNow => 0,
    };
    config.layout.next_above(above, s)
}

/// A cheap generator for the draws that relate rows (regions, sellers, categories, bidders), which
/// [`Population::new`] makes for every user and item: splitmix64 over (purpose, id).
struct Cheap(u64);

impl Cheap {
    fn new(purpose: u64, id: u32) -> Cheap {
        let mut cheap = Cheap(purpose.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(id));
        cheap.next();
        cheap
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0), by multiply-shift.
    fn below(&mut self, n: u32) -> u32 {
        (((self.next() >> 32) * u64::from(n)) >> 32) as u32
    }

    /// Uniform in `lo..=hi`.
    fn within(&mut self, lo: u32, hi: u32) -> u32 {
        lo + self.below(hi - lo + 1)
    }
}

/// User `u`'s region.
pub fn user_region(config: &Config, u: u32) -> u16 {
    let mut cheap = Cheap::new(purpose::REGION, u);
    cheap.within(1, u32::from(config.settings.regions)) as u16
}

/// The nickname and password of user `u` of the population.
pub fn credentials(u: u32) -> (String, String) {
    (format!("user{u}"), format!("password{u}"))
}

pub fn user(config: &Config, population: &Population, u: u32) -> User {
    let (nickname, password) = credentials(u);
    let sold = population.sold_by(u);
    let rating = sold
        .iter()
        .map(|i| i64::from(comment(config, *i).rating))
        .sum();
    User {
        firstname: format!("Great{u}"),
        lastname: format!("User{u}"),
        email: format!("Great{u}.User{u}@rubis.com"),
        nickname,
        password,
        rating,
        balance: 0,
        creation_date: LOAD_DATE,
        region: user_region(config, u),
        nb_comments: sold.len() as u32,
        nb_bought: 0,
    }
}

/// Item `i`'s seller (a user of the item's shard) and category.
pub fn item_owner(config: &Config, i: u32) -> (u32, u16) {
    let mut cheap = Cheap::new(purpose::OWNER, i);
    let category = cheap.within(1, u32::from(config.settings.categories)) as u16;
    let s = config.layout.shard_of(i);
    let k = cheap.below(config.users_in_shard(s));
    (config.user_in_shard(s, k), category)
}

/// The users who bid on item `i`, in bid order.
pub fn bidders(config: &Config, i: u32) -> Vec<u32> {
    let mut cheap = Cheap::new(purpose::BIDDERS, i);
    let count = cheap.within(0, config.settings.bids_per_item);
    (0..count)
        .map(|_| cheap.within(1, config.users()))
        .collect()
}

/// Item `i` of the population as loaded, and its bids.
pub fn item_with_bids(config: &Config, i: u32) -> (Item, Vec<Bid>) {
    let (seller, category) = item_owner(config, i);
    let mut rng = random::stream(purpose::ITEM, &[i.into()]);
    let initial_price = rng.random_range(100..=500_000);
    let quantity = if rng.random_range(0..100) < 80 {
        1
    } else {
        rng.random_range(1..=10)
    };
    let reserve_price = if rng.random_range(0..100) < 40 {
        initial_price + rng.random_range(100..=100_000)
    } else {
        0
    };
    let buy_now = if rng.random_range(0..100) < 10 {
        initial_price + reserve_price + rng.random_range(100..=100_000)
    } else {
        0
    };
    let duration = rng.random_range(1..=7) * DAY;
    let (start_date, end_date) = if config.is_old(i) {
        let end = LOAD_DATE - rng.random_range(1..30 * DAY);
        (end - duration, end)
    } else {
        let start = LOAD_DATE - rng.random_range(1000..DAY);
        (start, start + duration)
    };
    let name = a_string(&mut rng, 8, 20);
    let description = a_string(&mut rng, 20, 60);
    let mut bid_rng = random::stream(purpose::BIDS, &[i.into()]);
    let mut amount = initial_price;
    let bids: Vec<Bid> = (1..)
        .zip(bidders(config, i))
        .map(|(n, user)| {
            amount += bid_rng.random_range(100..=10_000);
            Bid {
                id: loaded_bid_id(config, i, n),
                user,
                qty: bid_rng.random_range(1..=quantity),
                bid: amount,
                max_bid: amount + bid_rng.random_range(0..=5_000),
                date: start_date + u64::from(n),
            }
        })
        .collect();
    let item = Item {
        name,
        description,
        initial_price,
        quantity,
        reserve_price,
        buy_now,
        nb_of_bids: bids.len() as u32,
        max_bid: bids.last().map_or(0, |b| b.bid),
        start_date,
        end_date,
        seller,
        category,
    };
    (item, bids)
}

/// The population's comment about item `i` (to its seller; its id is `i`).
pub fn comment(config: &Config, i: u32) -> Comment {
    let mut rng = random::stream(purpose::COMMENT, &[i.into()]);
    Comment {
        id: i,
        from_user: rng.random_range(1..=config.users()),
        item: i,
        rating: RATINGS[rng.random_range(0..RATINGS.len())],
        date: LOAD_DATE - 1,
        comment: a_string(&mut rng, 10, 50),
    }
}
