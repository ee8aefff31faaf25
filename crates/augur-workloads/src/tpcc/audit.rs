//! The consistency conditions of Clause 3.3.2, checked in one read-only transaction so that they
//! all see one snapshot.
//!
//! Conditions 1–10 and 12 are `tpcc-1` … `tpcc-10` and `tpcc-12`. Condition 11 relates the counts
//! of ORDER and NEW-ORDER rows as loaded (3000 − 900 = 2100) and stops holding at the first
//! New-Order or Delivery, so it is left out. Two more conditions cover what this implementation
//! adds to the specification's tables: `tpcc-index`, that the index rows say what the tables do
//! (each district's oldest-new-order row is its lowest NO_O_ID, or D_NEXT_O_ID if it has none;
//! each customer's last-order row is the largest O_ID of its orders; each last-name index row
//! lists exactly the district's customers of that name, sorted by C_FIRST then C_ID), and
//! `tpcc-rows`, that every row read decodes and the WAREHOUSE, DISTRICT and CUSTOMER rows the
//! population created exist.
//!
//! # Counting without scans
//!
//! The store has no scans, so the audit reads every row where it could be: every WAREHOUSE,
//! DISTRICT and CUSTOMER row of the configuration; for each district, ORDER and NEW-ORDER rows
//! of O_IDs 1 up to [`PROBE_BEYOND`] past D_NEXT_O_ID − 1, and HISTORY rows up to as far past the
//! district's HISTORY counter. Orders are only created at D_NEXT_O_ID, so a row past it means the
//! counter lost an increment; the margin finds such rows unless the counter fell more than the
//! margin behind. An order's ORDER-LINE rows are read from OL_NUMBER 1 to O_OL_CNT + 1 (at most
//! 15), which finds a missing line, and an extra line as long as the lines present are numbered
//! from 1 without gaps: the only way transactions write them. Where there is no ORDER row, line 1
//! is read, to find orphaned lines.
//!
//! For a database of W warehouses at full scale this is about 490,000 × W reads (most of them
//! ORDER-LINE rows), made one after another.

use super::random::last_name;
use super::schema::*;
use super::{Config, Settings};
use crate::audit_rows::Tally;
use crate::{Audit, AuditProcedure, Condition};
use augur_client::{Ops, Procedure, TxnError};
use augur_types::{ProcedureCall, RequestError};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// How many O_IDs past D_NEXT_O_ID − 1 (and HISTORY numbers past the counter) are read.
pub const PROBE_BEYOND: u32 = 5;

/// The audit of a [`super::Tpcc`] workload.
pub struct TpccAudit {
    config: Arc<Config>,
}

impl TpccAudit {
    pub fn new(config: Arc<Config>) -> TpccAudit {
        TpccAudit { config }
    }
}

impl Audit for TpccAudit {
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

    /// `None` beyond [`MAX_SHIPPED_AUDIT_CUSTOMERS`], which a node would refuse.
    fn call(&self) -> Option<ProcedureCall> {
        let args = AuditArgs {
            warehouses: self.config.warehouses(),
            customers_per_district: self.config.customers(),
        };
        (args.customers() <= MAX_SHIPPED_AUDIT_CUSTOMERS)
            .then(|| ProcedureCall::encode("tpcc", AUDIT, &args))
    }
}

/// The name of the audit's one-shot call.
pub(crate) const AUDIT: &str = "audit";

/// The settings the audit's reads depend on: the rows it reads are those of these warehouses
/// and customers, and the values it finds.
#[derive(Serialize, Deserialize)]
struct AuditArgs {
    warehouses: u32,
    customers_per_district: u16,
}

impl AuditArgs {
    /// The customers audited: warehouses × 10 × customers per district.
    fn customers(&self) -> u64 {
        u64::from(self.warehouses) * u64::from(DISTRICTS) * u64::from(self.customers_per_district)
    }
}

/// The most customers (warehouses × 10 × customers per district) a node audits for a one-shot
/// call: 100 warehouses at full scale, about 49 million reads and 60 MB of tallies. A call's
/// arguments come from the wire, and the audit's work and memory grow with them, not with the
/// call's size; a larger database is audited interactively.
pub const MAX_SHIPPED_AUDIT_CUSTOMERS: u64 = 3_000_000;

/// The audit a node runs for its one-shot call: the same reads, over settings validated as a
/// workload's are.
pub(crate) fn instantiate(call: &ProcedureCall) -> Result<Box<dyn Procedure>, RequestError> {
    let args: AuditArgs = call.decode()?;
    let customers = args.customers();
    let AuditArgs {
        warehouses,
        customers_per_district,
    } = args;
    if customers > MAX_SHIPPED_AUDIT_CUSTOMERS {
        return Err(RequestError::Invalid(format!(
            "procedure tpcc/{AUDIT}: {warehouses} warehouses of {customers_per_district} \
             customers per district are {customers} customers, more than the \
             {MAX_SHIPPED_AUDIT_CUSTOMERS} a node audits in one call"
        )));
    }
    let given = BTreeMap::from([
        ("warehouses".to_string(), warehouses.to_string()),
        (
            "customers_per_district".to_string(),
            customers_per_district.to_string(),
        ),
    ]);
    let settings = Settings::from_given(&given).map_err(|e| {
        RequestError::Invalid(format!("bad arguments for procedure tpcc/{AUDIT}: {e}"))
    })?;
    let audit = TpccAudit::new(Arc::new(Config::new(settings)));
    Ok(Box::new(AuditProcedure::new(Box::new(audit))))
}

/// The conditions, in the order they are reported.
#[derive(Clone, Copy)]
enum Cond {
    C1,
    C2,
    C3,
    C4,
    C5,
    C6,
    C7,
    C8,
    C9,
    C10,
    C12,
    Index,
    Rows,
}

/// Name, statement and what each condition is counted over, in [`Cond`] order.
const CONDITIONS: [(&str, &str, &str); 13] = [
    (
        "tpcc-1",
        "W_YTD = sum(D_YTD) (Clause 3.3.2.1)",
        "warehouses",
    ),
    (
        "tpcc-2",
        "D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID) (Clause 3.3.2.2)",
        "districts",
    ),
    (
        "tpcc-3",
        "max(NO_O_ID) - min(NO_O_ID) + 1 = the number of NEW-ORDER rows, where there are any \
         (Clause 3.3.2.3)",
        "districts",
    ),
    (
        "tpcc-4",
        "sum(O_OL_CNT) = the number of ORDER-LINE rows (Clause 3.3.2.4)",
        "districts",
    ),
    (
        "tpcc-5",
        "O_CARRIER_ID is null iff the order has a NEW-ORDER row (Clause 3.3.2.5)",
        "orders",
    ),
    (
        "tpcc-6",
        "O_OL_CNT = the number of the order's ORDER-LINE rows (Clause 3.3.2.6)",
        "orders",
    ),
    (
        "tpcc-7",
        "OL_DELIVERY_D is null iff the order's O_CARRIER_ID is null (Clause 3.3.2.7)",
        "order lines",
    ),
    (
        "tpcc-8",
        "W_YTD = sum(H_AMOUNT) of the HISTORY rows with that H_W_ID (Clause 3.3.2.8)",
        "warehouses",
    ),
    (
        "tpcc-9",
        "D_YTD = sum(H_AMOUNT) of the HISTORY rows with that (H_W_ID, H_D_ID) (Clause 3.3.2.9)",
        "districts",
    ),
    (
        "tpcc-10",
        "C_BALANCE = sum(OL_AMOUNT) of the delivered lines of the customer's orders - \
         sum(H_AMOUNT) of its HISTORY rows (Clause 3.3.2.10)",
        "customers",
    ),
    (
        "tpcc-12",
        "C_BALANCE + C_YTD_PAYMENT = sum(OL_AMOUNT) of the delivered lines of the customer's \
         orders (Clause 3.3.2.12)",
        "customers",
    ),
    (
        "tpcc-index",
        "the oldest-new-order, last-order and last-name index rows agree with the tables",
        "index rows",
    ),
    (
        "tpcc-rows",
        "every row read decodes; the WAREHOUSE, DISTRICT and CUSTOMER rows exist",
        "rows",
    ),
];

/// A customer's position in the flat per-customer arrays.
fn customer_slot(config: &Config, w: u32, d: u8, c: u16) -> Option<usize> {
    let customers = usize::from(config.customers());
    let valid = (1..=config.warehouses()).contains(&w)
        && (1..=DISTRICTS).contains(&d)
        && (1..=config.customers()).contains(&c);
    valid.then(|| {
        ((w as usize - 1) * usize::from(DISTRICTS) + usize::from(d) - 1) * customers
            + usize::from(c)
            - 1
    })
}

/// A district's position in the flat per-district arrays.
fn district_slot(config: &Config, w: u32, d: u8) -> Option<usize> {
    let valid = (1..=config.warehouses()).contains(&w) && (1..=DISTRICTS).contains(&d);
    valid.then(|| (w as usize - 1) * usize::from(DISTRICTS) + usize::from(d) - 1)
}

/// The audit's reads and what it gathered from them.
struct Scan<'c> {
    config: &'c Config,
    tally: Tally,
    /// Per customer: sum(OL_AMOUNT) of delivered lines of its orders.
    delivered: Vec<i64>,
    /// Per customer: sum(H_AMOUNT) of its HISTORY rows.
    paid: Vec<i64>,
    /// Per customer: the largest O_ID of its orders (0: none).
    last_order: Vec<u32>,
    /// Per warehouse and per district: sum(H_AMOUNT) by H_W_ID and by (H_W_ID, H_D_ID).
    history_w: Vec<i64>,
    history_d: Vec<i64>,
    /// Per warehouse and per district: W_YTD and D_YTD, where the row exists.
    w_ytd: Vec<Option<i64>>,
    d_ytd: Vec<Option<i64>>,
}

impl<'c> Scan<'c> {
    fn new(config: &'c Config) -> Scan<'c> {
        let warehouses = config.warehouses() as usize;
        let districts = warehouses * usize::from(DISTRICTS);
        let customers = districts * usize::from(config.customers());
        Scan {
            config,
            tally: Tally::new(&CONDITIONS, Cond::Rows as usize),
            delivered: vec![0; customers],
            paid: vec![0; customers],
            last_order: vec![0; customers],
            history_w: vec![0; warehouses],
            history_d: vec![0; districts],
            w_ytd: vec![None; warehouses],
            d_ytd: vec![None; districts],
        }
    }

    /// Count one instance of `cond`, failed unless `ok`; `what` describes a failure.
    fn expect(&mut self, cond: Cond, ok: bool, what: impl FnOnce() -> String) {
        self.tally.expect(cond as usize, ok, what);
    }

    async fn run(&mut self, ops: &mut dyn Ops) -> Result<(), TxnError> {
        for w in 1..=self.config.warehouses() {
            let warehouse: Option<Warehouse> =
                self.tally.read_required(ops, &warehouse_key(w)).await?;
            self.w_ytd[w as usize - 1] = warehouse.as_ref().map(|r| r.ytd);
            let mut d_sum = Some(0i64);
            for d in 1..=DISTRICTS {
                let district: Option<District> =
                    self.tally.read_required(ops, &district_key(w, d)).await?;
                let slot = district_slot(self.config, w, d).expect("a configured district");
                self.d_ytd[slot] = district.as_ref().map(|r| r.ytd);
                d_sum = d_sum.zip(district.as_ref()).map(|(s, r)| s + r.ytd);
                let Some(district) = district else {
                    self.expect(Cond::C2, false, || {
                        format!("district {w}/{d}: no DISTRICT row")
                    });
                    continue;
                };
                self.orders(ops, w, d, &district).await?;
                self.history(ops, w, d, district.next_h_id).await?;
            }
            match (&warehouse, d_sum) {
                (Some(r), Some(sum)) => self.expect(Cond::C1, r.ytd == sum, || {
                    format!(
                        "warehouse {w}: W_YTD {} but sum(D_YTD) {}",
                        money(r.ytd),
                        money(sum)
                    )
                }),
                _ => self.expect(Cond::C1, false, || {
                    format!("warehouse {w}: a WAREHOUSE or DISTRICT row is missing")
                }),
            }
        }
        self.history_conditions();
        for w in 1..=self.config.warehouses() {
            for d in 1..=DISTRICTS {
                self.customers(ops, w, d).await?;
            }
        }
        Ok(())
    }

    /// Conditions 2–7 for one district, gathering its delivered amounts and last orders per
    /// customer for conditions 10 and 12 and the index check.
    async fn orders(
        &mut self,
        ops: &mut dyn Ops,
        w: u32,
        d: u8,
        district: &District,
    ) -> Result<(), TxnError> {
        let next = district.next_o_id;
        let (mut max_o, mut ol_cnt_sum, mut line_rows) = (0u32, 0u64, 0u64);
        let (mut no_count, mut no_min, mut no_max) = (0u64, u32::MAX, 0u32);
        for o in 1..next.saturating_add(PROBE_BEYOND) {
            let order: Option<Order> = self.tally.read(ops, &order_key(w, d, o)).await?;
            let new_order = self
                .tally
                .read::<Id>(ops, &new_order_key(w, d, o))
                .await?
                .is_some();
            if new_order {
                no_count += 1;
                no_min = no_min.min(o);
                no_max = no_max.max(o);
            }
            let Some(order) = order else {
                if self
                    .tally
                    .read::<OrderLine>(ops, &order_line_key(w, d, o, 1))
                    .await?
                    .is_some()
                {
                    // Orphaned lines count as rows of the district (condition 4).
                    line_rows += 1;
                }
                continue;
            };
            max_o = o;
            ol_cnt_sum += u64::from(order.ol_cnt);
            let undelivered = order.carrier_id.is_none();
            self.expect(Cond::C5, undelivered == new_order, || {
                format!(
                    "order {w}/{d}/{o}: O_CARRIER_ID {:?} but {} NEW-ORDER row",
                    order.carrier_id,
                    if new_order { "a" } else { "no" }
                )
            });
            let customer = customer_slot(self.config, w, d, order.c_id);
            match customer {
                Some(slot) => self.last_order[slot] = self.last_order[slot].max(o),
                None => self.expect(Cond::C10, false, || {
                    format!("order {w}/{d}/{o}: O_C_ID {} is no customer", order.c_id)
                }),
            }
            let mut lines = 0u8;
            for number in 1..=(order.ol_cnt.saturating_add(1)).min(MAX_OL) {
                let key = order_line_key(w, d, o, number);
                let Some(line) = self.tally.read::<OrderLine>(ops, &key).await? else {
                    continue;
                };
                lines += 1;
                let delivered = line.delivery_d.is_some();
                self.expect(Cond::C7, delivered != undelivered, || {
                    format!(
                        "order line {w}/{d}/{o}/{number}: OL_DELIVERY_D {:?} but O_CARRIER_ID {:?}",
                        line.delivery_d, order.carrier_id
                    )
                });
                if let (true, Some(slot)) = (delivered, customer) {
                    self.delivered[slot] += line.amount;
                }
            }
            line_rows += u64::from(lines);
            self.expect(Cond::C6, lines == order.ol_cnt, || {
                format!(
                    "order {w}/{d}/{o}: O_OL_CNT {} but {lines} ORDER-LINE rows",
                    order.ol_cnt
                )
            });
        }
        let last = next.wrapping_sub(1);
        let no_ok = no_count == 0 || no_max == last;
        self.expect(Cond::C2, max_o == last && no_ok, || {
            let no = if no_count == 0 {
                "no NEW-ORDER rows".to_string()
            } else {
                format!("max(NO_O_ID) {no_max}")
            };
            format!("district {w}/{d}: D_NEXT_O_ID - 1 = {last}, max(O_ID) {max_o}, {no}")
        });
        if no_count > 0 {
            let span = u64::from(no_max - no_min) + 1;
            self.expect(Cond::C3, span == no_count, || {
                format!(
                    "district {w}/{d}: NO_O_ID {no_min}..={no_max} spans {span} but {no_count} \
                     NEW-ORDER rows"
                )
            });
        }
        self.expect(Cond::C4, ol_cnt_sum == line_rows, || {
            format!("district {w}/{d}: sum(O_OL_CNT) {ol_cnt_sum} but {line_rows} ORDER-LINE rows")
        });
        // The oldest-new-order row: NEW-ORDER rows are head..D_NEXT_O_ID.
        let head = self
            .tally
            .read::<Id>(ops, &new_order_head_key(w, d))
            .await?;
        let want = if no_count > 0 { no_min } else { next };
        self.expect(Cond::Index, head == Some(Id(want)), || {
            format!("district {w}/{d}: oldest-new-order row {head:?}, expected {want}")
        });
        Ok(())
    }

    /// HISTORY rows paid at district (w, d).
    async fn history(
        &mut self,
        ops: &mut dyn Ops,
        w: u32,
        d: u8,
        next_h_id: u32,
    ) -> Result<(), TxnError> {
        for h in 1..next_h_id.saturating_add(PROBE_BEYOND) {
            let Some(row) = self
                .tally
                .read::<History>(ops, &history_key(w, d, h))
                .await?
            else {
                continue;
            };
            let at = (w, d, h);
            match district_slot(self.config, row.w_id, row.d_id) {
                Some(slot) => {
                    self.history_w[row.w_id as usize - 1] += row.amount;
                    self.history_d[slot] += row.amount;
                }
                None => self.expect(Cond::C8, false, || {
                    format!(
                        "HISTORY row {at:?}: H_W_ID {} H_D_ID {}",
                        row.w_id, row.d_id
                    )
                }),
            }
            match customer_slot(self.config, row.c_w_id, row.c_d_id, row.c_id) {
                Some(slot) => self.paid[slot] += row.amount,
                None => self.expect(Cond::C10, false, || {
                    format!(
                        "HISTORY row {at:?}: customer {}/{}/{} does not exist",
                        row.c_w_id, row.c_d_id, row.c_id
                    )
                }),
            }
        }
        Ok(())
    }

    /// Conditions 8 and 9, once every HISTORY row was read.
    fn history_conditions(&mut self) {
        for w in 1..=self.config.warehouses() {
            let (ytd, sum) = (self.w_ytd[w as usize - 1], self.history_w[w as usize - 1]);
            self.expect(Cond::C8, ytd == Some(sum), || {
                let ytd = ytd.map_or("missing".into(), money);
                format!(
                    "warehouse {w}: W_YTD {ytd} but sum(H_AMOUNT) {}",
                    money(sum)
                )
            });
            for d in 1..=DISTRICTS {
                let slot = district_slot(self.config, w, d).expect("a configured district");
                let (ytd, sum) = (self.d_ytd[slot], self.history_d[slot]);
                self.expect(Cond::C9, ytd == Some(sum), || {
                    let ytd = ytd.map_or("missing".into(), money);
                    format!(
                        "district {w}/{d}: D_YTD {ytd} but sum(H_AMOUNT) {}",
                        money(sum)
                    )
                });
            }
        }
    }

    /// Conditions 10 and 12 and the customer index rows of district (w, d).
    async fn customers(&mut self, ops: &mut dyn Ops, w: u32, d: u8) -> Result<(), TxnError> {
        let names: HashMap<String, u16> = (0..=self.config.max_name())
            .map(|n| (last_name(n), n))
            .collect();
        let mut by_name: BTreeMap<u16, Vec<(String, u16)>> = BTreeMap::new();
        for c in 1..=self.config.customers() {
            let slot = customer_slot(self.config, w, d, c).expect("a configured customer");
            let row: Option<Customer> = self
                .tally
                .read_required(ops, &customer_key(w, d, c))
                .await?;
            let last = self.tally.read::<Id>(ops, &last_order_key(w, d, c)).await?;
            let want = self.last_order[slot];
            self.expect(Cond::Index, last.map(|Id(o)| o) == Some(want), || {
                format!("customer {w}/{d}/{c}: last-order row {last:?}, largest O_ID {want}")
            });
            let Some(row) = row else {
                let what = || format!("customer {w}/{d}/{c}: no CUSTOMER row");
                self.expect(Cond::C10, false, what);
                self.expect(Cond::C12, false, what);
                continue;
            };
            let (delivered, paid) = (self.delivered[slot], self.paid[slot]);
            self.expect(Cond::C10, row.balance == delivered - paid, || {
                format!(
                    "customer {w}/{d}/{c}: C_BALANCE {} but delivered {} - paid {}",
                    money(row.balance),
                    money(delivered),
                    money(paid)
                )
            });
            self.expect(
                Cond::C12,
                row.balance + row.ytd_payment == delivered,
                || {
                    format!(
                        "customer {w}/{d}/{c}: C_BALANCE {} + C_YTD_PAYMENT {} but delivered {}",
                        money(row.balance),
                        money(row.ytd_payment),
                        money(delivered)
                    )
                },
            );
            match names.get(&row.last) {
                Some(n) => by_name.entry(*n).or_default().push((row.first, c)),
                None => self.expect(Cond::Index, false, || {
                    format!(
                        "customer {w}/{d}/{c}: C_LAST {:?} is no generated name",
                        row.last
                    )
                }),
            }
        }
        for n in 0..=self.config.max_name() {
            let mut want: Vec<(String, u16)> = by_name.remove(&n).unwrap_or_default();
            want.sort();
            let want: Vec<u16> = want.into_iter().map(|(_, c)| c).collect();
            let key = name_index_key(w, d, n);
            let have = self.tally.read::<NameIndex>(ops, &key).await?;
            let have = have.map(|NameIndex(ids)| ids).unwrap_or_default();
            self.expect(Cond::Index, have == want, || {
                format!("last-name index {key}: {have:?}, customers by C_FIRST {want:?}")
            });
        }
        Ok(())
    }
}
