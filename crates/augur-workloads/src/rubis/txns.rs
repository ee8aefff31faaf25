//! The 18 RUBiS interactions that query the database, over the rows of [`super::schema`], with the
//! queries of RUBiS's servlets turned into reads and writes of keys.
//!
//! Each procedure draws all its inputs when it is generated (what RUBiS's client would post), so a
//! retried attempt runs the same interaction again; what it would display is kept in its `result`
//! after an attempt that ran to the end. A row an interaction needs that is missing or does not
//! decode means the database is inconsistent (or, under an optimistic protocol, that this attempt
//! read an inconsistent state and will fail validation anyway): the attempt is rejected with
//! [`RequestError::Invalid`] naming the row. What RUBiS answers with an error page — a failed
//! login, a nickname already taken, buying from a closed auction — commits without writing.
//!
//! Logins (BuyNow, PutBid, PutComment, SelectCategoryToSellItem, AboutMe) read the nickname index
//! and the user's row and compare the password, as RUBiS's `SELECT id, password FROM users WHERE
//! nickname = ?` does.
//!
//! Since an interaction's fields are all its body depends on (dates included, drawn with the
//! rest), each serializes, `result` skipped, as the arguments of its one-shot [`ProcedureCall`],
//! and the [`Catalog`](crate::Catalog) rebuilds it from them on the node that runs it. Of the
//! shared [`Config`] the bodies use only the layout and the numbers of categories and regions, so
//! only those ship.

use super::load::{self, RATINGS};
use super::mix::{self, Interaction};
use super::schema::*;
use super::{Config, DAY};
use crate::tpcc::random::a_string;
use crate::tpcc::schema::Row;
use crate::tpcc::txns::{rebuild, unchecked};
use augur_client::{Ops, Procedure, TxnError};
use augur_types::{Key, ProcedureCall, RequestError};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::ops::RangeInclusive;
use std::sync::Arc;

/// Entries per search page (RUBiS's `workload_number_of_items_per_page`).
pub const PAGE: u32 = 20;
/// How far back AboutMe lists purchases (RUBiS: the last 30 days).
pub const BOUGHT_WINDOW: u64 = 30 * DAY;
/// How far above the current price StoreBid bids, in cents.
pub const BID_RAISE: RangeInclusive<i64> = 100..=10_000;
/// How far above its bid StoreBid sets the proxy maximum, in cents.
pub const BID_EXTRA: RangeInclusive<i64> = 0..=5_000;
/// How many days a registered auction runs.
pub const AUCTION_DAYS: RangeInclusive<u64> = 1..=7;

/// The database does not hold what the interaction needs.
fn broken(why: String) -> TxnError {
    TxnError::Rejected(RequestError::Invalid(format!("rubis: {why}")))
}

/// Read and decode a row; absent is `None`.
pub(crate) async fn get<R: Row>(ops: &mut dyn Ops, key: &Key) -> Result<Option<R>, TxnError> {
    match ops.read(key).await? {
        None => Ok(None),
        Some(v) => R::decode(&v)
            .map(Some)
            .map_err(|e| broken(format!("{key}: {e}"))),
    }
}

/// Read and decode a row that must exist.
pub(crate) async fn must<R: Row>(ops: &mut dyn Ops, key: &Key) -> Result<R, TxnError> {
    get(ops, key)
        .await?
        .ok_or_else(|| broken(format!("{} row {key} is missing", R::TABLE)))
}

fn put<R: Row>(ops: &mut dyn Ops, key: Key, row: &R) -> Result<(), TxnError> {
    ops.write(key, Some(row.encode()))
}

/// Take the next id of `table` from shard `s`'s counter.
async fn allocate(
    ops: &mut dyn Ops,
    layout: &Layout,
    s: u32,
    table: Table,
) -> Result<u32, TxnError> {
    let key = layout.counter(s, table);
    let Id(id) = must(ops, &key).await?;
    put(ops, key, &Id(id + layout.shards))?;
    Ok(id)
}

/// An item, open or closed: from ITEMS, else OLD_ITEMS. `true` if old.
async fn any_item(ops: &mut dyn Ops, layout: &Layout, i: u32) -> Result<(Item, bool), TxnError> {
    if let Some(item) = get::<Item>(ops, &layout.item(i)).await? {
        return Ok((item, false));
    }
    match get::<Item>(ops, &layout.old_item(i)).await? {
        Some(item) => Ok((item, true)),
        None => Err(broken(format!(
            "item {i} is in neither ITEMS nor OLD_ITEMS"
        ))),
    }
}

/// A login: the user whose nickname and password these are, if any.
async fn authenticate(
    ops: &mut dyn Ops,
    layout: &Layout,
    login: &Login,
) -> Result<Option<(u32, User)>, TxnError> {
    let Some(Id(u)) = get::<Id>(ops, &layout.nickname(&login.nickname)).await? else {
        return Ok(None);
    };
    let user: User = must(ops, &layout.user(u)).await?;
    Ok((user.password == login.password).then_some((u, user)))
}

async fn nickname(ops: &mut dyn Ops, layout: &Layout, u: u32) -> Result<String, TxnError> {
    Ok(must::<User>(ops, &layout.user(u)).await?.nickname)
}

async fn category_names(
    ops: &mut dyn Ops,
    layout: &Layout,
    categories: u16,
) -> Result<Vec<String>, TxnError> {
    let mut names = Vec::with_capacity(usize::from(categories));
    for c in 1..=categories {
        names.push(must::<Name>(ops, &layout.category(c)).await?.0);
    }
    Ok(names)
}

/// One page of a search: the open auctions among entries `page * PAGE ..` of the union of
/// `lists` (one per shard), taken in rounds — each list's first entry, then each list's second —
/// so that a page draws on every shard.
async fn search(
    ops: &mut dyn Ops,
    layout: &Layout,
    lists: &[IndexList],
    page: u32,
    now: u64,
) -> Result<Vec<(u32, Item)>, TxnError> {
    let mut counts = Vec::with_capacity(lists.len());
    for list in lists {
        let count = get::<Id>(ops, &layout.index_head(*list)).await?;
        counts.push(count.map_or(0, |Id(n)| n));
    }
    let skip = u64::from(page) * u64::from(PAGE);
    let longest = counts.iter().copied().max().unwrap_or(0);
    let mut position = 0u64;
    let mut wanted = Vec::new();
    'ranks: for rank in 0..longest {
        for (l, count) in counts.iter().enumerate() {
            if rank >= *count {
                continue;
            }
            if position >= skip {
                wanted.push((l, rank));
                if wanted.len() == PAGE as usize {
                    break 'ranks;
                }
            }
            position += 1;
        }
    }
    let mut buckets: BTreeMap<(usize, u32), IdList> = BTreeMap::new();
    let mut out = Vec::with_capacity(wanted.len());
    for (l, rank) in wanted {
        let bucket = rank / BUCKET;
        if let Entry::Vacant(slot) = buckets.entry((l, bucket)) {
            let key = layout.index_bucket(lists[l], bucket);
            slot.insert(must(ops, &key).await?);
        }
        let row = &buckets[&(l, bucket)];
        let Some(&i) = row.0.get((rank % BUCKET) as usize) else {
            return Err(broken(format!(
                "index {:?} counts {} entries but bucket {bucket} ends early",
                lists[l], counts[l]
            )));
        };
        let item: Item = must(ops, &layout.item(i)).await?;
        if item.open(now) {
            out.push((i, item));
        }
    }
    Ok(out)
}

/// The nickname and password a client logs in with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Login {
    pub nickname: String,
    pub password: String,
}

impl Login {
    /// The credentials of user `u` of the population.
    pub fn of(u: u32) -> Login {
        let (nickname, password) = load::credentials(u);
        Login { nickname, password }
    }
}

/// Each interaction is a [`crate::result_procedure`] named after it.
macro_rules! procedure {
    ($ty:ty, $interaction:expr) => {
        crate::result_procedure!(
            $ty,
            $interaction.name(),
            !$interaction.read_write(),
            "rubis"
        );
    };
}

/// A page number: `k` with the probability of `k` consecutive "next page" links.
fn draw_page(state: Interaction, rng: &mut ChaCha8Rng) -> u32 {
    let q = mix::next_page_probability(state);
    let mut page = 0;
    while page < 1000 && rng.random::<f64>() < q {
        page += 1;
    }
    page
}

fn draw_item(config: &Config, rng: &mut ChaCha8Rng) -> u32 {
    rng.random_range(config.first_active()..=config.total_items())
}

fn draw_user(config: &Config, rng: &mut ChaCha8Rng) -> u32 {
    rng.random_range(1..=config.users())
}

/// The interaction `interaction` by user `acting`, dated `date`.
pub fn draw(
    config: &Arc<Config>,
    interaction: Interaction,
    acting: u32,
    date: u64,
    rng: &mut ChaCha8Rng,
) -> Box<dyn Procedure> {
    let c = Arc::clone(config);
    let s = &config.settings;
    match interaction {
        Interaction::BrowseCategories => Box::new(BrowseCategories {
            config: c,
            result: None,
        }),
        Interaction::SearchItemsInCategory => Box::new(SearchItemsInCategory {
            config: c,
            category: rng.random_range(1..=s.categories),
            page: draw_page(interaction, rng),
            date,
            result: None,
        }),
        Interaction::BrowseRegions => Box::new(BrowseRegions {
            config: c,
            result: None,
        }),
        Interaction::BrowseCategoriesInRegion => Box::new(BrowseCategoriesInRegion {
            config: c,
            region: rng.random_range(1..=s.regions),
            result: None,
        }),
        Interaction::SearchItemsInRegion => Box::new(SearchItemsInRegion {
            config: c,
            region: rng.random_range(1..=s.regions),
            category: rng.random_range(1..=s.categories),
            page: draw_page(interaction, rng),
            date,
            result: None,
        }),
        Interaction::ViewItem => Box::new(ViewItem {
            config: c,
            item: draw_item(config, rng),
            result: None,
        }),
        Interaction::ViewUserInfo => Box::new(ViewUserInfo {
            config: c,
            user: draw_user(config, rng),
            result: None,
        }),
        Interaction::ViewBidHistory => Box::new(ViewBidHistory {
            config: c,
            item: draw_item(config, rng),
            result: None,
        }),
        Interaction::BuyNow => Box::new(BuyNow {
            config: c,
            login: Login::of(acting),
            item: draw_item(config, rng),
            result: None,
        }),
        Interaction::StoreBuyNow => Box::new(StoreBuyNow {
            config: c,
            buyer: acting,
            item: draw_item(config, rng),
            qty: rng.random_range(1..=10),
            date,
            result: None,
        }),
        Interaction::PutBid => Box::new(PutBid {
            config: c,
            login: Login::of(acting),
            item: draw_item(config, rng),
            result: None,
        }),
        Interaction::StoreBid => Box::new(StoreBid {
            config: c,
            user: acting,
            item: draw_item(config, rng),
            raise: rng.random_range(BID_RAISE),
            extra: rng.random_range(BID_EXTRA),
            qty: rng.random_range(1..=10),
            date,
            result: None,
        }),
        Interaction::PutComment => {
            let item = draw_item(config, rng);
            Box::new(PutComment {
                config: c,
                login: Login::of(acting),
                item,
                to: load::item_owner(config, item).0,
                result: None,
            })
        }
        Interaction::StoreComment => {
            let item = draw_item(config, rng);
            Box::new(StoreComment {
                config: c,
                from: acting,
                to: load::item_owner(config, item).0,
                item,
                rating: RATINGS[rng.random_range(0..RATINGS.len())],
                comment: a_string(rng, 10, 50),
                date,
                result: None,
            })
        }
        Interaction::SelectCategoryToSellItem => Box::new(SelectCategoryToSellItem {
            config: c,
            login: Login::of(acting),
            result: None,
        }),
        Interaction::RegisterItem => Box::new(RegisterItem::draw(c, acting, date, rng)),
        Interaction::RegisterUser => Box::new(RegisterUser::draw(c, acting, date, rng)),
        Interaction::AboutMe => Box::new(AboutMe {
            config: c,
            login: Login::of(acting),
            date,
            result: None,
        }),
        other => unreachable!("{other:?} is a static page with no transaction"),
    }
}

/// BrowseCategories: every category.
#[derive(Serialize, Deserialize)]
pub struct BrowseCategories {
    #[serde(with = "shipped_config")]
    pub config: Arc<Config>,
    #[serde(skip)]
    pub result: Option<Vec<String>>,
}

impl BrowseCategories {
    async fn body(&self, ops: &mut dyn Ops) -> Result<Vec<String>, TxnError> {
        let c = &self.config;
        category_names(ops, &c.layout, c.settings.categories).await
    }
}

procedure!(BrowseCategories, Interaction::BrowseCategories);

/// SearchItemsInCategory: a page of the open auctions of a category, over every shard's index.
#[derive(Serialize, Deserialize)]
pub struct SearchItemsInCategory {
    #[serde(with = "shipped_config")]
    pub config: Arc<Config>,
    pub category: u16,
    pub page: u32,
    pub date: u64,
    #[serde(skip)]
    pub result: Option<Vec<(u32, Item)>>,
}

impl SearchItemsInCategory {
    async fn body(&self, ops: &mut dyn Ops) -> Result<Vec<(u32, Item)>, TxnError> {
        let layout = &self.config.layout;
        let lists: Vec<IndexList> = (0..layout.shards)
            .map(|shard| IndexList::Category {
                shard,
                category: self.category,
            })
            .collect();
        search(ops, layout, &lists, self.page, self.date).await
    }
}

procedure!(SearchItemsInCategory, Interaction::SearchItemsInCategory);

/// BrowseRegions: every region.
#[derive(Serialize, Deserialize)]
pub struct BrowseRegions {
    #[serde(with = "shipped_config")]
    pub config: Arc<Config>,
    #[serde(skip)]
    pub result: Option<Vec<String>>,
}

impl BrowseRegions {
    async fn body(&self, ops: &mut dyn Ops) -> Result<Vec<String>, TxnError> {
        let c = &self.config;
        let mut names = Vec::new();
        for r in 1..=c.settings.regions {
            names.push(must::<Name>(ops, &c.layout.region(r)).await?.0);
        }
        Ok(names)
    }
}

procedure!(BrowseRegions, Interaction::BrowseRegions);

/// BrowseCategoriesInRegion: the region, then every category.
#[derive(Serialize, Deserialize)]
pub struct BrowseCategoriesInRegion {
    #[serde(with = "shipped_config")]
    pub config: Arc<Config>,
    pub region: u16,
    #[serde(skip)]
    pub result: Option<(String, Vec<String>)>,
}

impl BrowseCategoriesInRegion {
    async fn body(&self, ops: &mut dyn Ops) -> Result<(String, Vec<String>), TxnError> {
        let c = &self.config;
        let Name(region) = must(ops, &c.layout.region(self.region)).await?;
        let categories = category_names(ops, &c.layout, c.settings.categories).await?;
        Ok((region, categories))
    }
}

procedure!(
    BrowseCategoriesInRegion,
    Interaction::BrowseCategoriesInRegion
);

/// SearchItemsInRegion: a page of the open auctions of a category whose sellers live in a region.
#[derive(Serialize, Deserialize)]
pub struct SearchItemsInRegion {
    #[serde(with = "shipped_config")]
    pub config: Arc<Config>,
    pub region: u16,
    pub category: u16,
    pub page: u32,
    pub date: u64,
    #[serde(skip)]
    pub result: Option<Vec<(u32, Item)>>,
}

impl SearchItemsInRegion {
    async fn body(&self, ops: &mut dyn Ops) -> Result<Vec<(u32, Item)>, TxnError> {
        let layout = &self.config.layout;
        let lists: Vec<IndexList> = (0..layout.shards)
            .map(|shard| IndexList::Region {
                shard,
                region: self.region,
                category: self.category,
            })
            .collect();
        search(ops, layout, &lists, self.page, self.date).await
    }
}

procedure!(SearchItemsInRegion, Interaction::SearchItemsInRegion);

/// What ViewItem shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ItemPage {
    pub item: Item,
    pub old: bool,
    pub seller_nickname: String,
}

async fn item_page(ops: &mut dyn Ops, layout: &Layout, i: u32) -> Result<ItemPage, TxnError> {
    let (item, old) = any_item(ops, layout, i).await?;
    let seller_nickname = nickname(ops, layout, item.seller).await?;
    Ok(ItemPage {
        item,
        old,
        seller_nickname,
    })
}

/// ViewItem: the item (from OLD_ITEMS if closed), its seller's nickname.
#[derive(Serialize, Deserialize)]
pub struct ViewItem {
    #[serde(with = "shipped_config")]
    pub config: Arc<Config>,
    pub item: u32,
    #[serde(skip)]
    pub result: Option<ItemPage>,
}

impl ViewItem {
    async fn body(&self, ops: &mut dyn Ops) -> Result<ItemPage, TxnError> {
        item_page(ops, &self.config.layout, self.item).await
    }
}

procedure!(ViewItem, Interaction::ViewItem);

/// ViewUserInfo: the user and the comments about it, with their authors' nicknames.
#[derive(Serialize, Deserialize)]
pub struct ViewUserInfo {
    #[serde(with = "shipped_config")]
    pub config: Arc<Config>,
    pub user: u32,
    #[serde(skip)]
    pub result: Option<(User, Vec<(Comment, String)>)>,
}

async fn comments_about(
    ops: &mut dyn Ops,
    layout: &Layout,
    u: u32,
    count: u32,
) -> Result<Vec<(Comment, String)>, TxnError> {
    let mut out = Vec::with_capacity(count as usize);
    for n in 1..=count {
        let comment: Comment = must(ops, &layout.comment(u, n)).await?;
        let from = nickname(ops, layout, comment.from_user).await?;
        out.push((comment, from));
    }
    Ok(out)
}

impl ViewUserInfo {
    async fn body(&self, ops: &mut dyn Ops) -> Result<(User, Vec<(Comment, String)>), TxnError> {
        let layout = &self.config.layout;
        let user: User = must(ops, &layout.user(self.user)).await?;
        let comments = comments_about(ops, layout, self.user, user.nb_comments).await?;
        Ok((user, comments))
    }
}

procedure!(ViewUserInfo, Interaction::ViewUserInfo);

/// ViewBidHistory: the item's name and its bids, with the bidders' nicknames.
#[derive(Serialize, Deserialize)]
pub struct ViewBidHistory {
    #[serde(with = "shipped_config")]
    pub config: Arc<Config>,
    pub item: u32,
    #[serde(skip)]
    pub result: Option<(String, Vec<(Bid, String)>)>,
}

impl ViewBidHistory {
    async fn body(&self, ops: &mut dyn Ops) -> Result<(String, Vec<(Bid, String)>), TxnError> {
        let layout = &self.config.layout;
        let (item, _) = any_item(ops, layout, self.item).await?;
        let mut bids = Vec::with_capacity(item.nb_of_bids as usize);
        for n in 1..=item.nb_of_bids {
            let bid: Bid = must(ops, &layout.bid(self.item, n)).await?;
            let who = nickname(ops, layout, bid.user).await?;
            bids.push((bid, who));
        }
        Ok((item.name, bids))
    }
}

procedure!(ViewBidHistory, Interaction::ViewBidHistory);

/// BuyNow: log in, show the item. `None`: the login failed.
#[derive(Serialize, Deserialize)]
pub struct BuyNow {
    #[serde(with = "shipped_config")]
    pub config: Arc<Config>,
    pub login: Login,
    pub item: u32,
    #[serde(skip)]
    pub result: Option<Option<ItemPage>>,
}

impl BuyNow {
    async fn body(&self, ops: &mut dyn Ops) -> Result<Option<ItemPage>, TxnError> {
        let layout = &self.config.layout;
        if authenticate(ops, layout, &self.login).await?.is_none() {
            return Ok(None);
        }
        item_page(ops, layout, self.item).await.map(Some)
    }
}

procedure!(BuyNow, Interaction::BuyNow);

/// StoreBuyNow: buy up to `qty` units of an open auction; the auction closes when the last unit
/// sells. The result is the quantity bought (0: the auction was closed or sold out).
#[derive(Serialize, Deserialize)]
pub struct StoreBuyNow {
    #[serde(with = "shipped_config")]
    pub config: Arc<Config>,
    pub buyer: u32,
    pub item: u32,
    pub qty: u32,
    pub date: u64,
    #[serde(skip)]
    pub result: Option<u32>,
}

impl StoreBuyNow {
    async fn body(&self, ops: &mut dyn Ops) -> Result<u32, TxnError> {
        let layout = &self.config.layout;
        let item_key = layout.item(self.item);
        let mut item: Item = must(ops, &item_key).await?;
        if !item.open(self.date) || item.quantity == 0 {
            return Ok(0);
        }
        let qty = self.qty.min(item.quantity);
        item.quantity -= qty;
        if item.quantity == 0 {
            item.end_date = self.date;
        }
        put(ops, item_key, &item)?;
        let user_key = layout.user(self.buyer);
        let mut buyer: User = must(ops, &user_key).await?;
        let s = layout.shard_of(self.buyer);
        let id = allocate(ops, layout, s, Table::BuyNow).await?;
        buyer.nb_bought += 1;
        let row = Purchase {
            id,
            item: self.item,
            qty,
            date: self.date,
        };
        put(ops, layout.buy_now(self.buyer, buyer.nb_bought), &row)?;
        put(ops, user_key, &buyer)?;
        Ok(qty)
    }
}

procedure!(StoreBuyNow, Interaction::StoreBuyNow);

/// PutBid: log in, show the item with its current bids' summary. `None`: the login failed.
#[derive(Serialize, Deserialize)]
pub struct PutBid {
    #[serde(with = "shipped_config")]
    pub config: Arc<Config>,
    pub login: Login,
    pub item: u32,
    #[serde(skip)]
    pub result: Option<Option<ItemPage>>,
}

impl PutBid {
    async fn body(&self, ops: &mut dyn Ops) -> Result<Option<ItemPage>, TxnError> {
        let layout = &self.config.layout;
        if authenticate(ops, layout, &self.login).await?.is_none() {
            return Ok(None);
        }
        item_page(ops, layout, self.item).await.map(Some)
    }
}

procedure!(PutBid, Interaction::PutBid);

/// StoreBid: bid `raise` above the item's current price (its highest bid, or its initial price),
/// for `qty` units (at most the item's quantity), proxy maximum `extra` above the bid. The result
/// is the bid's amount.
#[derive(Serialize, Deserialize)]
pub struct StoreBid {
    #[serde(with = "shipped_config")]
    pub config: Arc<Config>,
    pub user: u32,
    pub item: u32,
    pub raise: i64,
    pub extra: i64,
    pub qty: u32,
    pub date: u64,
    #[serde(skip)]
    pub result: Option<i64>,
}

impl StoreBid {
    async fn body(&self, ops: &mut dyn Ops) -> Result<i64, TxnError> {
        let layout = &self.config.layout;
        let item_key = layout.item(self.item);
        let mut item: Item = must(ops, &item_key).await?;
        let amount = item.max_bid.max(item.initial_price) + self.raise;
        // Numbered by the bidder's shard, not the item's: the id is taken locally (STR §8.2).
        let id = allocate(ops, layout, layout.shard_of(self.user), Table::Bids).await?;
        item.nb_of_bids += 1;
        item.max_bid = item.max_bid.max(amount);
        let bid = Bid {
            id,
            user: self.user,
            qty: self.qty.min(item.quantity).max(1),
            bid: amount,
            max_bid: amount + self.extra,
            date: self.date,
        };
        put(ops, layout.bid(self.item, item.nb_of_bids), &bid)?;
        put(ops, item_key, &item)?;
        let list_key = layout.bidding(self.user);
        let mut list: IdList = get(ops, &list_key).await?.unwrap_or_default();
        list.push_recent(self.item);
        put(ops, list_key, &list)?;
        Ok(amount)
    }
}

procedure!(StoreBid, Interaction::StoreBid);

/// PutComment: log in, show the item and the user to comment on. `None`: the login failed.
#[derive(Serialize, Deserialize)]
pub struct PutComment {
    #[serde(with = "shipped_config")]
    pub config: Arc<Config>,
    pub login: Login,
    pub item: u32,
    pub to: u32,
    #[serde(skip)]
    pub result: Option<Option<(Item, User)>>,
}

impl PutComment {
    async fn body(&self, ops: &mut dyn Ops) -> Result<Option<(Item, User)>, TxnError> {
        let layout = &self.config.layout;
        if authenticate(ops, layout, &self.login).await?.is_none() {
            return Ok(None);
        }
        let (item, _) = any_item(ops, layout, self.item).await?;
        let to: User = must(ops, &layout.user(self.to)).await?;
        Ok(Some((item, to)))
    }
}

procedure!(PutComment, Interaction::PutComment);

/// StoreComment: user `from` comments on `to` (the seller of `item`); `to`'s rating moves by the
/// comment's. The result is the comment's id.
#[derive(Serialize, Deserialize)]
pub struct StoreComment {
    #[serde(with = "shipped_config")]
    pub config: Arc<Config>,
    pub from: u32,
    pub to: u32,
    pub item: u32,
    pub rating: i32,
    pub comment: String,
    pub date: u64,
    #[serde(skip)]
    pub result: Option<u32>,
}

impl StoreComment {
    async fn body(&self, ops: &mut dyn Ops) -> Result<u32, TxnError> {
        let layout = &self.config.layout;
        let user_key = layout.user(self.to);
        let mut to: User = must(ops, &user_key).await?;
        // Numbered by the commenter's shard, which is local, not the receiving user's.
        let id = allocate(ops, layout, layout.shard_of(self.from), Table::Comments).await?;
        to.nb_comments += 1;
        to.rating += i64::from(self.rating);
        let comment = Comment {
            id,
            from_user: self.from,
            item: self.item,
            rating: self.rating,
            date: self.date,
            comment: self.comment.clone(),
        };
        put(ops, layout.comment(self.to, to.nb_comments), &comment)?;
        put(ops, user_key, &to)?;
        Ok(id)
    }
}

procedure!(StoreComment, Interaction::StoreComment);

/// SelectCategoryToSellItem: log in, list the categories. `None`: the login failed.
#[derive(Serialize, Deserialize)]
pub struct SelectCategoryToSellItem {
    #[serde(with = "shipped_config")]
    pub config: Arc<Config>,
    pub login: Login,
    #[serde(skip)]
    pub result: Option<Option<Vec<String>>>,
}

impl SelectCategoryToSellItem {
    async fn body(&self, ops: &mut dyn Ops) -> Result<Option<Vec<String>>, TxnError> {
        let c = &self.config;
        if authenticate(ops, &c.layout, &self.login).await?.is_none() {
            return Ok(None);
        }
        category_names(ops, &c.layout, c.settings.categories)
            .await
            .map(Some)
    }
}

procedure!(
    SelectCategoryToSellItem,
    Interaction::SelectCategoryToSellItem
);

/// RegisterItem: put an item up for auction, in the seller's shard: its id from the shard's
/// counter, its row, the seller's list, and the shard's category and region indexes. The result is
/// the item's id.
#[derive(Serialize, Deserialize)]
pub struct RegisterItem {
    #[serde(with = "shipped_config")]
    pub config: Arc<Config>,
    pub seller: u32,
    pub name: String,
    pub description: String,
    pub initial_price: i64,
    pub quantity: u32,
    pub reserve_price: i64,
    pub buy_now: i64,
    pub days: u64,
    pub category: u16,
    pub date: u64,
    #[serde(skip)]
    pub result: Option<u32>,
}

impl RegisterItem {
    /// The item drawn as the population's are.
    pub fn draw(config: Arc<Config>, seller: u32, date: u64, rng: &mut ChaCha8Rng) -> RegisterItem {
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
        let category = rng.random_range(1..=config.settings.categories);
        RegisterItem {
            seller,
            name: a_string(rng, 8, 20),
            description: a_string(rng, 20, 60),
            initial_price,
            quantity,
            reserve_price,
            buy_now,
            days: rng.random_range(AUCTION_DAYS),
            category,
            date,
            result: None,
            config,
        }
    }

    async fn body(&self, ops: &mut dyn Ops) -> Result<u32, TxnError> {
        let layout = &self.config.layout;
        let seller: User = must(ops, &layout.user(self.seller)).await?;
        let s = layout.shard_of(self.seller);
        let id = allocate(ops, layout, s, Table::Items).await?;
        let item = Item {
            name: self.name.clone(),
            description: self.description.clone(),
            initial_price: self.initial_price,
            quantity: self.quantity,
            reserve_price: self.reserve_price,
            buy_now: self.buy_now,
            nb_of_bids: 0,
            max_bid: 0,
            start_date: self.date,
            end_date: self.date + self.days * DAY,
            seller: self.seller,
            category: self.category,
        };
        put(ops, layout.item(id), &item)?;
        let list_key = layout.selling(self.seller);
        let mut list: IdList = get(ops, &list_key).await?.unwrap_or_default();
        list.push_recent(id);
        put(ops, list_key, &list)?;
        for list in [
            IndexList::Category {
                shard: s,
                category: self.category,
            },
            IndexList::Region {
                shard: s,
                region: seller.region,
                category: self.category,
            },
        ] {
            let head = layout.index_head(list);
            let count = get::<Id>(ops, &head).await?.map_or(0, |Id(n)| n);
            let bucket_key = layout.index_bucket(list, count / BUCKET);
            let mut bucket: IdList = get(ops, &bucket_key).await?.unwrap_or_default();
            bucket.0.push(id);
            put(ops, bucket_key, &bucket)?;
            put(ops, head, &Id(count + 1))?;
        }
        Ok(id)
    }
}

procedure!(RegisterItem, Interaction::RegisterItem);

/// RegisterUser: a new user in shard `shard` (the acting client's), unless the nickname is taken.
/// The result is the new user's id, `None` if the nickname was taken.
#[derive(Serialize, Deserialize)]
pub struct RegisterUser {
    #[serde(with = "shipped_config")]
    pub config: Arc<Config>,
    pub shard: u32,
    pub user: User,
    #[serde(skip)]
    pub result: Option<Option<u32>>,
}

impl RegisterUser {
    /// A new user registering in the shard of user `acting` (the client's home).
    pub fn draw(config: Arc<Config>, acting: u32, date: u64, rng: &mut ChaCha8Rng) -> RegisterUser {
        let (first, last) = (a_string(rng, 3, 12), a_string(rng, 3, 12));
        let user = User {
            email: format!("{first}.{last}@rubis.com"),
            firstname: first,
            lastname: last,
            nickname: format!("new{:016x}", rng.random::<u64>()),
            password: a_string(rng, 8, 12),
            rating: 0,
            balance: 0,
            creation_date: date,
            region: rng.random_range(1..=config.settings.regions),
            nb_comments: 0,
            nb_bought: 0,
        };
        RegisterUser {
            shard: config.layout.shard_of(acting),
            user,
            result: None,
            config,
        }
    }

    async fn body(&self, ops: &mut dyn Ops) -> Result<Option<u32>, TxnError> {
        let layout = &self.config.layout;
        let nickname_key = layout.nickname(&self.user.nickname);
        if get::<Id>(ops, &nickname_key).await?.is_some() {
            return Ok(None);
        }
        let id = allocate(ops, layout, self.shard, Table::Users).await?;
        put(ops, layout.user(id), &self.user)?;
        put(ops, nickname_key, &Id(id))?;
        Ok(Some(id))
    }
}

procedure!(RegisterUser, Interaction::RegisterUser);

/// What AboutMe shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AboutMePage {
    pub user: u32,
    pub comments: Vec<(Comment, String)>,
    /// Purchases of the last 30 days, newest first, with the items' names.
    pub bought: Vec<(Purchase, String)>,
    /// The items the user sells (most recent first), and whether each is still open.
    pub selling: Vec<(u32, bool)>,
    /// The items the user bid on (most recent first), and whether each is still open.
    pub bid_on: Vec<(u32, bool)>,
}

/// AboutMe: log in; the user's comments received, recent purchases, items for sale and items bid
/// on. `None`: the login failed.
#[derive(Serialize, Deserialize)]
pub struct AboutMe {
    #[serde(with = "shipped_config")]
    pub config: Arc<Config>,
    pub login: Login,
    pub date: u64,
    #[serde(skip)]
    pub result: Option<Option<AboutMePage>>,
}

impl AboutMe {
    async fn items(
        ops: &mut dyn Ops,
        layout: &Layout,
        key: &Key,
        now: u64,
    ) -> Result<Vec<(u32, bool)>, TxnError> {
        let IdList(ids) = get(ops, key).await?.unwrap_or_default();
        let mut out = Vec::with_capacity(ids.len());
        for i in ids {
            let (item, old) = any_item(ops, layout, i).await?;
            out.push((i, !old && item.open(now)));
        }
        Ok(out)
    }

    async fn body(&self, ops: &mut dyn Ops) -> Result<Option<AboutMePage>, TxnError> {
        let layout = &self.config.layout;
        let Some((u, user)) = authenticate(ops, layout, &self.login).await? else {
            return Ok(None);
        };
        let comments = comments_about(ops, layout, u, user.nb_comments).await?;
        let mut bought = Vec::new();
        for n in (1..=user.nb_bought).rev() {
            let row: Purchase = must(ops, &layout.buy_now(u, n)).await?;
            if row.date + BOUGHT_WINDOW < self.date {
                break;
            }
            let (item, _) = any_item(ops, layout, row.item).await?;
            bought.push((row, item.name));
        }
        let selling = Self::items(ops, layout, &layout.selling(u), self.date).await?;
        let bid_on = Self::items(ops, layout, &layout.bidding(u), self.date).await?;
        Ok(Some(AboutMePage {
            user: u,
            comments,
            bought,
            selling,
            bid_on,
        }))
    }
}

procedure!(AboutMe, Interaction::AboutMe);

/// The procedure `call` names, rebuilt from its arguments: what a node runs a one-shot RUBiS
/// interaction with. The static pages have names but no procedure.
pub(crate) fn instantiate(call: &ProcedureCall) -> Result<Box<dyn Procedure>, RequestError> {
    use Interaction as I;
    match Interaction::of_name(&call.procedure) {
        Some(I::BrowseCategories) => rebuild::<BrowseCategories>(call, unchecked),
        Some(I::SearchItemsInCategory) => rebuild::<SearchItemsInCategory>(call, unchecked),
        Some(I::BrowseRegions) => rebuild::<BrowseRegions>(call, unchecked),
        Some(I::BrowseCategoriesInRegion) => rebuild::<BrowseCategoriesInRegion>(call, unchecked),
        Some(I::SearchItemsInRegion) => rebuild::<SearchItemsInRegion>(call, unchecked),
        Some(I::ViewItem) => rebuild::<ViewItem>(call, unchecked),
        Some(I::ViewUserInfo) => rebuild::<ViewUserInfo>(call, unchecked),
        Some(I::ViewBidHistory) => rebuild::<ViewBidHistory>(call, unchecked),
        Some(I::BuyNow) => rebuild::<BuyNow>(call, unchecked),
        Some(I::StoreBuyNow) => rebuild::<StoreBuyNow>(call, unchecked),
        Some(I::PutBid) => rebuild::<PutBid>(call, unchecked),
        Some(I::StoreBid) => rebuild(call, StoreBid::check),
        Some(I::PutComment) => rebuild::<PutComment>(call, unchecked),
        Some(I::StoreComment) => rebuild::<StoreComment>(call, unchecked),
        Some(I::SelectCategoryToSellItem) => rebuild::<SelectCategoryToSellItem>(call, unchecked),
        Some(I::RegisterItem) => rebuild(call, RegisterItem::check),
        Some(I::RegisterUser) => rebuild(call, RegisterUser::check),
        Some(I::AboutMe) => rebuild::<AboutMe>(call, unchecked),
        Some(_) | None => Err(crate::unknown_procedure(call)),
    }
}

impl StoreBid {
    /// The raise and the extra are added to stored prices, which values no client draws could
    /// overflow.
    fn check(&self) -> Result<(), String> {
        if !BID_RAISE.contains(&self.raise) || !BID_EXTRA.contains(&self.extra) {
            return Err(format!(
                "raise {} and extra {} are not within {BID_RAISE:?} and {BID_EXTRA:?}",
                self.raise, self.extra
            ));
        }
        Ok(())
    }
}

impl RegisterItem {
    /// The end date is the start date plus the days, which must not overflow.
    fn check(&self) -> Result<(), String> {
        if !AUCTION_DAYS.contains(&self.days) || self.date > u64::MAX - AUCTION_DAYS.end() * DAY {
            return Err(format!(
                "an auction from {} for {} days (at most {})",
                self.date,
                self.days,
                AUCTION_DAYS.end()
            ));
        }
        Ok(())
    }
}

impl RegisterUser {
    /// The new user's id comes from its shard's counter.
    fn check(&self) -> Result<(), String> {
        if self.shard >= self.config.shards() {
            return Err(format!("shard {} of {}", self.shard, self.config.shards()));
        }
        Ok(())
    }
}

/// How an interaction's [`Config`] ships: the layout's shards and the numbers of categories and
/// regions, all its body reads. A config rebuilt from them has the other settings at their
/// defaults.
mod shipped_config {
    use super::Config;
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::sync::Arc;

    #[derive(Serialize, Deserialize)]
    struct Shipped {
        shards: u32,
        categories: u16,
        regions: u16,
    }

    pub(super) fn serialize<S: Serializer>(config: &Arc<Config>, s: S) -> Result<S::Ok, S::Error> {
        Shipped {
            shards: config.shards(),
            categories: config.settings.categories,
            regions: config.settings.regions,
        }
        .serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<Config>, D::Error> {
        let shipped = Shipped::deserialize(d)?;
        // A placement has one partition per node, and at most 2^16 nodes; a search reads every
        // shard's index, so an absurd count would have a body allocate without bound.
        if !(1..=1 << 16).contains(&shipped.shards) {
            return Err(D::Error::custom(format!(
                "a layout of {} shards",
                shipped.shards
            )));
        }
        Ok(Arc::new(Config::shipped(
            shipped.shards,
            shipped.categories,
            shipped.regions,
        )))
    }
}
