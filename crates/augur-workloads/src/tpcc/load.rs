//! The initial population of Clause 4.3.3.1, written through ordinary transactions in batches of
//! at most [`MAX_BATCH`] keys.
//!
//! A batch is a description (a table, a warehouse, a district, a range of ids); it generates its
//! rows when it runs, so [`batches`] allocates next to nothing even for many warehouses, and a
//! retried batch writes the same rows again. Every row is drawn from a generator seeded by its
//! table and identifiers ([`random::stream`]), so batches that need another batch's data
//! regenerate it instead of sharing it: the last-name index batches of a district recompute its
//! customers' C_FIRST and C_LAST, the customer batches the order each customer placed. The one
//! thing computed up front is each district's permutation of customers over its initial orders
//! (3000 numbers), shared by its order and customer batches.
//!
//! Column values follow Clause 4.3.3.1; [`super`]'s docs list what `data_size=compact` and the
//! scale-down settings change.

use super::random::{self, a_string, data_with_original, n_string, nurand, zip};
use super::schema::{self, *};
use super::{Config, LOAD_DATE};
use augur_client::Procedure;
use augur_types::{Key, Value};
use rand::Rng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The most keys one load transaction writes.
pub const MAX_BATCH: usize = 200;
/// Orders per batch: each writes ORDER, NEW-ORDER and up to 15 ORDER-LINE rows, 17 keys.
const ORDERS_PER_BATCH: u32 = 11;
/// Customers per batch: each writes CUSTOMER, HISTORY and its last-order row.
const CUSTOMERS_PER_BATCH: u16 = 66;
/// ITEM, STOCK and last-name index rows per batch.
const ROWS_PER_BATCH: u32 = 200;

/// What each generator stream is for, so equal identifiers of different tables draw unrelated
/// values.
mod purpose {
    pub const WAREHOUSE: u64 = 1;
    pub const DISTRICT: u64 = 2;
    pub const ITEM: u64 = 3;
    pub const STOCK: u64 = 4;
    pub const CUSTOMER: u64 = 5;
    pub const NAME: u64 = 6;
    pub const HISTORY: u64 = 7;
    pub const PERMUTATION: u64 = 8;
    pub const ORDER: u64 = 9;
}

/// One batch of rows.
#[derive(Clone, Debug)]
pub enum Part {
    /// The WAREHOUSE row, its DISTRICT rows and their oldest-new-order rows.
    Warehouse {
        w: u32,
    },
    /// ITEM rows `first..=last` of warehouse `w`'s copy.
    Items {
        w: u32,
        first: u32,
        last: u32,
    },
    Stock {
        w: u32,
        first: u32,
        last: u32,
    },
    /// CUSTOMER, HISTORY and last-order rows of customers `first..=last`; `order_of[c - 1]` is
    /// customer `c`'s initial order.
    Customers {
        w: u32,
        d: u8,
        first: u16,
        last: u16,
        order_of: Arc<Vec<u32>>,
    },
    /// Last-name index rows for name numbers `first..=last`.
    Names {
        w: u32,
        d: u8,
        first: u16,
        last: u16,
    },
    /// ORDER, ORDER-LINE and NEW-ORDER rows of orders `first..=last`; `customer_of[o - 1]` is
    /// order `o`'s customer.
    Orders {
        w: u32,
        d: u8,
        first: u32,
        last: u32,
        customer_of: Arc<Vec<u16>>,
    },
}

/// The whole population, warehouse by warehouse.
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
    let mut parts = Vec::new();
    let (items, customers) = (config.items(), config.customers());
    for w in 1..=config.warehouses() {
        parts.push(Part::Warehouse { w });
        for first in (1..=items).step_by(ROWS_PER_BATCH as usize) {
            let last = (first + ROWS_PER_BATCH - 1).min(items);
            parts.push(Part::Items { w, first, last });
            parts.push(Part::Stock { w, first, last });
        }
        for d in 1..=DISTRICTS {
            let customer_of = Arc::new(permutation(config, w, d));
            let mut order_of = vec![0u32; usize::from(customers)];
            for (o, c) in customer_of.iter().enumerate() {
                order_of[usize::from(*c) - 1] = o as u32 + 1;
            }
            let order_of = Arc::new(order_of);
            for first in (1..=customers).step_by(usize::from(CUSTOMERS_PER_BATCH)) {
                let last = (first + CUSTOMERS_PER_BATCH - 1).min(customers);
                parts.push(Part::Customers {
                    w,
                    d,
                    first,
                    last,
                    order_of: Arc::clone(&order_of),
                });
            }
            let names = config.max_name();
            for first in (0..=names).step_by(ROWS_PER_BATCH as usize) {
                let last = (first + ROWS_PER_BATCH as u16 - 1).min(names);
                parts.push(Part::Names { w, d, first, last });
            }
            let orders = u32::from(customers);
            for first in (1..=orders).step_by(ORDERS_PER_BATCH as usize) {
                let last = (first + ORDERS_PER_BATCH - 1).min(orders);
                parts.push(Part::Orders {
                    w,
                    d,
                    first,
                    last,
                    customer_of: Arc::clone(&customer_of),
                });
            }
        }
    }
    parts
}

/// The rows of `part`.
pub fn rows(config: &Config, part: &Part) -> Vec<(Key, Value)> {
    let mut out = Vec::new();
    match part {
        Part::Warehouse { w } => {
            let w = *w;
            out.push((warehouse_key(w), warehouse(config, w).encode()));
            for d in 1..=DISTRICTS {
                out.push((district_key(w, d), district(config, w, d).encode()));
                let head = Id(config.first_new_order());
                out.push((new_order_head_key(w, d), head.encode()));
            }
        }
        Part::Items { w, first, last } => {
            for i in *first..=*last {
                out.push((item_key(*w, i), item(config, i).encode()));
            }
        }
        Part::Stock { w, first, last } => {
            for i in *first..=*last {
                out.push((stock_key(*w, i), stock(config, *w, i).encode()));
            }
        }
        Part::Customers {
            w,
            d,
            first,
            last,
            order_of,
        } => {
            let (w, d) = (*w, *d);
            for c in *first..=*last {
                out.push((customer_key(w, d, c), customer(config, w, d, c).encode()));
                out.push((history_key(w, d, u32::from(c)), history(w, d, c).encode()));
                let o = Id(order_of[usize::from(c) - 1]);
                out.push((last_order_key(w, d, c), o.encode()));
            }
        }
        Part::Names { w, d, first, last } => {
            let index = name_index(config, *w, *d);
            for name in *first..=*last {
                if let Some(ids) = index.get(&name) {
                    let row = NameIndex(ids.clone());
                    out.push((name_index_key(*w, *d, name), row.encode()));
                }
            }
        }
        Part::Orders {
            w,
            d,
            first,
            last,
            customer_of,
        } => {
            let (w, d) = (*w, *d);
            for o in *first..=*last {
                let c = customer_of[o as usize - 1];
                let (order, lines) = order(config, w, d, o, c);
                out.push((order_key(w, d, o), order.encode()));
                for (n, line) in (1..).zip(&lines) {
                    out.push((order_line_key(w, d, o, n), line.encode()));
                }
                if o >= config.first_new_order() {
                    out.push((new_order_key(w, d, o), Id(o).encode()));
                }
            }
        }
    }
    out
}

fn address(rng: &mut ChaCha8Rng) -> Address {
    Address {
        street_1: a_string(rng, 10, 20),
        street_2: a_string(rng, 10, 20),
        city: a_string(rng, 10, 20),
        state: a_string(rng, 2, 2),
        zip: zip(rng),
    }
}

/// D_YTD at load: the sum of the district's HISTORY rows (30,000.00 for 3,000 customers).
fn district_ytd(config: &Config) -> i64 {
    i64::from(config.customers()) * INITIAL_PAYMENT
}

/// H_AMOUNT and C_YTD_PAYMENT at load: 10.00.
pub const INITIAL_PAYMENT: i64 = 1000;

pub fn warehouse(config: &Config, w: u32) -> Warehouse {
    let mut rng = random::stream(purpose::WAREHOUSE, &[w.into()]);
    Warehouse {
        name: a_string(&mut rng, 6, 10),
        address: address(&mut rng),
        tax: rng.random_range(0..=2000),
        ytd: i64::from(DISTRICTS) * district_ytd(config),
    }
}

pub fn district(config: &Config, w: u32, d: u8) -> District {
    let mut rng = random::stream(purpose::DISTRICT, &[w.into(), d.into()]);
    let next = u32::from(config.customers()) + 1;
    District {
        name: a_string(&mut rng, 6, 10),
        address: address(&mut rng),
        tax: rng.random_range(0..=2000),
        ytd: district_ytd(config),
        next_o_id: next,
        next_h_id: next,
    }
}

/// ITEM row `i`: the same in every warehouse's copy.
pub fn item(config: &Config, i: u32) -> Item {
    let mut rng = random::stream(purpose::ITEM, &[i.into()]);
    let (min, max) = config.settings.data_size.item_data();
    Item {
        im_id: rng.random_range(1..=10_000),
        name: a_string(&mut rng, 14, 24),
        price: rng.random_range(100..=10_000),
        data: data_with_original(&mut rng, min, max),
    }
}

pub fn stock(config: &Config, w: u32, i: u32) -> Stock {
    let mut rng = random::stream(purpose::STOCK, &[w.into(), i.into()]);
    let size = config.settings.data_size;
    let len = size.dist_info();
    let quantity = rng.random_range(10..=100);
    let dist = std::array::from_fn(|_| a_string(&mut rng, len, len));
    let (min, max) = size.item_data();
    Stock {
        quantity,
        dist,
        ytd: 0,
        order_cnt: 0,
        remote_cnt: 0,
        data: data_with_original(&mut rng, min, max),
    }
}

/// Customer (w, d, c)'s last-name number and C_FIRST: the first 1000 customers take the names
/// 0..=999 in order, the others NURand(255, 0, 999) with the load's C.
pub fn customer_name(config: &Config, w: u32, d: u8, c: u16) -> (u16, String) {
    let mut rng = random::stream(purpose::NAME, &[w.into(), d.into(), c.into()]);
    let name = if c <= 1000 {
        c - 1
    } else {
        let max = u32::from(config.max_name());
        nurand(&mut rng, random::A_C_LAST, 0, max, config.load_c.c_last) as u16
    };
    (name, a_string(&mut rng, 8, 16))
}

pub fn customer(config: &Config, w: u32, d: u8, c: u16) -> Customer {
    let (name, first) = customer_name(config, w, d, c);
    let mut rng = random::stream(purpose::CUSTOMER, &[w.into(), d.into(), c.into()]);
    let address = address(&mut rng);
    let phone = n_string(&mut rng, 16);
    let credit = if rng.random_range(0..10) == 0 {
        "BC"
    } else {
        "GC"
    };
    let discount = rng.random_range(0..=5000);
    let (min, max) = config.settings.data_size.c_data();
    Customer {
        first,
        middle: "OE".into(),
        last: random::last_name(name),
        address,
        phone,
        since: LOAD_DATE,
        credit: credit.into(),
        credit_lim: 5_000_000,
        discount,
        balance: -INITIAL_PAYMENT,
        ytd_payment: INITIAL_PAYMENT,
        payment_cnt: 1,
        delivery_cnt: 0,
        data: a_string(&mut rng, min, max),
    }
}

/// The HISTORY row of customer (w, d, c)'s initial payment, numbered `c` in its district.
pub fn history(w: u32, d: u8, c: u16) -> History {
    let mut rng = random::stream(purpose::HISTORY, &[w.into(), d.into(), c.into()]);
    History {
        c_id: c,
        c_d_id: d,
        c_w_id: w,
        d_id: d,
        w_id: w,
        date: LOAD_DATE,
        amount: INITIAL_PAYMENT,
        data: a_string(&mut rng, 12, 24),
    }
}

/// District (w, d)'s last-name index: per name number, its customers sorted by C_FIRST (then
/// C_ID, so that equal first names keep a fixed order).
pub fn name_index(config: &Config, w: u32, d: u8) -> BTreeMap<u16, Vec<u16>> {
    let mut by_name: BTreeMap<u16, Vec<(String, u16)>> = BTreeMap::new();
    for c in 1..=config.customers() {
        let (name, first) = customer_name(config, w, d, c);
        by_name.entry(name).or_default().push((first, c));
    }
    by_name
        .into_iter()
        .map(|(name, mut customers)| {
            customers.sort();
            (name, customers.into_iter().map(|(_, c)| c).collect())
        })
        .collect()
}

/// The customers of district (w, d)'s initial orders: `result[o - 1]` placed order `o`
/// (Clause 4.3.3.1: O_C_ID "selected sequentially from a random permutation").
pub fn permutation(config: &Config, w: u32, d: u8) -> Vec<u16> {
    let mut rng = random::stream(purpose::PERMUTATION, &[w.into(), d.into()]);
    let mut customers: Vec<u16> = (1..=config.customers()).collect();
    customers.shuffle(&mut rng);
    customers
}

/// Initial order (w, d, o) of customer `c` and its lines.
pub fn order(config: &Config, w: u32, d: u8, o: u32, c: u16) -> (Order, Vec<OrderLine>) {
    let mut rng = random::stream(purpose::ORDER, &[w.into(), d.into(), o.into()]);
    let delivered = o < config.first_new_order();
    let ol_cnt = rng.random_range(schema::MIN_OL..=schema::MAX_OL);
    let carrier_id = delivered.then(|| rng.random_range(1..=10));
    let len = config.settings.data_size.dist_info();
    let lines = (0..ol_cnt)
        .map(|_| OrderLine {
            i_id: rng.random_range(1..=config.items()),
            supply_w_id: w,
            delivery_d: delivered.then_some(LOAD_DATE),
            quantity: 5,
            amount: if delivered {
                0
            } else {
                rng.random_range(1..=999_999)
            },
            dist_info: a_string(&mut rng, len, len),
        })
        .collect();
    let order = Order {
        c_id: c,
        entry_d: LOAD_DATE,
        carrier_id,
        ol_cnt,
        all_local: true,
    };
    (order, lines)
}
