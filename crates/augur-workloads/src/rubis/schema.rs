//! RUBiS's tables as key-value rows, sharded as STR §8.2 ports them, plus the index rows the
//! interactions need in a store without scans or secondary indexes.
//!
//! # Shards and ids
//!
//! There are as many shards as partitions (`S`), and shard `s` is the shard tag `s`, so it lives in
//! partition `s`. Every table is partitioned horizontally by id: the row of user, item, bid,
//! comment or buy-now id `x` lives in shard `x mod S`, so each partition holds an equal portion of
//! each table (STR's modification (i)). Instead of RUBiS's `ids` table, a single row per table
//! shared by all shards, each shard keeps its own counter per table (STR's modification (ii),
//! "a local index for each table shard"): the next id it hands out, always ≡ `s` (mod `S`); an
//! insertion takes the counter's value and adds `S`, touching only its own shard.
//!
//! Ids are `u32`. The population takes users `1..=users`, old items `1..=old_items` and active
//! items after them; see [`super::load`] for the ids of its bids and comments.
//!
//! Child rows are clustered under the row that counts them, so reading them needs no index: an
//! item's bids are `B (item, 1..=nb_of_bids)` in the item's shard, a user's received comments
//! `C (user, 1..=nb_comments)` and purchases `N (user, 1..=nb_bought)` in the user's shard. Each
//! still carries its own id from its shard's counter (the shard of its parent, where it is
//! inserted). `nb_comments` and `nb_bought` are columns this port adds to USERS (StoreComment
//! updates the receiving user's rating anyway; StoreBuyNow also updates the buyer).
//!
//! # Keys
//!
//! Every key is [`Key::tagged`]`(shard, tag, big-endian columns)`. Index rows have lower-case tags.
//!
//! | table / index                      | shard          | tag | rest after the tag          | value        |
//! |------------------------------------|----------------|-----|-----------------------------|--------------|
//! | USERS                              | user           | `U` | user (u32)                  | [`User`]     |
//! | ITEMS (open and sold-out auctions) | item           | `I` | item (u32)                  | [`Item`]     |
//! | OLD_ITEMS (closed auctions)        | item           | `O` | item (u32)                  | [`Item`]     |
//! | BIDS                               | item           | `B` | item (u32), n (u32)         | [`Bid`]      |
//! | COMMENTS                           | receiving user | `C` | to_user (u32), n (u32)      | [`Comment`]  |
//! | BUY_NOW                            | buyer          | `N` | buyer (u32), n (u32)        | [`Purchase`] |
//! | CATEGORIES                         | category mod S | `T` | category (u16)              | [`Name`]     |
//! | REGIONS                            | region mod S   | `G` | region (u16)                | [`Name`]     |
//! | per-shard id counters (IDS)        | s              | `#` | table tag (u8)              | next id      |
//! | user by nickname                   | FNV(nickname)  | `n` | nickname bytes              | user id      |
//! | items a user sells                 | user           | `s` | user (u32)                  | [`IdList`]   |
//! | items a user bid on                | user           | `w` | user (u32)                  | [`IdList`]   |
//! | category index: entry count        | s              | `k` | category (u16)              | count        |
//! | category index: entries            | s              | `K` | category, bucket (u32)      | [`IdList`]   |
//! | region index: entry count          | s              | `r` | region, category (u16 each) | count        |
//! | region index: entries              | s              | `R` | region, category, bucket    | [`IdList`]   |
//!
//! The category index of shard `s` lists, in insertion order, the active items of `s` in that
//! category, [`BUCKET`] to a row: entry `e` is in bucket `e / BUCKET`. The region index does the
//! same per (region of the seller, category), for SearchItemsInRegion. Items are listed in the
//! shard where they live, so RegisterItem writes only its own shard's index; a search reads the
//! index of every shard. Entries are never removed: a search skips auctions that have ended.
//! Sellers list the items they sell and bidders the distinct items they bid on, most recent
//! first, at most [`LIST_CAP`] of each (AboutMe's page).
//!
//! # Values
//!
//! Rows are text, in the encoding of [`crate::tpcc::schema`]: columns in the order of the structs
//! below separated by `|`, integers in decimal, money in cents, dates in the workload's logical
//! milliseconds ([`super`]), id lists space-separated.

use crate::tpcc::schema::{Dec, DecodeError, Enc, Row};
use augur_types::Key;

pub use crate::tpcc::schema::Id;

/// Item ids per index row.
pub const BUCKET: u32 = 20;
/// The most entries of a seller's or bidder's list.
pub const LIST_CAP: usize = 20;

/// The tables whose ids the shards allocate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    Users,
    Items,
    Bids,
    Comments,
    BuyNow,
}

impl Table {
    pub const ALL: [Table; 5] = [
        Table::Users,
        Table::Items,
        Table::Bids,
        Table::Comments,
        Table::BuyNow,
    ];

    /// Whether a row's id comes from the shard that stores the row. Bids and comments are
    /// stored with their item and receiving user but numbered by the acting user's shard.
    pub fn numbered_where_stored(self) -> bool {
        !matches!(self, Table::Bids | Table::Comments)
    }

    fn tag(self) -> u8 {
        match self {
            Table::Users => b'U',
            Table::Items => b'I',
            Table::Bids => b'B',
            Table::Comments => b'C',
            Table::BuyNow => b'N',
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Table::Users => "users",
            Table::Items => "items",
            Table::Bids => "bids",
            Table::Comments => "comments",
            Table::BuyNow => "buy_now",
        }
    }
}

/// Where rows live, for a number of shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub shards: u32,
}

fn be32(x: u32) -> [u8; 4] {
    x.to_be_bytes()
}

impl Layout {
    pub fn new(shards: u32) -> Layout {
        assert!(shards > 0, "at least one shard");
        Layout { shards }
    }

    /// The shard of a user, item, bid, comment or buy-now id.
    pub fn shard_of(&self, id: u32) -> u32 {
        id % self.shards
    }

    /// The smallest id above `x` that shard `s` may hand out.
    pub fn next_above(&self, x: u32, s: u32) -> u32 {
        let base = x - x % self.shards + s;
        if base > x { base } else { base + self.shards }
    }

    fn with_id(&self, tag: u8, id: u32) -> Key {
        let [a, b, c, d] = be32(id);
        Key::tagged(self.shard_of(id), &[tag, a, b, c, d])
    }

    fn with_id_n(&self, tag: u8, id: u32, n: u32) -> Key {
        let [a, b, c, d] = be32(id);
        let [e, f, g, h] = be32(n);
        Key::tagged(self.shard_of(id), &[tag, a, b, c, d, e, f, g, h])
    }

    pub fn user(&self, u: u32) -> Key {
        self.with_id(b'U', u)
    }

    pub fn item(&self, i: u32) -> Key {
        self.with_id(b'I', i)
    }

    pub fn old_item(&self, i: u32) -> Key {
        self.with_id(b'O', i)
    }

    /// Item `i`'s `n`-th bid (1-based).
    pub fn bid(&self, i: u32, n: u32) -> Key {
        self.with_id_n(b'B', i, n)
    }

    /// The `n`-th comment user `u` received (1-based).
    pub fn comment(&self, u: u32, n: u32) -> Key {
        self.with_id_n(b'C', u, n)
    }

    /// User `u`'s `n`-th purchase (1-based).
    pub fn buy_now(&self, u: u32, n: u32) -> Key {
        self.with_id_n(b'N', u, n)
    }

    pub fn selling(&self, u: u32) -> Key {
        self.with_id(b's', u)
    }

    pub fn bidding(&self, u: u32) -> Key {
        self.with_id(b'w', u)
    }

    pub fn category(&self, c: u16) -> Key {
        let [a, b] = c.to_be_bytes();
        Key::tagged(u32::from(c) % self.shards, &[b'T', a, b])
    }

    pub fn region(&self, r: u16) -> Key {
        let [a, b] = r.to_be_bytes();
        Key::tagged(u32::from(r) % self.shards, &[b'G', a, b])
    }

    /// Shard `s`'s counter of `table`'s ids.
    pub fn counter(&self, s: u32, table: Table) -> Key {
        Key::tagged(s, &[b'#', table.tag()])
    }

    /// The shard of a nickname's index row: FNV-1a of its bytes.
    pub fn nickname_shard(&self, nickname: &str) -> u32 {
        let mut h: u32 = 0x811c_9dc5;
        for b in nickname.bytes() {
            h ^= u32::from(b);
            h = h.wrapping_mul(0x0100_0193);
        }
        h % self.shards
    }

    pub fn nickname(&self, nickname: &str) -> Key {
        let mut rest = Vec::with_capacity(1 + nickname.len());
        rest.push(b'n');
        rest.extend_from_slice(nickname.as_bytes());
        Key::tagged(self.nickname_shard(nickname), &rest)
    }

    pub fn category_head(&self, s: u32, c: u16) -> Key {
        let [a, b] = c.to_be_bytes();
        Key::tagged(s, &[b'k', a, b])
    }

    pub fn category_bucket(&self, s: u32, c: u16, bucket: u32) -> Key {
        let [a, b] = c.to_be_bytes();
        let [e, f, g, h] = be32(bucket);
        Key::tagged(s, &[b'K', a, b, e, f, g, h])
    }

    pub fn region_head(&self, s: u32, r: u16, c: u16) -> Key {
        let ([a, b], [e, f]) = (r.to_be_bytes(), c.to_be_bytes());
        Key::tagged(s, &[b'r', a, b, e, f])
    }

    pub fn region_bucket(&self, s: u32, r: u16, c: u16, bucket: u32) -> Key {
        let ([a, b], [e, f]) = (r.to_be_bytes(), c.to_be_bytes());
        let [g, h, i, j] = be32(bucket);
        Key::tagged(s, &[b'R', a, b, e, f, g, h, i, j])
    }

    /// The head and bucket keys of an index list.
    pub fn index_head(&self, list: IndexList) -> Key {
        match list {
            IndexList::Category { shard, category } => self.category_head(shard, category),
            IndexList::Region {
                shard,
                region,
                category,
            } => self.region_head(shard, region, category),
        }
    }

    pub fn index_bucket(&self, list: IndexList, bucket: u32) -> Key {
        match list {
            IndexList::Category { shard, category } => {
                self.category_bucket(shard, category, bucket)
            }
            IndexList::Region {
                shard,
                region,
                category,
            } => self.region_bucket(shard, region, category, bucket),
        }
    }
}

/// One list of the search indexes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IndexList {
    /// Shard `shard`'s active items of `category`.
    Category { shard: u32, category: u16 },
    /// Shard `shard`'s active items of `category` whose seller lives in `region`.
    Region {
        shard: u32,
        region: u16,
        category: u16,
    },
}

/// USERS (the id is the key), plus the counts of the rows clustered under it. Serde gives the
/// form RegisterUser ships the new user in (a one-shot call's arguments), not the row's.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct User {
    pub firstname: String,
    pub lastname: String,
    pub nickname: String,
    pub password: String,
    pub email: String,
    /// The sum of the ratings of the comments the user received.
    pub rating: i64,
    /// In cents.
    pub balance: i64,
    pub creation_date: u64,
    pub region: u16,
    /// Comments received: rows `C (user, 1..=nb_comments)` (not a RUBiS column).
    pub nb_comments: u32,
    /// Purchases: rows `N (user, 1..=nb_bought)` (not a RUBiS column).
    pub nb_bought: u32,
}

impl Row for User {
    const TABLE: &'static str = "USERS";

    fn write(&self, enc: &mut Enc) {
        enc.text(&self.firstname)
            .text(&self.lastname)
            .text(&self.nickname)
            .text(&self.password)
            .text(&self.email)
            .field(self.rating)
            .field(self.balance)
            .field(self.creation_date)
            .field(self.region)
            .field(self.nb_comments)
            .field(self.nb_bought);
    }

    fn read(dec: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(User {
            firstname: dec.text()?.into(),
            lastname: dec.text()?.into(),
            nickname: dec.text()?.into(),
            password: dec.text()?.into(),
            email: dec.text()?.into(),
            rating: dec.num()?,
            balance: dec.num()?,
            creation_date: dec.num()?,
            region: dec.num()?,
            nb_comments: dec.num()?,
            nb_bought: dec.num()?,
        })
    }
}

/// ITEMS and OLD_ITEMS (the id is the key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub name: String,
    pub description: String,
    /// Prices in cents.
    pub initial_price: i64,
    pub quantity: u32,
    /// 0: none.
    pub reserve_price: i64,
    /// 0: not for immediate sale.
    pub buy_now: i64,
    pub nb_of_bids: u32,
    /// The highest bid (0 without bids).
    pub max_bid: i64,
    pub start_date: u64,
    /// The auction is open while `end_date >= now`; StoreBuyNow sets it to now when the last unit
    /// sells.
    pub end_date: u64,
    pub seller: u32,
    pub category: u16,
}

impl Item {
    /// Whether the auction is still open at `now`.
    pub fn open(&self, now: u64) -> bool {
        self.end_date >= now
    }
}

impl Row for Item {
    const TABLE: &'static str = "ITEMS";

    fn write(&self, enc: &mut Enc) {
        enc.text(&self.name)
            .text(&self.description)
            .field(self.initial_price)
            .field(self.quantity)
            .field(self.reserve_price)
            .field(self.buy_now)
            .field(self.nb_of_bids)
            .field(self.max_bid)
            .field(self.start_date)
            .field(self.end_date)
            .field(self.seller)
            .field(self.category);
    }

    fn read(dec: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(Item {
            name: dec.text()?.into(),
            description: dec.text()?.into(),
            initial_price: dec.num()?,
            quantity: dec.num()?,
            reserve_price: dec.num()?,
            buy_now: dec.num()?,
            nb_of_bids: dec.num()?,
            max_bid: dec.num()?,
            start_date: dec.num()?,
            end_date: dec.num()?,
            seller: dec.num()?,
            category: dec.num()?,
        })
    }
}

/// BIDS ((item, n) is the key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bid {
    pub id: u32,
    pub user: u32,
    pub qty: u32,
    /// In cents.
    pub bid: i64,
    /// The most the bidder would go to, in cents.
    pub max_bid: i64,
    pub date: u64,
}

impl Row for Bid {
    const TABLE: &'static str = "BIDS";

    fn write(&self, enc: &mut Enc) {
        enc.field(self.id)
            .field(self.user)
            .field(self.qty)
            .field(self.bid)
            .field(self.max_bid)
            .field(self.date);
    }

    fn read(dec: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(Bid {
            id: dec.num()?,
            user: dec.num()?,
            qty: dec.num()?,
            bid: dec.num()?,
            max_bid: dec.num()?,
            date: dec.num()?,
        })
    }
}

/// COMMENTS ((to_user, n) is the key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Comment {
    pub id: u32,
    pub from_user: u32,
    pub item: u32,
    /// One of -5, -3, 0, 3, 5.
    pub rating: i32,
    pub date: u64,
    pub comment: String,
}

impl Row for Comment {
    const TABLE: &'static str = "COMMENTS";

    fn write(&self, enc: &mut Enc) {
        enc.field(self.id)
            .field(self.from_user)
            .field(self.item)
            .field(self.rating)
            .field(self.date)
            .text(&self.comment);
    }

    fn read(dec: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(Comment {
            id: dec.num()?,
            from_user: dec.num()?,
            item: dec.num()?,
            rating: dec.num()?,
            date: dec.num()?,
            comment: dec.text()?.into(),
        })
    }
}

/// BUY_NOW ((buyer, n) is the key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Purchase {
    pub id: u32,
    pub item: u32,
    pub qty: u32,
    pub date: u64,
}

impl Row for Purchase {
    const TABLE: &'static str = "BUY_NOW";

    fn write(&self, enc: &mut Enc) {
        enc.field(self.id)
            .field(self.item)
            .field(self.qty)
            .field(self.date);
    }

    fn read(dec: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(Purchase {
            id: dec.num()?,
            item: dec.num()?,
            qty: dec.num()?,
            date: dec.num()?,
        })
    }
}

/// CATEGORIES and REGIONS: a name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Name(pub String);

impl Row for Name {
    const TABLE: &'static str = "CATEGORIES/REGIONS";

    fn write(&self, enc: &mut Enc) {
        enc.text(&self.0);
    }

    fn read(dec: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(Name(dec.text()?.into()))
    }
}

/// An index row: space-separated ids.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IdList(pub Vec<u32>);

impl IdList {
    /// Put `id` first, dropping an older occurrence and anything past [`LIST_CAP`].
    pub fn push_recent(&mut self, id: u32) {
        self.0.retain(|x| *x != id);
        self.0.insert(0, id);
        self.0.truncate(LIST_CAP);
    }
}

impl Row for IdList {
    const TABLE: &'static str = "index";

    fn write(&self, enc: &mut Enc) {
        let ids: Vec<String> = self.0.iter().map(u32::to_string).collect();
        enc.text(&ids.join(" "));
    }

    fn read(dec: &mut Dec<'_>) -> Result<Self, DecodeError> {
        let text = dec.text()?;
        let ids: Result<Vec<u32>, _> = text.split_ascii_whitespace().map(str::parse).collect();
        ids.map(IdList).map_err(|e| DecodeError {
            table: Self::TABLE,
            why: format!("'{text}': {e}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<R: Row + PartialEq + std::fmt::Debug>(row: R) -> String {
        let value = row.encode();
        assert_eq!(R::decode(&value).unwrap(), row);
        String::from_utf8(value.to_vec()).unwrap()
    }

    #[test]
    fn rows_round_trip_as_text() {
        let u = User {
            firstname: "Great1".into(),
            lastname: "User1".into(),
            nickname: "user1".into(),
            password: "password1".into(),
            email: "Great1.User1@rubis.com".into(),
            rating: -3,
            balance: 0,
            creation_date: 5,
            region: 7,
            nb_comments: 1,
            nb_bought: 0,
        };
        assert_eq!(
            round_trip(u),
            "Great1|User1|user1|password1|Great1.User1@rubis.com|-3|0|5|7|1|0"
        );
        round_trip(Item {
            name: "n".into(),
            description: "d".into(),
            initial_price: 100,
            quantity: 1,
            reserve_price: 0,
            buy_now: 0,
            nb_of_bids: 0,
            max_bid: 0,
            start_date: 1,
            end_date: 2,
            seller: 3,
            category: 4,
        });
        round_trip(Bid {
            id: 9,
            user: 1,
            qty: 1,
            bid: 150,
            max_bid: 200,
            date: 3,
        });
        round_trip(Comment {
            id: 9,
            from_user: 1,
            item: 2,
            rating: -5,
            date: 3,
            comment: "bad".into(),
        });
        round_trip(Purchase {
            id: 1,
            item: 2,
            qty: 3,
            date: 4,
        });
        assert_eq!(round_trip(IdList(vec![3, 1])), "3 1");
        assert_eq!(round_trip(IdList(vec![])), "");
        assert!(IdList::decode(b"1 x").is_err());
    }

    #[test]
    fn recent_lists_stay_distinct_and_bounded() {
        let mut l = IdList(vec![3, 2, 1]);
        l.push_recent(2);
        assert_eq!(l.0, [2, 3, 1]);
        for i in 10..40 {
            l.push_recent(i);
        }
        assert_eq!(l.0.len(), LIST_CAP);
        assert_eq!(l.0[0], 39);
    }

    #[test]
    fn ids_map_to_their_shards() {
        let l = Layout::new(3);
        assert_eq!(l.user(7).shard(), 1);
        assert_eq!(l.bid(7, 1).shard(), 1);
        assert_eq!(l.comment(6, 2).shard(), 0);
        assert!(l.bid(7, 1) < l.bid(7, 2));
        assert_eq!(l.next_above(10, 0), 12);
        assert_eq!(l.next_above(10, 1), 13);
        assert_eq!(l.next_above(10, 2), 11);
        assert_eq!(l.next_above(0, 0), 3);
        assert_eq!(l.next_above(0, 2), 2);
        assert_ne!(l.counter(0, Table::Users), l.counter(0, Table::Items));
        assert_eq!(l.nickname("user1").shard(), l.nickname_shard("user1"));
        assert!(l.bid(1, 1).as_bytes().len() <= 16);
        assert!(l.region_bucket(1, 62, 20, 9).as_bytes().len() <= 16);
        let one = Layout::new(1);
        assert_eq!(one.next_above(5, 0), 6);
    }
}
