//! RUBiS's consistency conditions, checked in one read-only transaction so that they all see one
//! snapshot. RUBiS states none of its own; these are the invariants its interactions maintain:
//!
//! * `rubis-bids`: every item's `nb_of_bids` is the number of its bid rows (numbered from 1
//!   without gaps) and its `max_bid` the highest of their amounts (0 without bids).
//! * `rubis-comments`: every user's `nb_comments` is the number of comment rows about it and its
//!   `rating` the sum of their ratings.
//! * `rubis-buy-now`: every user's `nb_bought` is the number of its purchase rows; every purchase
//!   names an item; every item of the population has its loaded quantity less what was bought.
//! * `rubis-ids`: every id in shard `s` (of a user, item, bid, comment or purchase) is ≡ `s`
//!   (mod the shard count) and below the shard's counter of its table, and no id repeats within a
//!   table; no user or item row lies at or past its shard's counter.
//! * `rubis-index`: every shard's category and region-and-category index lists exactly the shard's
//!   active items of that category (and seller's region), in id order, packed in full buckets;
//!   every user's nickname row names it; every seller's list is its most recent items by id, and
//!   every bidder's list holds `min(distinct items it bid on, LIST_CAP)` distinct such items.
//! * `rubis-rows`: every row read decodes; the categories, regions, counters, the population's
//!   users and items, and every user and item below its shard's counter exist.
//!
//! # Reading without scans
//!
//! The audit reads every row where it could be: per shard, users and items from the shard's first
//! id up to [`PROBE_BEYOND`] ids past its counter; each item's bids and each user's comments and
//! purchases up to [`PROBE_BEYOND`] past their counts (a row past a count means the count lost an
//! increment); every index head and bucket, and one bucket past the last.

use super::Config;
use super::load;
use super::schema::*;
use crate::audit_rows::Tally;
use crate::{Audit, Condition};
use augur_client::{Ops, TxnError};
use futures::future::BoxFuture;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

/// How many ids (or child rows) past a counter (or count) are read.
pub const PROBE_BEYOND: u32 = 3;

/// The audit of a [`super::Rubis`] workload.
pub struct RubisAudit {
    config: Arc<Config>,
}

impl RubisAudit {
    pub fn new(config: Arc<Config>) -> RubisAudit {
        RubisAudit { config }
    }
}

impl Audit for RubisAudit {
    fn run<'a>(
        &'a mut self,
        ops: &'a mut dyn Ops,
    ) -> BoxFuture<'a, Result<Vec<Condition>, TxnError>> {
        Box::pin(async move {
            let mut scan = Scan::new(&self.config);
            scan.run(ops).await?;
            Ok(scan.tally.conditions())
        })
    }
}

#[derive(Clone, Copy)]
enum Cond {
    Bids,
    Comments,
    BuyNow,
    Ids,
    Index,
    Rows,
}

const CONDITIONS: [(&str, &str, &str); 6] = [
    (
        "rubis-bids",
        "an item's nb_of_bids and max_bid agree with its bid rows",
        "items",
    ),
    (
        "rubis-comments",
        "a user's nb_comments and rating agree with the comments about it",
        "users",
    ),
    (
        "rubis-buy-now",
        "a user's nb_bought agrees with its purchases; purchases name items; the population's \
         items have their loaded quantity less what was bought",
        "users and items",
    ),
    (
        "rubis-ids",
        "ids are congruent with the shard that numbered them (their own, or the acting user's for \
         bids and comments), below its counter, and unique per table",
        "ids",
    ),
    (
        "rubis-index",
        "the category, region, nickname, seller and bidder indexes agree with the tables",
        "index rows",
    ),
    (
        "rubis-rows",
        "every row read decodes; the rows that must exist do",
        "rows",
    ),
];

/// What the audit learned of one item.
struct ItemFacts {
    old: bool,
    seller: u32,
    category: u16,
}

struct Scan<'c> {
    config: &'c Config,
    layout: Layout,
    tally: Tally,
    /// Per (shard, table): the counter.
    counters: BTreeMap<(u32, Table), u32>,
    /// Per table: every id seen.
    seen: HashMap<Table, HashSet<u32>>,
    /// Per user: its region.
    regions: HashMap<u32, u16>,
    /// Per user: its selling and bidding lists, to check once the items are read.
    selling: HashMap<u32, Vec<u32>>,
    bidding: HashMap<u32, Vec<u32>>,
    /// Per item: units bought.
    bought: HashMap<u32, u64>,
    items: BTreeMap<u32, ItemFacts>,
    /// Per user: the distinct items it bid on.
    bid_on: HashMap<u32, BTreeSet<u32>>,
    /// The population's items: (id, loaded quantity, quantity now).
    quantities: Vec<(u32, u32, u32)>,
}

impl<'c> Scan<'c> {
    fn new(config: &'c Config) -> Scan<'c> {
        Scan {
            config,
            layout: config.layout,
            tally: Tally::new(&CONDITIONS, Cond::Rows as usize),
            counters: BTreeMap::new(),
            seen: HashMap::new(),
            regions: HashMap::new(),
            selling: HashMap::new(),
            bidding: HashMap::new(),
            bought: HashMap::new(),
            items: BTreeMap::new(),
            bid_on: HashMap::new(),
            quantities: Vec::new(),
        }
    }

    /// Count one instance of `cond`, failed unless `ok`; `what` describes a failure.
    fn expect(&mut self, cond: Cond, ok: bool, what: impl FnOnce() -> String) {
        self.tally.expect(cond as usize, ok, what);
    }

    /// Check the id of a `table` row stored in shard `s`: unique, below the counter of the shard
    /// that numbered it, and that shard is `s` unless the table is numbered elsewhere.
    fn id(&mut self, table: Table, s: u32, id: u32, what: impl Fn() -> String) {
        let shards = self.layout.shards;
        let numbered_by = id % shards;
        let counter = self.counters.get(&(numbered_by, table)).copied();
        let fresh = self.seen.entry(table).or_default().insert(id);
        let in_place = numbered_by == s || !table.numbered_where_stored();
        self.expect(
            Cond::Ids,
            fresh && in_place && counter.is_some_and(|c| id < c),
            || {
                format!(
                    "{} id {id} of {} in shard {s} (counter {counter:?}){}",
                    table.name(),
                    what(),
                    if fresh { "" } else { ", a duplicate" }
                )
            },
        );
    }

    async fn run(&mut self, ops: &mut dyn Ops) -> Result<(), TxnError> {
        let c = self.config;
        for category in 1..=c.settings.categories {
            self.tally
                .read_required::<Name>(ops, &self.layout.category(category))
                .await?;
        }
        for region in 1..=c.settings.regions {
            self.tally
                .read_required::<Name>(ops, &self.layout.region(region))
                .await?;
        }
        for s in 0..self.layout.shards {
            for table in Table::ALL {
                let key = self.layout.counter(s, table);
                if let Some(Id(next)) = self.tally.read_required::<Id>(ops, &key).await? {
                    self.counters.insert((s, table), next);
                    self.expect(Cond::Ids, next % self.layout.shards == s, || {
                        format!("counter {key} = {next} is not in shard {s}")
                    });
                }
            }
        }
        for s in 0..self.layout.shards {
            self.users(ops, s).await?;
        }
        for s in 0..self.layout.shards {
            self.items_of(ops, s).await?;
        }
        self.stock();
        self.lists();
        for s in 0..self.layout.shards {
            self.indexes(ops, s).await?;
        }
        Ok(())
    }

    /// The ids shard `s` may have given for `table`: from its first to a few past its counter.
    fn id_range(&self, s: u32, table: Table) -> impl Iterator<Item = u32> + use<> {
        let first = self.config.first_in_shard(s);
        let shards = self.layout.shards;
        let counter = self.counters.get(&(s, table)).copied().unwrap_or(first);
        let end = counter.saturating_add(PROBE_BEYOND * shards);
        (first..end).step_by(shards as usize)
    }

    async fn users(&mut self, ops: &mut dyn Ops, s: u32) -> Result<(), TxnError> {
        let counter = self.counters.get(&(s, Table::Users)).copied();
        for u in self.id_range(s, Table::Users) {
            let key = self.layout.user(u);
            let below = counter.is_some_and(|c| u < c) || u <= self.config.users();
            let row: Option<User> = if below {
                self.tally.read_required(ops, &key).await?
            } else {
                self.tally.read(ops, &key).await?
            };
            let Some(user) = row else { continue };
            self.id(Table::Users, s, u, || format!("user row {key}"));
            self.regions.insert(u, user.region);
            let nick = self.layout.nickname(&user.nickname);
            let named = self.tally.read::<Id>(ops, &nick).await?;
            self.expect(Cond::Index, named == Some(Id(u)), || {
                format!("nickname row {nick} names {named:?}, not user {u}")
            });
            self.comments(ops, s, u, &user).await?;
            self.purchases(ops, s, u, &user).await?;
            let selling = self
                .tally
                .read::<IdList>(ops, &self.layout.selling(u))
                .await?;
            self.selling.insert(u, selling.unwrap_or_default().0);
            let bidding = self
                .tally
                .read::<IdList>(ops, &self.layout.bidding(u))
                .await?;
            self.bidding.insert(u, bidding.unwrap_or_default().0);
        }
        Ok(())
    }

    async fn comments(
        &mut self,
        ops: &mut dyn Ops,
        s: u32,
        u: u32,
        user: &User,
    ) -> Result<(), TxnError> {
        let (mut rows, mut rating, mut last) = (0u32, 0i64, 0u32);
        for n in 1..user.nb_comments.saturating_add(PROBE_BEYOND + 1) {
            let key = self.layout.comment(u, n);
            let Some(comment) = self.tally.read::<Comment>(ops, &key).await? else {
                continue;
            };
            rows += 1;
            last = n;
            rating += i64::from(comment.rating);
            self.id(Table::Comments, s, comment.id, || {
                format!("comment row {key}")
            });
        }
        self.expect(
            Cond::Comments,
            rows == user.nb_comments && last == rows && rating == user.rating,
            || {
                format!(
                    "user {u}: nb_comments {} rating {} but {rows} comment rows (last numbered \
                     {last}) rating {rating}",
                    user.nb_comments, user.rating
                )
            },
        );
        Ok(())
    }

    async fn purchases(
        &mut self,
        ops: &mut dyn Ops,
        s: u32,
        u: u32,
        user: &User,
    ) -> Result<(), TxnError> {
        let (mut rows, mut last) = (0u32, 0u32);
        for n in 1..user.nb_bought.saturating_add(PROBE_BEYOND + 1) {
            let key = self.layout.buy_now(u, n);
            let Some(row) = self.tally.read::<Purchase>(ops, &key).await? else {
                continue;
            };
            rows += 1;
            last = n;
            *self.bought.entry(row.item).or_default() += u64::from(row.qty);
            self.id(Table::BuyNow, s, row.id, || format!("purchase row {key}"));
        }
        self.expect(Cond::BuyNow, rows == user.nb_bought && last == rows, || {
            format!(
                "user {u}: nb_bought {} but {rows} purchase rows (last numbered {last})",
                user.nb_bought
            )
        });
        Ok(())
    }

    async fn items_of(&mut self, ops: &mut dyn Ops, s: u32) -> Result<(), TxnError> {
        let counter = self.counters.get(&(s, Table::Items)).copied();
        for i in self.id_range(s, Table::Items) {
            let old = self.config.is_old(i);
            let key = if old {
                self.layout.old_item(i)
            } else {
                self.layout.item(i)
            };
            let below = counter.is_some_and(|c| i < c) || i <= self.config.total_items();
            let row: Option<Item> = if below {
                self.tally.read_required(ops, &key).await?
            } else {
                self.tally.read(ops, &key).await?
            };
            let Some(item) = row else { continue };
            self.id(Table::Items, s, i, || format!("item row {key}"));
            self.bids(ops, s, i, &item).await?;
            self.items.insert(
                i,
                ItemFacts {
                    old,
                    seller: item.seller,
                    category: item.category,
                },
            );
            if i <= self.config.total_items() {
                let loaded = load::item_with_bids(self.config, i).0.quantity;
                self.quantities.push((i, loaded, item.quantity));
            }
        }
        Ok(())
    }

    async fn bids(
        &mut self,
        ops: &mut dyn Ops,
        s: u32,
        i: u32,
        item: &Item,
    ) -> Result<(), TxnError> {
        let (mut rows, mut last, mut max) = (0u32, 0u32, 0i64);
        for n in 1..item.nb_of_bids.saturating_add(PROBE_BEYOND + 1) {
            let key = self.layout.bid(i, n);
            let Some(bid) = self.tally.read::<Bid>(ops, &key).await? else {
                continue;
            };
            rows += 1;
            last = n;
            max = max.max(bid.bid);
            self.bid_on.entry(bid.user).or_default().insert(i);
            self.id(Table::Bids, s, bid.id, || format!("bid row {key}"));
        }
        self.expect(
            Cond::Bids,
            rows == item.nb_of_bids && last == rows && max == item.max_bid,
            || {
                format!(
                    "item {i}: nb_of_bids {} max_bid {} but {rows} bid rows (last numbered \
                     {last}), highest {max}",
                    item.nb_of_bids, item.max_bid
                )
            },
        );
        Ok(())
    }

    /// The population's items: loaded quantity = quantity now + units bought; purchases name
    /// items.
    fn stock(&mut self) {
        let quantities = std::mem::take(&mut self.quantities);
        for (i, loaded, now) in quantities {
            let bought = self.bought.get(&i).copied().unwrap_or(0);
            self.expect(
                Cond::BuyNow,
                u64::from(loaded) == u64::from(now) + bought,
                || format!("item {i}: loaded with {loaded} units, {now} left, {bought} bought"),
            );
        }
        let unknown: Vec<u32> = self
            .bought
            .keys()
            .filter(|i| !self.items.contains_key(i))
            .copied()
            .collect();
        self.expect(Cond::BuyNow, unknown.is_empty(), || {
            format!("purchases of items that do not exist: {unknown:?}")
        });
    }

    /// The sellers' and bidders' lists.
    fn lists(&mut self) {
        let mut sold: HashMap<u32, Vec<u32>> = HashMap::new();
        for (i, facts) in &self.items {
            sold.entry(facts.seller).or_default().push(*i);
        }
        let selling = std::mem::take(&mut self.selling);
        for (u, have) in selling {
            let mut want = sold.remove(&u).unwrap_or_default();
            want.reverse();
            want.truncate(LIST_CAP);
            self.expect(Cond::Index, have == want, || {
                format!("user {u} sells {want:?} (most recent first) but its list is {have:?}")
            });
        }
        let bidding = std::mem::take(&mut self.bidding);
        for (u, have) in bidding {
            let on = self.bid_on.get(&u);
            let distinct: BTreeSet<u32> = have.iter().copied().collect();
            let all_bid = have.iter().all(|i| on.is_some_and(|set| set.contains(i)));
            let want_len = on.map_or(0, BTreeSet::len).min(LIST_CAP);
            let ok = distinct.len() == have.len() && all_bid && have.len() == want_len;
            let what = if ok {
                String::new()
            } else {
                format!(
                    "user {u}'s bidding list {have:?}: expected {want_len} distinct items it bid \
                     on, among {on:?}"
                )
            };
            self.expect(Cond::Index, ok, || what);
        }
    }

    /// Shard `s`'s category and region indexes.
    async fn indexes(&mut self, ops: &mut dyn Ops, s: u32) -> Result<(), TxnError> {
        let mut want: BTreeMap<IndexList, Vec<u32>> = BTreeMap::new();
        for (i, facts) in &self.items {
            if facts.old || self.layout.shard_of(*i) != s {
                continue;
            }
            let category = facts.category;
            want.entry(IndexList::Category { shard: s, category })
                .or_default()
                .push(*i);
            let region = self.regions.get(&facts.seller).copied().unwrap_or(0);
            want.entry(IndexList::Region {
                shard: s,
                region,
                category,
            })
            .or_default()
            .push(*i);
        }
        let c = &self.config.settings;
        let mut lists = Vec::new();
        for category in 1..=c.categories {
            lists.push(IndexList::Category { shard: s, category });
            for region in 1..=c.regions {
                lists.push(IndexList::Region {
                    shard: s,
                    region,
                    category,
                });
            }
        }
        for list in lists {
            let have = self.index_list(ops, list).await?;
            let want = want.remove(&list).unwrap_or_default();
            self.expect(Cond::Index, have.as_ref() == Some(&want), || {
                format!("index {list:?} holds {have:?} but the shard's items are {want:?}")
            });
        }
        // Items whose category or seller's region is out of range are in no list.
        self.expect(Cond::Index, want.is_empty(), || {
            format!("items in no index list: {want:?}")
        });
        Ok(())
    }

    /// An index list's entries, or `None` if its head and buckets disagree.
    async fn index_list(
        &mut self,
        ops: &mut dyn Ops,
        list: IndexList,
    ) -> Result<Option<Vec<u32>>, TxnError> {
        let count = self
            .tally
            .read::<Id>(ops, &self.layout.index_head(list))
            .await?
            .map_or(0, |Id(n)| n);
        let buckets = count.div_ceil(BUCKET);
        let mut entries = Vec::with_capacity(count as usize);
        let mut packed = true;
        for bucket in 0..=buckets {
            let key = self.layout.index_bucket(list, bucket);
            let row = self.tally.read::<IdList>(ops, &key).await?;
            let want = count.saturating_sub(bucket * BUCKET).min(BUCKET) as usize;
            let len = row.as_ref().map_or(0, |r| r.0.len());
            packed &= len == want && (want > 0 || row.is_none());
            if let Some(IdList(ids)) = row {
                entries.extend(ids);
            }
        }
        Ok(packed.then_some(entries))
    }
}
