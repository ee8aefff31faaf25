//! The nine tables of TPC-C (Clause 1.3) as key-value rows, plus the index rows the
//! transactions need in a store without scans or secondary indexes.
//!
//! # Keys
//!
//! Every key is [`Key::tagged`]`(w, rest)`: the shard tag is the warehouse number, so all the rows
//! of warehouse `w` live in partition `w mod partitions`. `rest` is a one-byte table tag followed
//! by the big-endian primary-key columns below the warehouse (big-endian so that a sorted store
//! keeps a district's orders in order). Index rows have lower-case tags.
//!
//! | table / index          | tag | rest after the tag        | value                          |
//! |------------------------|-----|---------------------------|--------------------------------|
//! | WAREHOUSE              | `W` | —                         | [`Warehouse`]                  |
//! | DISTRICT               | `D` | D_ID (u8)                 | [`District`]                   |
//! | CUSTOMER               | `C` | D_ID (u8), C_ID (u16)     | [`Customer`]                   |
//! | HISTORY                | `H` | H_D_ID (u8), seq (u32)    | [`History`]                    |
//! | ORDER                  | `O` | D_ID (u8), O_ID (u32)     | [`Order`]                      |
//! | NEW-ORDER              | `N` | D_ID (u8), O_ID (u32)     | NO_O_ID in decimal             |
//! | ORDER-LINE             | `L` | D_ID, O_ID, OL_NUMBER (u8)| [`OrderLine`]                  |
//! | ITEM (one copy per W)  | `I` | I_ID (u32)                | [`Item`]                       |
//! | STOCK                  | `S` | I_ID (u32)                | [`Stock`]                      |
//! | customers by last name | `n` | D_ID (u8), name no. (u16) | C_IDs sorted by C_FIRST        |
//! | customer's last order  | `o` | D_ID (u8), C_ID (u16)     | the customer's largest O_ID    |
//! | oldest new order       | `q` | D_ID (u8)                 | the district's lowest NO_O_ID  |
//!
//! HISTORY has no primary key (Clause 1.3); its rows are numbered per paying district (H_W_ID,
//! H_D_ID) by a counter kept in the DISTRICT row (`next_h_id`), which Payment updates anyway, so
//! numbering them adds no contention. ITEM is read-only and the same for every warehouse, so it is
//! replicated: each warehouse's shard holds a full copy, loaded with the warehouse, and New-Order
//! reads items from its home warehouse's partition.
//!
//! A customer's last name is always one of the thousand names [`super::random::last_name`] builds
//! from a number in 0..=999, so the last-name index is keyed by that number. C_FIRST and C_LAST
//! never change after the load, so the index is written once and only read afterwards.
//!
//! # Values
//!
//! Rows are text: the columns in the order of the structs below, separated by `|`; integers in
//! decimal; money in cents (`-1000` is -10.00); tax and discount rates in ten-thousandths (`1500`
//! is 0.1500); dates as the workload's logical clock ([`super`]'s docs); a null (O_CARRIER_ID
//! before delivery, OL_DELIVERY_D) as the empty field. Text keeps rows readable in histories and
//! test logs; every string column is alphanumeric or spaces, so `|` never occurs inside one.
//! The key columns are in the key and not repeated in the value, except HISTORY's, which has no
//! key of its own.

use augur_types::{Key, Value};
use bytes::Bytes;
use std::fmt::{Display, Write};
use std::str::FromStr;

/// Districts per warehouse (Clause 4.3.3.1).
pub const DISTRICTS: u8 = 10;
/// The fewest and most lines of an order (Clause 2.4.1.3).
pub const MIN_OL: u8 = 5;
pub const MAX_OL: u8 = 15;

pub fn warehouse_key(w: u32) -> Key {
    Key::tagged(w, b"W")
}

pub fn district_key(w: u32, d: u8) -> Key {
    Key::tagged(w, &[b'D', d])
}

pub fn customer_key(w: u32, d: u8, c: u16) -> Key {
    let [hi, lo] = c.to_be_bytes();
    Key::tagged(w, &[b'C', d, hi, lo])
}

pub fn history_key(w: u32, d: u8, seq: u32) -> Key {
    with_u32(w, b'H', d, seq)
}

pub fn order_key(w: u32, d: u8, o: u32) -> Key {
    with_u32(w, b'O', d, o)
}

pub fn new_order_key(w: u32, d: u8, o: u32) -> Key {
    with_u32(w, b'N', d, o)
}

pub fn order_line_key(w: u32, d: u8, o: u32, number: u8) -> Key {
    let [a, b, c, e] = o.to_be_bytes();
    Key::tagged(w, &[b'L', d, a, b, c, e, number])
}

/// An ITEM row of warehouse `w`'s copy of the table.
pub fn item_key(w: u32, i: u32) -> Key {
    let [a, b, c, e] = i.to_be_bytes();
    Key::tagged(w, &[b'I', a, b, c, e])
}

pub fn stock_key(w: u32, i: u32) -> Key {
    let [a, b, c, e] = i.to_be_bytes();
    Key::tagged(w, &[b'S', a, b, c, e])
}

/// The customers of district (w, d) whose C_LAST is [`super::random::last_name`]`(name)`.
pub fn name_index_key(w: u32, d: u8, name: u16) -> Key {
    let [hi, lo] = name.to_be_bytes();
    Key::tagged(w, &[b'n', d, hi, lo])
}

/// The O_ID of customer (w, d, c)'s most recent order.
pub fn last_order_key(w: u32, d: u8, c: u16) -> Key {
    let [hi, lo] = c.to_be_bytes();
    Key::tagged(w, &[b'o', d, hi, lo])
}

/// The lowest NO_O_ID of district (w, d): where Delivery looks first.
pub fn new_order_head_key(w: u32, d: u8) -> Key {
    Key::tagged(w, &[b'q', d])
}

/// The district row that guards `key` when `key` is a row keyed by one of that district's
/// counters: ORDER, NEW-ORDER and ORDER-LINE (by D_NEXT_O_ID) and HISTORY (by the district's
/// history counter). A protocol that locks before it runs (`calvin`) locks those rows through
/// the district's, which every transaction that numbers them writes: New-Order's and Payment's
/// locks are then known from their arguments, as in the Sparkle paper, where both are
/// independent transactions. Any other key (of any workload: numbered keys are longer) has none.
pub fn counter_guard(key: &Key) -> Option<Key> {
    let rest = key.as_bytes().get(4..)?;
    let counted = matches!(
        (rest.first(), rest.len()),
        (Some(b'O' | b'N' | b'H'), 6) | (Some(b'L'), 7)
    );
    counted.then(|| district_key(key.shard(), rest[1]))
}

fn with_u32(w: u32, tag: u8, d: u8, id: u32) -> Key {
    let [a, b, c, e] = id.to_be_bytes();
    Key::tagged(w, &[tag, d, a, b, c, e])
}

/// Why a stored value is not a row of the table it was read from.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed {table} row: {why}")]
pub struct DecodeError {
    pub table: &'static str,
    pub why: String,
}

/// Builds a row's text, one field at a time.
pub struct Enc {
    text: String,
    fields: usize,
}

impl Enc {
    fn new() -> Enc {
        Enc {
            text: String::with_capacity(64),
            fields: 0,
        }
    }

    fn sep(&mut self) {
        if self.fields > 0 {
            self.text.push('|');
        }
        self.fields += 1;
    }

    pub fn field(&mut self, value: impl Display) -> &mut Enc {
        self.sep();
        write!(self.text, "{value}").expect("writing to a String cannot fail");
        self
    }

    /// A string column; it must not hold the separator (generated strings never do).
    pub fn text(&mut self, value: &str) -> &mut Enc {
        debug_assert!(!value.contains('|'), "{value:?} holds the field separator");
        self.sep();
        self.text.push_str(value);
        self
    }

    /// A nullable column: null is the empty field.
    pub fn opt(&mut self, value: Option<impl Display>) -> &mut Enc {
        match value {
            Some(v) => self.field(v),
            None => {
                self.sep();
                self
            }
        }
    }
}

/// Reads a row's fields in order.
pub struct Dec<'a> {
    table: &'static str,
    fields: std::str::Split<'a, char>,
    /// The 1-based number of the last field taken, for error messages.
    at: usize,
}

impl<'a> Dec<'a> {
    fn new(table: &'static str, value: &'a [u8]) -> Result<Dec<'a>, DecodeError> {
        let text = std::str::from_utf8(value).map_err(|e| DecodeError {
            table,
            why: e.to_string(),
        })?;
        Ok(Dec {
            table,
            fields: text.split('|'),
            at: 0,
        })
    }

    fn error(&self, why: impl Display) -> DecodeError {
        DecodeError {
            table: self.table,
            why: format!("field {}: {why}", self.at),
        }
    }

    pub fn text(&mut self) -> Result<&'a str, DecodeError> {
        self.at += 1;
        self.fields
            .next()
            .ok_or_else(|| self.error("missing (too few fields)"))
    }

    pub fn num<T: FromStr>(&mut self) -> Result<T, DecodeError>
    where
        T::Err: Display,
    {
        let text = self.text()?;
        text.parse()
            .map_err(|e| self.error(format_args!("'{text}': {e}")))
    }

    /// A nullable column (the empty field is null).
    pub fn opt<T: FromStr>(&mut self) -> Result<Option<T>, DecodeError>
    where
        T::Err: Display,
    {
        let text = self.text()?;
        if text.is_empty() {
            return Ok(None);
        }
        text.parse()
            .map(Some)
            .map_err(|e| self.error(format_args!("'{text}': {e}")))
    }

    fn end(mut self) -> Result<(), DecodeError> {
        match self.fields.next() {
            None => Ok(()),
            Some(_) => {
                self.at += 1;
                Err(self.error("unexpected (too many fields)"))
            }
        }
    }
}

/// A table's row type and its text encoding.
pub trait Row: Sized + Send {
    /// The table's name, for error messages.
    const TABLE: &'static str;
    fn write(&self, enc: &mut Enc);
    fn read(dec: &mut Dec<'_>) -> Result<Self, DecodeError>;

    fn encode(&self) -> Value {
        let mut enc = Enc::new();
        self.write(&mut enc);
        Bytes::from(enc.text)
    }

    fn decode(value: &[u8]) -> Result<Self, DecodeError> {
        let mut dec = Dec::new(Self::TABLE, value)?;
        let row = Self::read(&mut dec)?;
        dec.end()?;
        Ok(row)
    }
}

/// A street address, as WAREHOUSE, DISTRICT and CUSTOMER hold it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Address {
    pub street_1: String,
    pub street_2: String,
    pub city: String,
    pub state: String,
    pub zip: String,
}

impl Address {
    fn write(&self, enc: &mut Enc) {
        enc.text(&self.street_1)
            .text(&self.street_2)
            .text(&self.city)
            .text(&self.state)
            .text(&self.zip);
    }

    fn read(dec: &mut Dec<'_>) -> Result<Address, DecodeError> {
        Ok(Address {
            street_1: dec.text()?.into(),
            street_2: dec.text()?.into(),
            city: dec.text()?.into(),
            state: dec.text()?.into(),
            zip: dec.text()?.into(),
        })
    }
}

/// WAREHOUSE (W_ID is the key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warehouse {
    pub name: String,
    pub address: Address,
    /// W_TAX in ten-thousandths.
    pub tax: u32,
    /// W_YTD in cents.
    pub ytd: i64,
}

impl Row for Warehouse {
    const TABLE: &'static str = "WAREHOUSE";

    fn write(&self, enc: &mut Enc) {
        enc.text(&self.name);
        self.address.write(enc);
        enc.field(self.tax).field(self.ytd);
    }

    fn read(dec: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(Warehouse {
            name: dec.text()?.into(),
            address: Address::read(dec)?,
            tax: dec.num()?,
            ytd: dec.num()?,
        })
    }
}

/// DISTRICT ((D_W_ID, D_ID) is the key), plus the HISTORY row counter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct District {
    pub name: String,
    pub address: Address,
    /// D_TAX in ten-thousandths.
    pub tax: u32,
    /// D_YTD in cents.
    pub ytd: i64,
    pub next_o_id: u32,
    /// The number the next HISTORY row paid at this district gets (not a TPC-C column).
    pub next_h_id: u32,
}

impl Row for District {
    const TABLE: &'static str = "DISTRICT";

    fn write(&self, enc: &mut Enc) {
        enc.text(&self.name);
        self.address.write(enc);
        enc.field(self.tax)
            .field(self.ytd)
            .field(self.next_o_id)
            .field(self.next_h_id);
    }

    fn read(dec: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(District {
            name: dec.text()?.into(),
            address: Address::read(dec)?,
            tax: dec.num()?,
            ytd: dec.num()?,
            next_o_id: dec.num()?,
            next_h_id: dec.num()?,
        })
    }
}

/// CUSTOMER ((C_W_ID, C_D_ID, C_ID) is the key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Customer {
    pub first: String,
    pub middle: String,
    pub last: String,
    pub address: Address,
    pub phone: String,
    pub since: u64,
    /// "GC" (good) or "BC" (bad credit).
    pub credit: String,
    /// C_CREDIT_LIM in cents.
    pub credit_lim: i64,
    /// C_DISCOUNT in ten-thousandths.
    pub discount: u32,
    /// C_BALANCE in cents.
    pub balance: i64,
    /// C_YTD_PAYMENT in cents.
    pub ytd_payment: i64,
    pub payment_cnt: u32,
    pub delivery_cnt: u32,
    pub data: String,
}

impl Row for Customer {
    const TABLE: &'static str = "CUSTOMER";

    fn write(&self, enc: &mut Enc) {
        enc.text(&self.first).text(&self.middle).text(&self.last);
        self.address.write(enc);
        enc.text(&self.phone)
            .field(self.since)
            .text(&self.credit)
            .field(self.credit_lim)
            .field(self.discount)
            .field(self.balance)
            .field(self.ytd_payment)
            .field(self.payment_cnt)
            .field(self.delivery_cnt)
            .text(&self.data);
    }

    fn read(dec: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(Customer {
            first: dec.text()?.into(),
            middle: dec.text()?.into(),
            last: dec.text()?.into(),
            address: Address::read(dec)?,
            phone: dec.text()?.into(),
            since: dec.num()?,
            credit: dec.text()?.into(),
            credit_lim: dec.num()?,
            discount: dec.num()?,
            balance: dec.num()?,
            ytd_payment: dec.num()?,
            payment_cnt: dec.num()?,
            delivery_cnt: dec.num()?,
            data: dec.text()?.into(),
        })
    }
}

/// HISTORY: every column, since the table has no key of its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct History {
    pub c_id: u16,
    pub c_d_id: u8,
    pub c_w_id: u32,
    pub d_id: u8,
    pub w_id: u32,
    pub date: u64,
    /// H_AMOUNT in cents.
    pub amount: i64,
    pub data: String,
}

impl Row for History {
    const TABLE: &'static str = "HISTORY";

    fn write(&self, enc: &mut Enc) {
        enc.field(self.c_id)
            .field(self.c_d_id)
            .field(self.c_w_id)
            .field(self.d_id)
            .field(self.w_id)
            .field(self.date)
            .field(self.amount)
            .text(&self.data);
    }

    fn read(dec: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(History {
            c_id: dec.num()?,
            c_d_id: dec.num()?,
            c_w_id: dec.num()?,
            d_id: dec.num()?,
            w_id: dec.num()?,
            date: dec.num()?,
            amount: dec.num()?,
            data: dec.text()?.into(),
        })
    }
}

/// ORDER ((O_W_ID, O_D_ID, O_ID) is the key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Order {
    pub c_id: u16,
    pub entry_d: u64,
    /// Null until the order is delivered.
    pub carrier_id: Option<u8>,
    pub ol_cnt: u8,
    pub all_local: bool,
}

impl Row for Order {
    const TABLE: &'static str = "ORDER";

    fn write(&self, enc: &mut Enc) {
        enc.field(self.c_id)
            .field(self.entry_d)
            .opt(self.carrier_id)
            .field(self.ol_cnt)
            .field(u8::from(self.all_local));
    }

    fn read(dec: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(Order {
            c_id: dec.num()?,
            entry_d: dec.num()?,
            carrier_id: dec.opt()?,
            ol_cnt: dec.num()?,
            all_local: dec.num::<u8>()? != 0,
        })
    }
}

/// ORDER-LINE ((OL_W_ID, OL_D_ID, OL_O_ID, OL_NUMBER) is the key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderLine {
    pub i_id: u32,
    pub supply_w_id: u32,
    /// Null until the order is delivered.
    pub delivery_d: Option<u64>,
    pub quantity: u8,
    /// OL_AMOUNT in cents.
    pub amount: i64,
    pub dist_info: String,
}

impl Row for OrderLine {
    const TABLE: &'static str = "ORDER-LINE";

    fn write(&self, enc: &mut Enc) {
        enc.field(self.i_id)
            .field(self.supply_w_id)
            .opt(self.delivery_d)
            .field(self.quantity)
            .field(self.amount)
            .text(&self.dist_info);
    }

    fn read(dec: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(OrderLine {
            i_id: dec.num()?,
            supply_w_id: dec.num()?,
            delivery_d: dec.opt()?,
            quantity: dec.num()?,
            amount: dec.num()?,
            dist_info: dec.text()?.into(),
        })
    }
}

/// ITEM (I_ID is the key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub im_id: u32,
    pub name: String,
    /// I_PRICE in cents.
    pub price: i64,
    pub data: String,
}

impl Row for Item {
    const TABLE: &'static str = "ITEM";

    fn write(&self, enc: &mut Enc) {
        enc.field(self.im_id)
            .text(&self.name)
            .field(self.price)
            .text(&self.data);
    }

    fn read(dec: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(Item {
            im_id: dec.num()?,
            name: dec.text()?.into(),
            price: dec.num()?,
            data: dec.text()?.into(),
        })
    }
}

/// STOCK ((S_W_ID, S_I_ID) is the key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stock {
    pub quantity: i32,
    /// S_DIST_01 ..= S_DIST_10.
    pub dist: [String; DISTRICTS as usize],
    pub ytd: u64,
    pub order_cnt: u32,
    pub remote_cnt: u32,
    pub data: String,
}

impl Row for Stock {
    const TABLE: &'static str = "STOCK";

    fn write(&self, enc: &mut Enc) {
        enc.field(self.quantity);
        for d in &self.dist {
            enc.text(d);
        }
        enc.field(self.ytd)
            .field(self.order_cnt)
            .field(self.remote_cnt)
            .text(&self.data);
    }

    fn read(dec: &mut Dec<'_>) -> Result<Self, DecodeError> {
        let quantity = dec.num()?;
        let mut dist: [String; DISTRICTS as usize] = Default::default();
        for d in &mut dist {
            *d = dec.text()?.into();
        }
        Ok(Stock {
            quantity,
            dist,
            ytd: dec.num()?,
            order_cnt: dec.num()?,
            remote_cnt: dec.num()?,
            data: dec.text()?.into(),
        })
    }
}

/// An index row holding one number: NEW-ORDER's NO_O_ID, a customer's last O_ID, a district's
/// oldest NO_O_ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Id(pub u32);

impl Row for Id {
    const TABLE: &'static str = "index";

    fn write(&self, enc: &mut Enc) {
        enc.field(self.0);
    }

    fn read(dec: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(Id(dec.num()?))
    }
}

/// A last-name index row: the district's customers with that name, sorted by C_FIRST (then
/// C_ID), as space-separated C_IDs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameIndex(pub Vec<u16>);

impl Row for NameIndex {
    const TABLE: &'static str = "last-name index";

    fn write(&self, enc: &mut Enc) {
        let ids: Vec<String> = self.0.iter().map(u16::to_string).collect();
        enc.text(&ids.join(" "));
    }

    fn read(dec: &mut Dec<'_>) -> Result<Self, DecodeError> {
        let text = dec.text()?;
        let ids: Result<Vec<u16>, _> = text.split_ascii_whitespace().map(str::parse).collect();
        ids.map(NameIndex)
            .map_err(|e| dec.error(format_args!("'{text}': {e}")))
    }
}

/// An amount of cents as TPC-C prints money: `-10.00`.
pub fn money(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let abs = cents.unsigned_abs();
    format!("{sign}{}.{:02}", abs / 100, abs % 100)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address() -> Address {
        Address {
            street_1: "Street1".into(),
            street_2: "Street2".into(),
            city: "City".into(),
            state: "ST".into(),
            zip: "123411111".into(),
        }
    }

    fn round_trip<R: Row + PartialEq + std::fmt::Debug>(row: R) -> String {
        let value = row.encode();
        assert_eq!(R::decode(&value).unwrap(), row);
        String::from_utf8(value.to_vec()).unwrap()
    }

    #[test]
    fn rows_round_trip_as_readable_text() {
        let w = Warehouse {
            name: "W1".into(),
            address: address(),
            tax: 1234,
            ytd: 30_000_000,
        };
        assert_eq!(
            round_trip(w),
            "W1|Street1|Street2|City|ST|123411111|1234|30000000"
        );
        let o = Order {
            c_id: 7,
            entry_d: 1,
            carrier_id: None,
            ol_cnt: 5,
            all_local: true,
        };
        assert_eq!(round_trip(o.clone()), "7|1||5|1");
        round_trip(Order {
            carrier_id: Some(3),
            all_local: false,
            ..o
        });
        round_trip(OrderLine {
            i_id: 9,
            supply_w_id: 2,
            delivery_d: Some(4),
            quantity: 5,
            amount: 0,
            dist_info: "x".into(),
        });
        round_trip(Customer {
            first: "F".into(),
            middle: "OE".into(),
            last: "BARBARBAR".into(),
            address: address(),
            phone: "0123456789012345".into(),
            since: 1,
            credit: "BC".into(),
            credit_lim: 5_000_000,
            discount: 4999,
            balance: -1000,
            ytd_payment: 1000,
            payment_cnt: 1,
            delivery_cnt: 0,
            data: "1 2 3 4 5 6.00 abc".into(),
        });
        round_trip(History {
            c_id: 1,
            c_d_id: 2,
            c_w_id: 3,
            d_id: 4,
            w_id: 5,
            date: 6,
            amount: 7,
            data: "W    D".into(),
        });
        round_trip(Stock {
            quantity: 17,
            dist: std::array::from_fn(|i| format!("d{i}")),
            ytd: 0,
            order_cnt: 0,
            remote_cnt: 0,
            data: "ORIGINAL".into(),
        });
        assert_eq!(round_trip(NameIndex(vec![3, 1, 2])), "3 1 2");
        assert_eq!(round_trip(Id(2101)), "2101");
    }

    #[test]
    fn rows_numbered_by_a_district_counter_are_guarded_by_the_district() {
        let district = district_key(7, 3);
        for key in [
            order_key(7, 3, 3001),
            new_order_key(7, 3, 3001),
            order_line_key(7, 3, 3001, 5),
            history_key(7, 3, 12),
        ] {
            assert_eq!(counter_guard(&key), Some(district.clone()), "{key}");
        }
        for key in [
            district.clone(),
            warehouse_key(7),
            customer_key(7, 3, 5),
            stock_key(7, 5),
            item_key(7, 5),
            last_order_key(7, 3, 5),
            new_order_head_key(7, 3),
            Key::numbered(7, u64::from_be_bytes(*b"O\x03\0\0\0\x01\0\0")),
        ] {
            assert_eq!(counter_guard(&key), None, "{key}");
        }
    }

    #[test]
    fn malformed_rows_are_refused_with_the_table_and_field() {
        let e = Order::decode(b"7|1||5").unwrap_err();
        assert_eq!(e.table, "ORDER");
        assert!(e.why.contains("field 5"), "{e}");
        let e = Order::decode(b"7|1||5|1|9").unwrap_err();
        assert!(e.why.contains("too many"), "{e}");
        let e = Id::decode(b"x").unwrap_err();
        assert_eq!(
            e.to_string(),
            "malformed index row: field 1: 'x': invalid digit found in string"
        );
        assert!(NameIndex::decode(b"1 2 x").is_err());
    }

    #[test]
    fn keys_carry_the_warehouse_and_sort_by_id() {
        assert_eq!(order_key(7, 3, 2101).shard(), 7);
        assert!(order_key(1, 3, 255) < order_key(1, 3, 256));
        assert!(order_line_key(1, 3, 255, 15) < order_line_key(1, 3, 256, 1));
        assert_ne!(order_key(1, 3, 5), new_order_key(1, 3, 5));
        assert_ne!(customer_key(1, 1, 1), last_order_key(1, 1, 1));
        assert_eq!(warehouse_key(2).to_string(), "2/W");
        // Compact enough to be stored inline (16 bytes).
        assert!(order_line_key(1, 1, 1, 1).as_bytes().len() <= 16);
    }

    #[test]
    fn money_prints_like_the_specification() {
        assert_eq!(money(-1000), "-10.00");
        assert_eq!(money(30_000_000), "300000.00");
        assert_eq!(money(5), "0.05");
        assert_eq!(money(-5), "-0.05");
    }
}
