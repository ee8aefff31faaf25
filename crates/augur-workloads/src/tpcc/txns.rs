//! The five transactions of Clauses 2.4–2.8, their input generation, and their database
//! profiles over the key-value rows of [`super::schema`].
//!
//! Each procedure draws all its inputs when it is generated, so a retried attempt runs the same
//! business transaction again. A row a transaction needs that is missing or does not decode means
//! the database is inconsistent (or, under an optimistic protocol, that this attempt read an
//! inconsistent state and will fail validation anyway): the attempt is rejected with
//! [`RequestError::Invalid`] naming the row, which the client reports as an invalid-request abort
//! and retries. Only New-Order's unused item number rolls back ([`AbortReason::UserRollback`]).
//!
//! What a transaction would display on the terminal (Clauses 2.4.3, 2.5.3, 2.6.3, 2.8.3) is kept
//! in the procedure's `result` after an attempt that ran to the end.
//!
//! Since a procedure's fields are all its body depends on (dates included, drawn with the rest),
//! each serializes, `result` skipped, as the arguments of its one-shot [`ProcedureCall`], and
//! the [`Catalog`](crate::Catalog) rebuilds it from them on the node that runs it.

use super::random::{self, nurand};
use super::schema::*;
use super::{Config, Kind, MAX_STOCK_LEVEL_DISTRICTS};
use augur_client::{DeclaredKeys, Ops, Procedure, TxnError};
use augur_types::{AbortReason, Key, ProcedureCall, RequestError};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// How many recent orders of a district Stock-Level examines (Clause 2.8.2.2).
pub const STOCK_LEVEL_ORDERS: u32 = 20;
/// Payment's H_AMOUNT in cents (Clause 2.5.1.3).
pub const H_AMOUNT: std::ops::RangeInclusive<i64> = 100..=500_000;

fn rollback() -> TxnError {
    TxnError::Aborted(AbortReason::UserRollback)
}

/// The database does not hold what the transaction needs.
fn broken(why: String) -> TxnError {
    TxnError::Rejected(RequestError::Invalid(format!("tpcc: {why}")))
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
async fn must<R: Row>(ops: &mut dyn Ops, key: &Key) -> Result<R, TxnError> {
    get(ops, key)
        .await?
        .ok_or_else(|| broken(format!("{} row {key} is missing", R::TABLE)))
}

fn put<R: Row>(ops: &mut dyn Ops, key: Key, row: &R) -> Result<(), TxnError> {
    ops.write(key, Some(row.encode()))
}

/// How Payment and Order-Status identify their customer (Clauses 2.5.1.2, 2.6.1.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CustomerBy {
    Id(u16),
    /// The number of the last name ([`random::last_name`]).
    LastName(u16),
}

/// Select a customer of district (w, d) by C_ID, or by C_LAST: of the customers with that name,
/// sorted by C_FIRST, the one at position ⌈n/2⌉ (Clauses 2.5.2.2 and 2.6.2.2).
async fn find_customer(
    ops: &mut dyn Ops,
    w: u32,
    d: u8,
    by: CustomerBy,
) -> Result<(u16, Customer), TxnError> {
    let c = match by {
        CustomerBy::Id(c) => c,
        CustomerBy::LastName(name) => {
            let key = name_index_key(w, d, name);
            let NameIndex(ids) = must(ops, &key).await?;
            *ids.get(ids.len().saturating_sub(1) / 2)
                .ok_or_else(|| broken(format!("last-name index row {key} is empty")))?
        }
    };
    let customer = must(ops, &customer_key(w, d, c)).await?;
    Ok((c, customer))
}

/// A warehouse other than `w`, uniformly (there must be at least two).
fn other_warehouse(config: &Config, w: u32, rng: &mut ChaCha8Rng) -> u32 {
    let o = rng.random_range(1..config.warehouses());
    if o >= w { o + 1 } else { o }
}

fn draw_district(rng: &mut ChaCha8Rng) -> u8 {
    rng.random_range(1..=DISTRICTS)
}

/// NURand(1023, 1, customers) with the run-time C (Clause 2.1.6).
fn draw_c_id(config: &Config, rng: &mut ChaCha8Rng) -> u16 {
    let max = u32::from(config.customers());
    nurand(rng, random::A_C_ID, 1, max, config.run_c.c_id) as u16
}

/// 60% by last name NURand(255, 0, 999), 40% by C_ID (Clauses 2.5.1.2, 2.6.1.2).
fn draw_customer(config: &Config, rng: &mut ChaCha8Rng) -> CustomerBy {
    if rng.random_range(1..=100) <= 60 {
        let max = u32::from(config.max_name());
        CustomerBy::LastName(nurand(rng, random::A_C_LAST, 0, max, config.run_c.c_last) as u16)
    } else {
        CustomerBy::Id(draw_c_id(config, rng))
    }
}

/// A transaction of type `kind` for home warehouse `w`, dated `date`.
pub fn draw(
    config: &Config,
    kind: Kind,
    w: u32,
    date: u64,
    rng: &mut ChaCha8Rng,
) -> Box<dyn Procedure> {
    match kind {
        Kind::NewOrder => Box::new(NewOrder::draw(config, w, date, rng)),
        Kind::Payment => Box::new(Payment::draw(config, w, date, rng)),
        Kind::OrderStatus => Box::new(OrderStatus::draw(config, w, rng)),
        Kind::Delivery => Box::new(Delivery::draw(w, date, rng)),
        Kind::StockLevel => Box::new(StockLevel::draw(config, w, rng)),
    }
}

/// One line of a New-Order's input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineInput {
    pub i_id: u32,
    pub supply_w_id: u32,
    pub quantity: u8,
}

/// What New-Order displays.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewOrderResult {
    pub o_id: u32,
    /// sum(OL_AMOUNT) × (1 − C_DISCOUNT) × (1 + W_TAX + D_TAX), in cents (rounded).
    pub total: i64,
    /// Per line, `B` if both I_DATA and S_DATA hold "ORIGINAL", else `G`.
    pub brand_generic: String,
}

/// New-Order (Clause 2.4).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NewOrder {
    pub w: u32,
    pub d: u8,
    pub c: u16,
    pub lines: Vec<LineInput>,
    pub date: u64,
    #[serde(skip)]
    pub result: Option<NewOrderResult>,
}

impl NewOrder {
    /// Clause 2.4.1: D_ID uniform, C_ID NURand(1023), 5..=15 lines of NURand(8191) items, each
    /// from a remote warehouse with probability `remote_new_order` (if there is one), quantity
    /// 1..=10; with probability 1% the last item number is one no item has.
    pub fn draw(config: &Config, w: u32, date: u64, rng: &mut ChaCha8Rng) -> NewOrder {
        let d = draw_district(rng);
        let c = draw_c_id(config, rng);
        let ol_cnt = rng.random_range(MIN_OL..=MAX_OL);
        let rbk = rng.random_range(1..=100);
        let remote = config.settings.remote_new_order;
        let lines = (1..=ol_cnt)
            .map(|n| {
                let i_id = if n == ol_cnt && rbk == 1 {
                    config.items() + 1
                } else {
                    let items = config.items();
                    nurand(rng, random::A_OL_I_ID, 1, items, config.run_c.ol_i_id)
                };
                let supply_w_id = if config.warehouses() > 1 && rng.random::<f64>() < remote {
                    other_warehouse(config, w, rng)
                } else {
                    w
                };
                LineInput {
                    i_id,
                    supply_w_id,
                    quantity: rng.random_range(1..=10),
                }
            })
            .collect();
        NewOrder {
            w,
            d,
            c,
            lines,
            date,
            result: None,
        }
    }

    /// Clause 2.4.2.2.
    async fn body(&self, ops: &mut dyn Ops) -> Result<NewOrderResult, TxnError> {
        let (w, d, c) = (self.w, self.d, self.c);
        let warehouse: Warehouse = must(ops, &warehouse_key(w)).await?;
        let district_key = district_key(w, d);
        let mut district: District = must(ops, &district_key).await?;
        let o = district.next_o_id;
        district.next_o_id += 1;
        put(ops, district_key, &district)?;
        let customer: Customer = must(ops, &customer_key(w, d, c)).await?;
        let order = Order {
            c_id: c,
            entry_d: self.date,
            carrier_id: None,
            ol_cnt: self.lines.len() as u8,
            all_local: self.lines.iter().all(|l| l.supply_w_id == w),
        };
        put(ops, order_key(w, d, o), &order)?;
        put(ops, new_order_key(w, d, o), &Id(o))?;
        put(ops, last_order_key(w, d, c), &Id(o))?;
        let mut sum: i64 = 0;
        let mut brand_generic = String::with_capacity(self.lines.len());
        for (number, line) in (1..).zip(&self.lines) {
            // An unused item number: Clause 2.4.2.3's rollback.
            let Some(item) = get::<Item>(ops, &item_key(w, line.i_id)).await? else {
                return Err(rollback());
            };
            let stock_key = stock_key(line.supply_w_id, line.i_id);
            let mut stock: Stock = must(ops, &stock_key).await?;
            let quantity = i32::from(line.quantity);
            stock.quantity = if stock.quantity >= quantity + 10 {
                stock.quantity - quantity
            } else {
                stock.quantity - quantity + 91
            };
            stock.ytd += u64::from(line.quantity);
            stock.order_cnt += 1;
            if line.supply_w_id != w {
                stock.remote_cnt += 1;
            }
            let original =
                item.data.contains(random::ORIGINAL) && stock.data.contains(random::ORIGINAL);
            brand_generic.push(if original { 'B' } else { 'G' });
            let dist_info = stock.dist[usize::from(d) - 1].clone();
            put(ops, stock_key, &stock)?;
            let amount = i64::from(line.quantity) * item.price;
            sum += amount;
            let order_line = OrderLine {
                i_id: line.i_id,
                supply_w_id: line.supply_w_id,
                delivery_d: None,
                quantity: line.quantity,
                amount,
                dist_info,
            };
            put(ops, order_line_key(w, d, o, number), &order_line)?;
        }
        // Rates are in ten-thousandths: scale the product back by 10^8, rounding half up.
        let factor = i128::from(10_000 - i64::from(customer.discount))
            * i128::from(10_000 + i64::from(warehouse.tax) + i64::from(district.tax));
        let total = (i128::from(sum) * factor + 50_000_000) / 100_000_000;
        Ok(NewOrderResult {
            o_id: o,
            total: total as i64,
            brand_generic,
        })
    }
}

impl NewOrder {
    /// Its keys follow from its arguments (Calvin's independent transactions): the order's
    /// rows are numbered by D_NEXT_O_ID, so it declares their lock, the district's row
    /// ([`counter_guard`]), which it writes anyway.
    fn declared(&self) -> Option<DeclaredKeys> {
        let (w, d, c) = (self.w, self.d, self.c);
        let mut reads = vec![warehouse_key(w), district_key(w, d), customer_key(w, d, c)];
        let mut writes = vec![district_key(w, d), last_order_key(w, d, c)];
        for line in &self.lines {
            reads.push(item_key(w, line.i_id));
            reads.push(stock_key(line.supply_w_id, line.i_id));
            writes.push(stock_key(line.supply_w_id, line.i_id));
        }
        Some(DeclaredKeys { reads, writes })
    }
}

crate::result_procedure!(
    NewOrder,
    Kind::NewOrder.name(),
    Kind::NewOrder.read_only(),
    "tpcc",
    NewOrder::declared
);

/// Payment (Clause 2.5).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Payment {
    pub w: u32,
    pub d: u8,
    pub c_w: u32,
    pub c_d: u8,
    pub customer: CustomerBy,
    /// H_AMOUNT in cents.
    pub amount: i64,
    pub date: u64,
    /// The most characters C_DATA keeps.
    pub c_data_cap: usize,
    /// The C_ID paid for, once an attempt ran to the end.
    #[serde(skip)]
    pub result: Option<u16>,
}

impl Payment {
    /// Clause 2.5.1: D_ID uniform; the customer's warehouse is another one (and its district
    /// uniform) with probability `remote_payment` when there are several, else the home district;
    /// 60% by last name; H_AMOUNT uniform in 1.00..=5000.00.
    pub fn draw(config: &Config, w: u32, date: u64, rng: &mut ChaCha8Rng) -> Payment {
        let d = draw_district(rng);
        let remote =
            config.warehouses() > 1 && rng.random::<f64>() < config.settings.remote_payment;
        let (c_w, c_d) = if remote {
            (other_warehouse(config, w, rng), draw_district(rng))
        } else {
            (w, d)
        };
        Payment {
            w,
            d,
            c_w,
            c_d,
            customer: draw_customer(config, rng),
            amount: rng.random_range(H_AMOUNT),
            date,
            c_data_cap: config.settings.data_size.c_data_cap(),
            result: None,
        }
    }

    /// Clause 2.5.2.2.
    async fn body(&self, ops: &mut dyn Ops) -> Result<u16, TxnError> {
        let (w, d, amount) = (self.w, self.d, self.amount);
        let warehouse_key = warehouse_key(w);
        let mut warehouse: Warehouse = must(ops, &warehouse_key).await?;
        warehouse.ytd += amount;
        put(ops, warehouse_key, &warehouse)?;
        let district_key = district_key(w, d);
        let mut district: District = must(ops, &district_key).await?;
        district.ytd += amount;
        let h = district.next_h_id;
        district.next_h_id += 1;
        put(ops, district_key, &district)?;
        let (c, mut customer) = find_customer(ops, self.c_w, self.c_d, self.customer).await?;
        customer.balance -= amount;
        customer.ytd_payment += amount;
        customer.payment_cnt += 1;
        if customer.credit == "BC" {
            // The payment's identifiers go in front, pushing the oldest text out at the cap.
            let mut data = format!("{c} {} {} {d} {w} {} ", self.c_d, self.c_w, money(amount));
            data.push_str(&customer.data);
            data.truncate(self.c_data_cap);
            customer.data = data;
        }
        put(ops, customer_key(self.c_w, self.c_d, c), &customer)?;
        let history = History {
            c_id: c,
            c_d_id: self.c_d,
            c_w_id: self.c_w,
            d_id: d,
            w_id: w,
            date: self.date,
            amount,
            data: format!("{}    {}", warehouse.name, district.name),
        };
        put(ops, history_key(w, d, h), &history)?;
        Ok(c)
    }
}

impl Payment {
    /// By customer id its keys follow from its arguments; the history row is numbered by the
    /// district's counter and declared by its lock, the district's row ([`counter_guard`]).
    /// By last name the customer is found by reading: nothing is declared.
    fn declared(&self) -> Option<DeclaredKeys> {
        let CustomerBy::Id(c) = self.customer else {
            return None;
        };
        let keys = vec![
            warehouse_key(self.w),
            district_key(self.w, self.d),
            customer_key(self.c_w, self.c_d, c),
        ];
        Some(DeclaredKeys {
            reads: keys.clone(),
            writes: keys,
        })
    }
}

crate::result_procedure!(
    Payment,
    Kind::Payment.name(),
    Kind::Payment.read_only(),
    "tpcc",
    Payment::declared
);

/// What Order-Status displays (the order lines only counted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderStatusResult {
    pub c_id: u16,
    pub balance: i64,
    pub o_id: u32,
    pub carrier_id: Option<u8>,
    pub lines: Vec<OrderLine>,
}

/// Order-Status (Clause 2.6), read-only.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OrderStatus {
    pub w: u32,
    pub d: u8,
    pub customer: CustomerBy,
    #[serde(skip)]
    pub result: Option<OrderStatusResult>,
}

impl OrderStatus {
    /// Clause 2.6.1: D_ID uniform, 60% by last name.
    pub fn draw(config: &Config, w: u32, rng: &mut ChaCha8Rng) -> OrderStatus {
        OrderStatus {
            w,
            d: draw_district(rng),
            customer: draw_customer(config, rng),
            result: None,
        }
    }

    /// Clause 2.6.2.2; the customer's most recent order is the one its last-order row names.
    async fn body(&self, ops: &mut dyn Ops) -> Result<OrderStatusResult, TxnError> {
        let (w, d) = (self.w, self.d);
        let (c, customer) = find_customer(ops, w, d, self.customer).await?;
        let Id(o) = must(ops, &last_order_key(w, d, c)).await?;
        let order: Order = must(ops, &order_key(w, d, o)).await?;
        let mut lines = Vec::with_capacity(usize::from(order.ol_cnt));
        for number in 1..=order.ol_cnt {
            lines.push(must(ops, &order_line_key(w, d, o, number)).await?);
        }
        Ok(OrderStatusResult {
            c_id: c,
            balance: customer.balance,
            o_id: o,
            carrier_id: order.carrier_id,
            lines,
        })
    }
}

crate::result_procedure!(
    OrderStatus,
    Kind::OrderStatus.name(),
    Kind::OrderStatus.read_only(),
    "tpcc"
);

/// Delivery (Clause 2.7): one order of each district of the warehouse, all in one transaction.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Delivery {
    pub w: u32,
    pub carrier_id: u8,
    pub date: u64,
    /// The (D_ID, O_ID) delivered; districts without an undelivered order are skipped.
    #[serde(skip)]
    pub result: Option<Vec<(u8, u32)>>,
}

impl Delivery {
    /// Clause 2.7.1: O_CARRIER_ID uniform in 1..=10.
    pub fn draw(w: u32, date: u64, rng: &mut ChaCha8Rng) -> Delivery {
        Delivery {
            w,
            carrier_id: rng.random_range(1..=10),
            date,
            result: None,
        }
    }

    /// Clause 2.7.4.2. The district's oldest NEW-ORDER row is the one its head row names: NEW-ORDER
    /// rows are inserted at D_NEXT_O_ID and deleted from the head, so they are exactly
    /// head..D_NEXT_O_ID, and an absent row at the head means the district has none.
    async fn body(&self, ops: &mut dyn Ops) -> Result<Vec<(u8, u32)>, TxnError> {
        let w = self.w;
        let mut delivered = Vec::with_capacity(usize::from(DISTRICTS));
        for d in 1..=DISTRICTS {
            let head_key = new_order_head_key(w, d);
            let Id(o) = must(ops, &head_key).await?;
            let new_order_key = new_order_key(w, d, o);
            if get::<Id>(ops, &new_order_key).await?.is_none() {
                continue;
            }
            ops.write(new_order_key, None)?;
            put(ops, head_key, &Id(o + 1))?;
            let order_key = order_key(w, d, o);
            let mut order: Order = must(ops, &order_key).await?;
            order.carrier_id = Some(self.carrier_id);
            put(ops, order_key, &order)?;
            let mut sum = 0;
            for number in 1..=order.ol_cnt {
                let key = order_line_key(w, d, o, number);
                let mut line: OrderLine = must(ops, &key).await?;
                line.delivery_d = Some(self.date);
                sum += line.amount;
                put(ops, key, &line)?;
            }
            let customer_key = customer_key(w, d, order.c_id);
            let mut customer: Customer = must(ops, &customer_key).await?;
            customer.balance += sum;
            customer.delivery_cnt += 1;
            put(ops, customer_key, &customer)?;
            delivered.push((d, o));
        }
        Ok(delivered)
    }
}

crate::result_procedure!(
    Delivery,
    Kind::Delivery.name(),
    Kind::Delivery.read_only(),
    "tpcc"
);

/// Stock-Level (Clause 2.8), read-only.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StockLevel {
    pub w: u32,
    /// The first district scanned.
    pub d: u8,
    /// How many consecutive districts are scanned (1 in the specification): from `d` up to
    /// district 10 of `w`, then on from district 1 of the next warehouse, wrapping after the
    /// last (DST §5.1 sweeps up to 20).
    pub districts: u8,
    /// The number of warehouses, which a scan past district 10 wraps around.
    #[serde(default = "one")]
    pub warehouses: u32,
    pub threshold: i32,
    /// low_stock, once an attempt ran to the end.
    #[serde(skip)]
    pub result: Option<u32>,
}

impl StockLevel {
    /// Clause 2.8.1: threshold uniform in 10..=20; the district is drawn here (see the module
    /// docs of [`super`]).
    pub fn draw(config: &Config, w: u32, rng: &mut ChaCha8Rng) -> StockLevel {
        StockLevel {
            w,
            d: draw_district(rng),
            districts: config.settings.stock_level_districts,
            warehouses: config.settings.warehouses,
            threshold: rng.random_range(10..=20),
            result: None,
        }
    }

    /// Clause 2.8.2.2: the distinct items of the last 20 orders (below D_NEXT_O_ID) of each
    /// scanned district whose stock at the district's warehouse is below the threshold. An
    /// order's lines are read from OL_NUMBER 1 up to the first absent one, which spares reading
    /// the ORDER row.
    async fn body(&self, ops: &mut dyn Ops) -> Result<u32, TxnError> {
        let mut items = BTreeSet::new();
        for k in 0..self.districts {
            let (w, d) = self.district(k);
            let district: District = must(ops, &district_key(w, d)).await?;
            let next = district.next_o_id;
            for o in next.saturating_sub(STOCK_LEVEL_ORDERS).max(1)..next {
                for number in 1..=MAX_OL {
                    match get::<OrderLine>(ops, &order_line_key(w, d, o, number)).await? {
                        Some(line) => items.insert((w, line.i_id)),
                        None => break,
                    };
                }
            }
        }
        let mut low = 0;
        for (w, i) in items {
            let stock: Stock = must(ops, &stock_key(w, i)).await?;
            if stock.quantity < self.threshold {
                low += 1;
            }
        }
        Ok(low)
    }
}

crate::result_procedure!(
    StockLevel,
    Kind::StockLevel.name(),
    Kind::StockLevel.read_only(),
    "tpcc"
);

/// The procedure `call` names, rebuilt from its arguments: what a node runs a one-shot TPC-C
/// transaction with.
pub(crate) fn instantiate(call: &ProcedureCall) -> Result<Box<dyn Procedure>, RequestError> {
    if call.procedure == super::audit::AUDIT {
        return super::audit::instantiate(call);
    }
    match Kind::of_name(&call.procedure) {
        Some(Kind::NewOrder) => rebuild(call, NewOrder::check),
        Some(Kind::Payment) => rebuild(call, Payment::check),
        Some(Kind::OrderStatus) => rebuild(call, OrderStatus::check),
        Some(Kind::Delivery) => rebuild::<Delivery>(call, unchecked),
        Some(Kind::StockLevel) => rebuild(call, StockLevel::check),
        None => Err(crate::unknown_procedure(call)),
    }
}

/// Decode `call`'s arguments as procedure `P` and refuse them if `check` does. Arguments decode
/// from any bytes that happen to fit, and some values no client draws would make a body panic
/// (index out of range, arithmetic overflow) on the node: those are checked before it runs.
pub(crate) fn rebuild<P>(
    call: &ProcedureCall,
    check: fn(&P) -> Result<(), String>,
) -> Result<Box<dyn Procedure>, RequestError>
where
    P: Procedure + DeserializeOwned + 'static,
{
    let procedure: P = call.decode()?;
    check(&procedure).map_err(|why| {
        RequestError::Invalid(format!(
            "bad arguments for procedure {}/{}: {why}",
            call.workload, call.procedure
        ))
    })?;
    Ok(Box::new(procedure))
}

/// The check of a procedure none of whose arguments can trouble its body.
pub(crate) fn unchecked<P>(_: &P) -> Result<(), String> {
    Ok(())
}

/// A district number a body can index S_DIST_xx with.
fn check_district(what: &str, d: u8) -> Result<(), String> {
    if (1..=DISTRICTS).contains(&d) {
        Ok(())
    } else {
        Err(format!("{what} {d} is not within 1..={DISTRICTS}"))
    }
}

impl NewOrder {
    /// Order lines are numbered in a `u8`, and their count stored in one.
    fn check(&self) -> Result<(), String> {
        check_district("district", self.d)?;
        if !(usize::from(MIN_OL)..=usize::from(MAX_OL)).contains(&self.lines.len()) {
            return Err(format!(
                "{} order lines, not within {MIN_OL}..={MAX_OL}",
                self.lines.len()
            ));
        }
        Ok(())
    }
}

impl Payment {
    /// H_AMOUNT is added to year-to-date sums, which an amount no terminal enters could overflow.
    fn check(&self) -> Result<(), String> {
        check_district("district", self.d)?;
        check_district("customer district", self.c_d)?;
        if !H_AMOUNT.contains(&self.amount) {
            return Err(format!("amount {} is not within {H_AMOUNT:?}", self.amount));
        }
        Ok(())
    }
}

impl OrderStatus {
    fn check(&self) -> Result<(), String> {
        check_district("district", self.d)
    }
}

/// Stock-Level's warehouse count in calls from before it was an argument.
fn one() -> u32 {
    1
}

impl StockLevel {
    /// The `k`-th district scanned (from 0): its warehouse and number.
    fn district(&self, k: u8) -> (u32, u8) {
        let n = self.d - 1 + k;
        let w = (self.w - 1 + u32::from(n / DISTRICTS)) % self.warehouses + 1;
        (w, n % DISTRICTS + 1)
    }

    /// The scanned districts are counted from `d` in a `u8`, and reach at most into the next
    /// warehouse.
    fn check(&self) -> Result<(), String> {
        check_district("district", self.d)?;
        if !(1..=MAX_STOCK_LEVEL_DISTRICTS).contains(&self.districts) {
            return Err(format!(
                "{} districts scanned, not within 1..={MAX_STOCK_LEVEL_DISTRICTS}",
                self.districts
            ));
        }
        if self.w == 0 || u32::from(self.districts) > u32::from(DISTRICTS) * self.warehouses {
            return Err(format!(
                "{} districts scanned from warehouse {} of {}: not that many districts",
                self.districts, self.w, self.warehouses
            ));
        }
        Ok(())
    }
}
