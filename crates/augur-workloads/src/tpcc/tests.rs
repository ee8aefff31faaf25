//! Tests of the whole workload against the in-memory store: population, each transaction's
//! effects, the audit, the mixes and the settings.

use super::load::{self, MAX_BATCH};
use super::schema::*;
use super::txns::{CustomerBy, Delivery, LineInput, NewOrder, OrderStatus, Payment, StockLevel};
use super::*;
use crate::Condition;
use crate::list_append::fake::FakeOps;
use crate::testing::refused;
use augur_client::TxnError;
use augur_types::{AbortReason, Key, LatencyProfile, RequestError};
use std::collections::BTreeSet;

fn placement(nodes: usize) -> Arc<Placement> {
    let lan = LatencyProfile::named("lan").unwrap();
    Arc::new(Placement::ring(lan, nodes, 1).unwrap())
}

fn given(set: &[(&str, &str)]) -> BTreeMap<String, String> {
    set.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn workload(set: &[(&str, &str)]) -> Result<Tpcc, WorkloadError> {
    Tpcc::new(&given(set), placement(3))
}

/// Two warehouses of 30 customers per district and 200 items, with compact filler.
fn tiny(extra: &[(&str, &str)]) -> Tpcc {
    let mut set = vec![
        ("warehouses", "2"),
        ("customers_per_district", "30"),
        ("items", "200"),
        ("data_size", "compact"),
    ];
    set.extend_from_slice(extra);
    workload(&set).unwrap()
}

/// Run `p` and commit it, or drop its writes if it fails.
fn commit(ops: &mut FakeOps, p: &mut dyn Procedure) -> Result<(), TxnError> {
    let result = ops.run(p);
    match &result {
        Ok(()) => ops.commit(),
        Err(_) => {
            ops.buffered.clear();
            ops.log.clear();
        }
    }
    result
}

fn loaded(w: &Tpcc) -> FakeOps {
    let mut ops = FakeOps::default();
    for mut p in w.load() {
        assert_eq!(p.name(), "load");
        commit(&mut ops, p.as_mut()).unwrap();
    }
    ops
}

fn row<R: Row>(ops: &FakeOps, key: &Key) -> Option<R> {
    ops.store.get(key).map(|v| R::decode(v).unwrap())
}

fn put<R: Row>(ops: &mut FakeOps, key: Key, row: &R) {
    ops.store.insert(key, row.encode());
}

fn audit(w: &Tpcc, ops: &mut FakeOps) -> Vec<Condition> {
    let mut audit = w.audit().unwrap();
    let conditions = futures::executor::block_on(audit.run(ops)).unwrap();
    ops.log.clear();
    conditions
}

fn failed(conditions: &[Condition]) -> Vec<&str> {
    conditions
        .iter()
        .filter(|c| !c.passed)
        .map(|c| c.name.as_str())
        .collect()
}

/// How many stored keys of warehouse `w` carry table tag `tag`.
fn count(ops: &FakeOps, w: u32, tag: u8) -> usize {
    ops.store
        .keys()
        .filter(|k| k.shard() == w && k.as_bytes()[4] == tag)
        .count()
}

#[test]
fn population_follows_clause_4_3_3_1() {
    let w = tiny(&[]);
    let config = w.config().clone();
    for part in load::batch_parts(&config) {
        let rows = load::rows(&config, &part);
        assert!(!rows.is_empty() && rows.len() <= MAX_BATCH, "{part:?}");
    }
    let ops = loaded(&w);
    assert_eq!(config.first_new_order(), 22);
    for wh in 1..=2 {
        assert_eq!(count(&ops, wh, b'W'), 1);
        assert_eq!(count(&ops, wh, b'D'), 10);
        assert_eq!(count(&ops, wh, b'q'), 10);
        assert_eq!(count(&ops, wh, b'C'), 300);
        assert_eq!(count(&ops, wh, b'H'), 300);
        assert_eq!(count(&ops, wh, b'o'), 300);
        assert_eq!(count(&ops, wh, b'n'), 300);
        assert_eq!(count(&ops, wh, b'O'), 300);
        assert_eq!(count(&ops, wh, b'N'), 90);
        assert_eq!(count(&ops, wh, b'I'), 200);
        assert_eq!(count(&ops, wh, b'S'), 200);
        let lines = count(&ops, wh, b'L');
        assert!((300 * 5..=300 * 15).contains(&lines), "{lines}");
    }
    // ITEM is the same in every warehouse's copy; STOCK is not.
    for i in [1, 77, 200] {
        assert_eq!(ops.store[&item_key(1, i)], ops.store[&item_key(2, i)]);
    }
    assert_ne!(ops.store[&stock_key(1, 1)], ops.store[&stock_key(2, 1)]);
    let district: District = row(&ops, &district_key(1, 3)).unwrap();
    assert_eq!(
        (district.next_o_id, district.next_h_id, district.ytd),
        (31, 31, 30_000)
    );
    let warehouse: Warehouse = row(&ops, &warehouse_key(2)).unwrap();
    assert_eq!(warehouse.ytd, 300_000);
    assert!(warehouse.tax <= 2000 && district.tax <= 2000);
    let c: Customer = row(&ops, &customer_key(1, 3, 1)).unwrap();
    assert_eq!(c.last, "BARBARBAR");
    assert_eq!((c.balance, c.ytd_payment, c.payment_cnt), (-1000, 1000, 1));
    assert_eq!(c.middle, "OE");
    assert!((30..=50).contains(&c.data.len()));
    let c: Customer = row(&ops, &customer_key(1, 3, 30)).unwrap();
    assert_eq!(c.last, "BARABLEEING"); // name 29
    // Every customer placed exactly one initial order, which its last-order row names.
    let mut seen = BTreeSet::new();
    for o in 1..=30u32 {
        let order: Order = row(&ops, &order_key(1, 4, o)).unwrap();
        assert!(seen.insert(order.c_id));
        assert_eq!(
            row::<Id>(&ops, &last_order_key(1, 4, order.c_id)),
            Some(Id(o))
        );
        let delivered = o < 22;
        assert_eq!(order.carrier_id.is_some(), delivered);
        assert_eq!(
            row::<Id>(&ops, &new_order_key(1, 4, o)).is_some(),
            !delivered
        );
        for n in 1..=order.ol_cnt {
            let line: OrderLine = row(&ops, &order_line_key(1, 4, o, n)).unwrap();
            assert_eq!(line.delivery_d.is_some(), delivered);
            assert_eq!(line.amount == 0, delivered);
            assert_eq!((line.quantity, line.supply_w_id), (5, 1));
        }
        assert!(
            !ops.store
                .contains_key(&order_line_key(1, 4, o, order.ol_cnt + 1))
        );
    }
    assert_eq!(row::<Id>(&ops, &new_order_head_key(1, 4)), Some(Id(22)));
    let conditions = audit(&w, &mut ops.clone_store());
    assert_eq!(
        conditions
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>(),
        [
            "tpcc-1",
            "tpcc-2",
            "tpcc-3",
            "tpcc-4",
            "tpcc-5",
            "tpcc-6",
            "tpcc-7",
            "tpcc-8",
            "tpcc-9",
            "tpcc-10",
            "tpcc-12",
            "tpcc-index",
            "tpcc-rows"
        ]
    );
    assert!(failed(&conditions).is_empty(), "{conditions:#?}");
    assert!(
        conditions[9].detail.contains("all 600 customers"),
        "{conditions:?}"
    );
}

impl FakeOps {
    fn clone_store(&self) -> FakeOps {
        FakeOps {
            store: self.store.clone(),
            ..FakeOps::default()
        }
    }
}

#[test]
fn full_scale_batches_stay_bounded() {
    let w = workload(&[]).unwrap();
    let config = w.config();
    let parts = load::batch_parts(config);
    // 1 warehouse + 500 ITEM + 500 STOCK + per district 46 customer, 5 name and 273 order batches.
    assert_eq!(parts.len(), 1 + 1000 + 10 * (46 + 5 + 273));
    let mut kinds = BTreeSet::new();
    for part in &parts {
        let kind = format!("{part:?}")
            .split([' ', '{'])
            .next()
            .unwrap()
            .to_string();
        // One batch of each kind (generating all 640,000 rows would be slow in a debug build).
        if kinds.insert(kind) {
            let rows = load::rows(config, part);
            assert!(rows.len() <= MAX_BATCH, "{part:?}: {}", rows.len());
        }
    }
    assert_eq!(kinds.len(), 6);
    let c: Customer = load::customer(config, 1, 1, 2500);
    assert!((300..=500).contains(&c.data.len()));
    let s = load::stock(config, 1, 1);
    assert!(s.dist.iter().all(|d| d.len() == 24));
    // The last-name index of a full district: 1000 names, 3000 customers, sorted by C_FIRST.
    let index = load::name_index(config, 1, 1);
    assert_eq!(index.len(), 1000);
    assert_eq!(index.values().map(Vec::len).sum::<usize>(), 3000);
    for ids in index.values() {
        let firsts: Vec<String> = ids
            .iter()
            .map(|c| load::customer_name(config, 1, 1, *c).1)
            .collect();
        assert!(firsts.is_sorted(), "{firsts:?}");
    }
    assert!(index.values().any(|ids| ids.len() >= 3));
    assert_eq!(config.first_new_order(), 2101);
}

fn new_order(w: u32, d: u8, c: u16, lines: &[(u32, u32, u8)]) -> NewOrder {
    NewOrder {
        w,
        d,
        c,
        lines: lines
            .iter()
            .map(|&(i_id, supply_w_id, quantity)| LineInput {
                i_id,
                supply_w_id,
                quantity,
            })
            .collect(),
        date: 100,
        result: None,
    }
}

#[test]
fn new_order_inserts_the_order_and_takes_stock() {
    let w = tiny(&[]);
    let mut ops = loaded(&w);
    let mut s7: Stock = row(&ops, &stock_key(2, 7)).unwrap();
    s7.quantity = 12;
    put(&mut ops, stock_key(2, 7), &s7);
    let s3: Stock = row(&ops, &stock_key(1, 3)).unwrap();
    let (i3, i7): (Item, Item) = (
        row(&ops, &item_key(1, 3)).unwrap(),
        row(&ops, &item_key(1, 7)).unwrap(),
    );
    let mut p = new_order(1, 2, 5, &[(3, 1, 4), (7, 2, 4)]);
    commit(&mut ops, &mut p).unwrap();
    let district: District = row(&ops, &district_key(1, 2)).unwrap();
    assert_eq!(district.next_o_id, 32);
    let order: Order = row(&ops, &order_key(1, 2, 31)).unwrap();
    assert_eq!(
        order,
        Order {
            c_id: 5,
            entry_d: 100,
            carrier_id: None,
            ol_cnt: 2,
            all_local: false
        }
    );
    assert_eq!(row::<Id>(&ops, &new_order_key(1, 2, 31)), Some(Id(31)));
    assert_eq!(row::<Id>(&ops, &last_order_key(1, 2, 5)), Some(Id(31)));
    let l1: OrderLine = row(&ops, &order_line_key(1, 2, 31, 1)).unwrap();
    assert_eq!((l1.i_id, l1.supply_w_id, l1.quantity), (3, 1, 4));
    assert_eq!((l1.amount, l1.delivery_d), (4 * i3.price, None));
    assert_eq!(l1.dist_info, s3.dist[1]);
    let l2: OrderLine = row(&ops, &order_line_key(1, 2, 31, 2)).unwrap();
    assert_eq!(l2.amount, 4 * i7.price);
    // Plenty of stock: decreased; 12 < 4 + 10: decreased and restocked by 91.
    let s3_after: Stock = row(&ops, &stock_key(1, 3)).unwrap();
    let want = if s3.quantity >= 14 {
        s3.quantity - 4
    } else {
        s3.quantity + 87
    };
    assert_eq!(s3_after.quantity, want);
    assert_eq!(
        (s3_after.ytd, s3_after.order_cnt, s3_after.remote_cnt),
        (4, 1, 0)
    );
    let s7_after: Stock = row(&ops, &stock_key(2, 7)).unwrap();
    assert_eq!(s7_after.quantity, 99);
    assert_eq!(
        (s7_after.ytd, s7_after.order_cnt, s7_after.remote_cnt),
        (4, 1, 1)
    );
    let result = p.result.unwrap();
    assert_eq!(result.o_id, 31);
    assert_eq!(result.brand_generic.len(), 2);
    let c: Customer = row(&ops, &customer_key(1, 2, 5)).unwrap();
    let (wt, dt): (Warehouse, District) = (
        row(&ops, &warehouse_key(1)).unwrap(),
        row(&ops, &district_key(1, 2)).unwrap(),
    );
    let exact = (4 * (i3.price + i7.price)) as f64
        * (1.0 - f64::from(c.discount) / 1e4)
        * (1.0 + f64::from(wt.tax + dt.tax) / 1e4);
    assert!(
        (result.total as f64 - exact).abs() <= 0.5,
        "{result:?} {exact}"
    );
    assert!(failed(&audit(&w, &mut ops)).is_empty());
}

#[test]
fn an_unused_item_rolls_new_order_back() {
    let w = tiny(&[]);
    let mut ops = loaded(&w);
    let before = ops.store.clone();
    let mut p = new_order(1, 1, 1, &[(3, 1, 1), (201, 1, 1)]);
    let e = commit(&mut ops, &mut p).unwrap_err();
    assert_eq!(e, TxnError::Aborted(AbortReason::UserRollback));
    assert!(p.result.is_none());
    assert_eq!(ops.store, before);
    // About 1% of drawn New-Orders end on the unused item number, and no other line does.
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut unused = 0;
    for _ in 0..20_000 {
        let p = NewOrder::draw(w.config(), 1, 2, &mut rng);
        assert!((5..=15).contains(&p.lines.len()));
        let (last, rest) = p.lines.split_last().unwrap();
        assert!(rest.iter().all(|l| (1..=200).contains(&l.i_id)));
        assert!(rest.iter().all(|l| (1..=10).contains(&l.quantity)));
        if last.i_id == 201 {
            unused += 1;
        }
    }
    assert!((150..=250).contains(&unused), "{unused}");
}

#[test]
fn payment_moves_money_and_records_history() {
    let w = tiny(&[]);
    let mut ops = loaded(&w);
    // A remote payment by C_ID for a bad-credit customer.
    let mut c: Customer = row(&ops, &customer_key(2, 7, 9)).unwrap();
    c.credit = "BC".into();
    put(&mut ops, customer_key(2, 7, 9), &c);
    let mut p = Payment {
        w: 1,
        d: 3,
        c_w: 2,
        c_d: 7,
        customer: CustomerBy::Id(9),
        amount: 12_345,
        date: 77,
        c_data_cap: 50,
        result: None,
    };
    commit(&mut ops, &mut p).unwrap();
    assert_eq!(p.result, Some(9));
    let wh: Warehouse = row(&ops, &warehouse_key(1)).unwrap();
    assert_eq!(wh.ytd, 300_000 + 12_345);
    let district: District = row(&ops, &district_key(1, 3)).unwrap();
    assert_eq!((district.ytd, district.next_h_id), (30_000 + 12_345, 32));
    let after: Customer = row(&ops, &customer_key(2, 7, 9)).unwrap();
    assert_eq!(after.balance, -1000 - 12_345);
    assert_eq!((after.ytd_payment, after.payment_cnt), (1000 + 12_345, 2));
    assert!(
        after.data.starts_with("9 7 2 3 1 123.45 "),
        "{}",
        after.data
    );
    assert_eq!(after.data.len(), 50);
    let h: History = row(&ops, &history_key(1, 3, 31)).unwrap();
    assert_eq!(
        h,
        History {
            c_id: 9,
            c_d_id: 7,
            c_w_id: 2,
            d_id: 3,
            w_id: 1,
            date: 77,
            amount: 12_345,
            data: format!("{}    {}", wh.name, district.name),
        }
    );
    // A good-credit customer's C_DATA is left alone.
    let before: Customer = row(&ops, &customer_key(1, 3, 4)).unwrap();
    if before.credit == "GC" {
        let mut p = Payment {
            customer: CustomerBy::Id(4),
            c_w: 1,
            c_d: 3,
            ..p.clone()
        };
        commit(&mut ops, &mut p).unwrap();
        let after: Customer = row(&ops, &customer_key(1, 3, 4)).unwrap();
        assert_eq!(after.data, before.data);
    }
    assert!(failed(&audit(&w, &mut ops)).is_empty());
}

#[test]
fn by_last_name_takes_the_middle_customer_by_first_name() {
    let w = tiny(&[]);
    let mut ops = loaded(&w);
    // Name 5 is customer 6's alone; make it three customers' and four customers'.
    for (ids, want) in [(vec![6], 6), (vec![4, 9, 2], 9), (vec![4, 9, 2, 8], 9)] {
        put(&mut ops, name_index_key(1, 1, 5), &NameIndex(ids));
        let mut p = OrderStatus {
            w: 1,
            d: 1,
            customer: CustomerBy::LastName(5),
            result: None,
        };
        commit(&mut ops, &mut p).unwrap();
        assert_eq!(p.result.unwrap().c_id, want);
    }
    // The index rows the population wrote are sorted by C_FIRST.
    let index = load::name_index(w.config(), 1, 1);
    assert_eq!(
        row(&ops, &name_index_key(1, 1, 7)),
        Some(NameIndex(index[&7].clone()))
    );
}

#[test]
fn order_status_reads_the_customers_latest_order() {
    let w = tiny(&[]);
    let mut ops = loaded(&w);
    let mut p = new_order(2, 4, 11, &[(1, 2, 3), (2, 2, 3), (3, 2, 3)]);
    commit(&mut ops, &mut p).unwrap();
    let mut status = OrderStatus {
        w: 2,
        d: 4,
        customer: CustomerBy::Id(11),
        result: None,
    };
    assert!(status.read_only());
    ops.run(&mut status).unwrap();
    assert!(ops.log.iter().all(|l| l.starts_with("r ")), "{:?}", ops.log);
    let result = status.result.unwrap();
    assert_eq!(
        (result.c_id, result.o_id, result.carrier_id),
        (11, 31, None)
    );
    assert_eq!(result.lines.len(), 3);
    assert_eq!(result.balance, -1000);
}

#[test]
fn delivery_delivers_the_oldest_order_of_every_district() {
    let w = tiny(&[]);
    let mut ops = loaded(&w);
    let orders: Vec<Order> = (1..=DISTRICTS)
        .map(|d| row(&ops, &order_key(1, d, 22)).unwrap())
        .collect();
    let mut p = Delivery {
        w: 1,
        carrier_id: 3,
        date: 50,
        result: None,
    };
    commit(&mut ops, &mut p).unwrap();
    let want: Vec<(u8, u32)> = (1..=DISTRICTS).map(|d| (d, 22)).collect();
    assert_eq!(p.result.as_ref().unwrap(), &want);
    for (d, order) in (1..=DISTRICTS).zip(&orders) {
        assert!(row::<Id>(&ops, &new_order_key(1, d, 22)).is_none());
        assert_eq!(row::<Id>(&ops, &new_order_head_key(1, d)), Some(Id(23)));
        let after: Order = row(&ops, &order_key(1, d, 22)).unwrap();
        assert_eq!(after.carrier_id, Some(3));
        let mut sum = 0;
        for n in 1..=order.ol_cnt {
            let line: OrderLine = row(&ops, &order_line_key(1, d, 22, n)).unwrap();
            assert_eq!(line.delivery_d, Some(50));
            sum += line.amount;
        }
        let c: Customer = row(&ops, &customer_key(1, d, order.c_id)).unwrap();
        assert_eq!((c.balance, c.delivery_cnt), (-1000 + sum, 1));
    }
    // Nine undelivered orders per district: the ninth delivery empties the districts and the
    // tenth skips them all.
    for _ in 0..8 {
        commit(&mut ops, &mut p).unwrap();
    }
    assert_eq!(p.result.as_ref().unwrap().last(), Some(&(10, 30)));
    commit(&mut ops, &mut p).unwrap();
    assert_eq!(p.result, Some(vec![]));
    assert_eq!(row::<Id>(&ops, &new_order_head_key(1, 1)), Some(Id(31)));
    // A new order is delivered next.
    commit(&mut ops, &mut new_order(1, 6, 2, &[(1, 1, 1)])).unwrap();
    commit(&mut ops, &mut p).unwrap();
    assert_eq!(p.result, Some(vec![(6, 31)]));
    assert!(failed(&audit(&w, &mut ops)).is_empty());
}

#[test]
fn stock_level_counts_distinct_low_stock_items_of_recent_orders() {
    let w = tiny(&[("warehouses", "2")]);
    let mut ops = loaded(&w);
    // The low-stock (warehouse, item) pairs of the last 20 orders of each scanned district.
    let expected = |ops: &FakeOps, districts: &[(u32, u8)], threshold: i32| {
        let mut items = BTreeSet::new();
        for &(wh, d) in districts {
            let next = row::<District>(ops, &district_key(wh, d))
                .unwrap()
                .next_o_id;
            for o in next - 20..next {
                let order: Order = row(ops, &order_key(wh, d, o)).unwrap();
                for n in 1..=order.ol_cnt {
                    let line = row::<OrderLine>(ops, &order_line_key(wh, d, o, n)).unwrap();
                    items.insert((wh, line.i_id));
                }
            }
        }
        items
            .into_iter()
            .filter(|(wh, i)| row::<Stock>(ops, &stock_key(*wh, *i)).unwrap().quantity < threshold)
            .count() as u32
    };
    // Make some stock low, in both warehouses.
    for (wh, first) in [(1, 1), (2, 2)] {
        for i in (first..=200).step_by(3) {
            let mut s: Stock = row(&ops, &stock_key(wh, i)).unwrap();
            s.quantity = 11;
            put(&mut ops, stock_key(wh, i), &s);
        }
    }
    // Within the home warehouse, across into the next one, and all 20 from either warehouse
    // (the second wrapping back to the first).
    for (wh, d, districts, threshold) in [
        (1, 4, 1, 15),
        (1, 10, 2, 20),
        (1, 3, 10, 12),
        (1, 1, 20, 20),
        (2, 6, 20, 16),
    ] {
        let mut p = StockLevel {
            w: wh,
            d,
            districts,
            warehouses: 2,
            threshold,
            result: None,
        };
        ops.run(&mut p).unwrap();
        assert!(ops.buffered.is_empty());
        let scanned: Vec<(u32, u8)> = (0..districts)
            .map(|k| {
                let n = d - 1 + k;
                ((wh - 1 + u32::from(n / 10)) % 2 + 1, n % 10 + 1)
            })
            .collect();
        let want = expected(&ops, &scanned, threshold);
        assert!(want > 0);
        assert_eq!(p.result, Some(want), "{scanned:?}");
        ops.log.clear();
    }
}

#[test]
fn the_audit_holds_after_a_run_and_catches_corruption() {
    let w = tiny(&[("remote_new_order", "0.2"), ("remote_payment", "0.5")]);
    let mut ops = loaded(&w);
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let mut committed: BTreeMap<&str, u32> = BTreeMap::new();
    let mut rollbacks = 0;
    for i in 0..600 {
        let mut p = w.next(NodeId(i % 3), &mut rng);
        match commit(&mut ops, p.as_mut()) {
            Ok(()) => *committed.entry(p.name()).or_default() += 1,
            Err(e) => {
                assert_eq!(e, TxnError::Aborted(AbortReason::UserRollback));
                assert_eq!(p.name(), "new-order");
                rollbacks += 1;
            }
        }
    }
    assert_eq!(committed.len(), 5, "{committed:?}");
    assert!(rollbacks <= 10, "{rollbacks}");
    let conditions = audit(&w, &mut ops);
    assert!(failed(&conditions).is_empty(), "{conditions:#?}");

    let corrupt = |change: &dyn Fn(&mut FakeOps)| {
        let mut copy = ops.clone_store();
        change(&mut copy);
        audit(&w, &mut copy)
    };
    // D_NEXT_O_ID off by one either way.
    for delta in [1i64, -1] {
        let conditions = corrupt(&|ops| {
            let mut d: District = row(ops, &district_key(2, 5)).unwrap();
            d.next_o_id = (i64::from(d.next_o_id) + delta) as u32;
            put(ops, district_key(2, 5), &d);
        });
        let fails = failed(&conditions);
        assert!(fails.contains(&"tpcc-2"), "{delta}: {conditions:#?}");
        let c2 = &conditions[1];
        assert!(c2.detail.contains("district 2/5"), "{}", c2.detail);
    }
    // W_YTD off by a cent.
    let conditions = corrupt(&|ops| {
        let mut wh: Warehouse = row(ops, &warehouse_key(1)).unwrap();
        wh.ytd += 1;
        put(ops, warehouse_key(1), &wh);
    });
    assert_eq!(failed(&conditions), ["tpcc-1", "tpcc-8"]);
    assert!(
        conditions[0].detail.contains("warehouse 1: W_YTD"),
        "{conditions:?}"
    );
    // A lost ORDER-LINE row.
    let conditions = corrupt(&|ops| {
        ops.store.remove(&order_line_key(1, 1, 5, 1));
    });
    assert!(
        failed(&conditions).starts_with(&["tpcc-4", "tpcc-6"]),
        "{conditions:#?}"
    );
    // A lost NEW-ORDER row in the middle of a district's queue.
    let conditions = corrupt(&|ops| {
        let head = row::<Id>(ops, &new_order_head_key(1, 2)).unwrap().0;
        ops.store.remove(&new_order_key(1, 2, head + 1));
    });
    assert_eq!(failed(&conditions), ["tpcc-3", "tpcc-5"]);
    // A delivery that forgot the customer.
    let conditions = corrupt(&|ops| {
        let mut c: Customer = row(ops, &customer_key(1, 1, 1)).unwrap();
        c.balance -= 100;
        put(ops, customer_key(1, 1, 1), &c);
    });
    assert_eq!(failed(&conditions), ["tpcc-10", "tpcc-12"]);
    assert!(
        conditions[9].detail.contains("customer 1/1/1"),
        "{conditions:?}"
    );
    // An undelivered line of a delivered order.
    let conditions = corrupt(&|ops| {
        let mut l: OrderLine = row(ops, &order_line_key(2, 2, 1, 2)).unwrap();
        l.delivery_d = None;
        put(ops, order_line_key(2, 2, 1, 2), &l);
    });
    assert_eq!(failed(&conditions), ["tpcc-7"]);
    // A HISTORY row too many.
    let conditions = corrupt(&|ops| {
        let mut h = load::history(1, 1, 1);
        h.amount = 1;
        let next = row::<District>(ops, &district_key(1, 1)).unwrap().next_h_id;
        put(ops, history_key(1, 1, next), &h);
    });
    assert_eq!(failed(&conditions), ["tpcc-8", "tpcc-9", "tpcc-10"]);
    // Index rows that disagree, and garbage.
    let conditions = corrupt(&|ops| {
        put(ops, last_order_key(1, 1, 1), &Id(1));
        ops.set(order_key(1, 3, 3), "garbage");
    });
    let fails = failed(&conditions);
    assert!(
        fails.contains(&"tpcc-index") && fails.contains(&"tpcc-rows"),
        "{fails:?}"
    );
    assert!(
        conditions[12].detail.contains("malformed ORDER row"),
        "{conditions:?}"
    );
}

#[test]
fn the_mix_follows_the_preset() {
    let draws = 20_000;
    for (preset, weights) in [
        ("spec", [45, 43, 4, 4, 4]),
        ("str-a", [5, 83, 12, 0, 0]),
        ("str-b", [45, 43, 12, 0, 0]),
        ("str-c", [5, 43, 52, 0, 0]),
        ("sparkle-10", [3, 3, 45, 4, 45]),
        ("sparkle-50", [23, 23, 25, 4, 25]),
        ("sparkle-90", [43, 43, 5, 4, 5]),
        ("1,0,0,0,1", [50, 0, 0, 0, 50]),
    ] {
        let w = workload(&[("preset", preset)]).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
        for _ in 0..draws {
            let p = w.next(NodeId(0), &mut rng);
            assert_eq!(p.read_only(), Kind::of_name(p.name()).unwrap().read_only());
            *counts.entry(p.name()).or_default() += 1;
        }
        for (kind, weight) in Kind::ALL.iter().zip(weights) {
            let share = f64::from(counts.get(kind.name()).copied().unwrap_or(0)) / 20_000.0;
            let want = f64::from(weight) / 100.0;
            assert!(
                (share - want).abs() < 0.01,
                "{preset} {}: {share}",
                kind.name()
            );
        }
        if let Some(w) = preset_weights(preset) {
            assert_eq!(w.iter().sum::<u32>(), 100, "{preset}");
        }
    }
}

/// The warehouse a generated transaction runs at: the shard of its first key.
fn home_of(p: &mut dyn Procedure) -> u32 {
    let mut ops = FakeOps::default();
    let _ = ops.run(p);
    let first = ops.log.first().unwrap();
    first[2..].split('/').next().unwrap().parse().unwrap()
}

#[test]
fn clients_draw_home_warehouses_from_their_coordinators_partitions() {
    let w = workload(&[("warehouses", "6")]).unwrap();
    assert_eq!(w.warehouses_of(NodeId(0)), [3, 6]);
    assert_eq!(w.warehouses_of(NodeId(1)), [1, 4]);
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let homes: BTreeSet<u32> = (0..200)
        .map(|_| home_of(w.next(NodeId(0), &mut rng).as_mut()))
        .collect();
    assert_eq!(homes, BTreeSet::from([3, 6]));
    let w = workload(&[("warehouses", "6"), ("home_warehouse", "uniform")]).unwrap();
    let homes: BTreeSet<u32> = (0..200)
        .map(|_| home_of(w.next(NodeId(0), &mut rng).as_mut()))
        .collect();
    assert_eq!(homes, (1..=6).collect());
    // Warehouse 1 is in partition 1, which node 0 does not replicate: it falls back to all.
    let w = workload(&[]).unwrap();
    assert_eq!(w.warehouses_of(NodeId(0)), [1]);
    assert_eq!(w.warehouses_of(NodeId(7)), [1]);
}

#[test]
fn master_home_warehouses_are_those_of_the_partitions_a_node_masters() {
    let lan = LatencyProfile::named("lan").unwrap();
    // Three nodes, each replicating two of the three partitions and mastering one.
    let placement = Arc::new(Placement::ring(lan, 3, 2).unwrap());
    let set = [("warehouses", "6"), ("home_warehouse", "master")];
    let master = Tpcc::new(&given(&set), Arc::clone(&placement)).unwrap();
    let local = Tpcc::new(&given(&set[..1]), Arc::clone(&placement)).unwrap();
    for node in placement.nodes() {
        let mine = master.warehouses_of(node);
        assert_eq!(
            mine.len(),
            2,
            "{node:?} masters one partition of two warehouses"
        );
        for w in mine {
            assert_eq!(placement.master(PartitionId(w % 3)), node);
        }
        assert_eq!(
            local.warehouses_of(node).len(),
            4,
            "{node:?} replicates two"
        );
    }
    let err = workload(&[("home_warehouse", "nearest")]).err().unwrap();
    assert!(
        err.to_string().contains("local, master or uniform"),
        "{err}"
    );
}

#[test]
fn remote_warehouses_follow_the_rates() {
    let w = tiny(&[("warehouses", "3"), ("remote_new_order", "0.1")]);
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    let (mut lines, mut remote_lines, mut payments, mut remote_payments) = (0, 0, 0, 0);
    let mut by_name = 0;
    for _ in 0..5000 {
        let p = NewOrder::draw(w.config(), 2, 2, &mut rng);
        lines += p.lines.len();
        remote_lines += p.lines.iter().filter(|l| l.supply_w_id != 2).count();
        assert!(p.lines.iter().all(|l| (1..=3).contains(&l.supply_w_id)));
        let p = Payment::draw(w.config(), 2, 2, &mut rng);
        payments += 1;
        if p.c_w != 2 {
            remote_payments += 1;
            assert!([1, 3].contains(&p.c_w));
        } else {
            assert_eq!(p.c_d, p.d);
        }
        if let CustomerBy::LastName(n) = p.customer {
            assert!(n < 30);
            by_name += 1;
        }
    }
    let share = remote_lines as f64 / lines as f64;
    assert!((share - 0.1).abs() < 0.01, "{share}");
    let share = f64::from(remote_payments) / f64::from(payments);
    assert!((share - 0.15).abs() < 0.02, "{share}");
    assert!((2800..=3200).contains(&by_name), "{by_name}");
    // One warehouse: everything is home.
    let w = tiny(&[
        ("warehouses", "1"),
        ("remote_new_order", "1"),
        ("remote_payment", "1"),
    ]);
    for _ in 0..100 {
        let p = NewOrder::draw(w.config(), 1, 2, &mut rng);
        assert!(p.lines.iter().all(|l| l.supply_w_id == 1));
        assert_eq!(Payment::draw(w.config(), 1, 2, &mut rng).c_w, 1);
    }
}

#[test]
fn keying_and_think_times_are_offered_when_on() {
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let off = workload(&[]).unwrap();
    assert_eq!(off.pause("new-order", &mut rng), None);
    let on = workload(&[("keying_and_think_time", "on")]).unwrap();
    for _ in 0..100 {
        let pause = on.pause("new-order", &mut rng).unwrap().as_secs_f64();
        assert!((18.0..=18.0 + 120.0).contains(&pause), "{pause}");
        let pause = on.think_time_ms("stock-level", &mut rng).unwrap();
        assert!((2000.0..=2000.0 + 50_000.0).contains(&pause), "{pause}");
    }
    assert_eq!(on.pause("load", &mut rng), None);
}

#[test]
fn settings_are_echoed_and_validated() {
    let w = workload(&[]).unwrap();
    let s = w.settings();
    assert_eq!(s["warehouses"], 1);
    assert_eq!(s["preset"], "spec");
    assert_eq!(
        s["weights"],
        serde_json::json!({"new-order": 45, "payment": 43, "order-status": 4,
                           "delivery": 4, "stock-level": 4})
    );
    assert_eq!(s["stock_level_districts"], 1);
    assert_eq!(s["remote_new_order"], 0.01);
    assert_eq!(s["remote_payment"], 0.15);
    assert_eq!(s["home_warehouse"], "local");
    assert_eq!(s["keying_and_think_time"], "off");
    assert_eq!(s["data_size"], "spec");
    assert_eq!(s["customers_per_district"], 3000);
    assert_eq!(s["items"], 100000);
    assert_eq!(s["deviations"].as_array().unwrap().len(), 4, "{s}");
    let load = &s["nurand_c"]["load"]["c_last"];
    let run = &s["nurand_c"]["run"]["c_last"];
    assert!(random::c_last_delta_is_valid(
        load.as_u64().unwrap() as u32,
        run.as_u64().unwrap() as u32
    ));
    let w = tiny(&[("preset", "str-b"), ("stock_level_districts", "3")]);
    let deviations = w.settings()["deviations"].to_string();
    for what in [
        "str-b",
        "3 districts",
        "compact",
        "30 customers",
        "200 items",
    ] {
        assert!(deviations.contains(what), "{what}: {deviations}");
    }
    let e = workload(&[("warehouse", "3")]).err().unwrap();
    assert!(matches!(e, WorkloadError::UnknownSetting { .. }), "{e}");
    for bad in [
        ("warehouses", "0"),
        ("warehouses", "many"),
        ("preset", "tpcc"),
        ("preset", "1,2,3"),
        ("preset", "0,0,0,0,0"),
        ("stock_level_districts", "0"),
        ("stock_level_districts", "11"),
        ("stock_level_districts", "21"),
        ("remote_new_order", "1.5"),
        ("remote_payment", "-0.1"),
        ("home_warehouse", "near"),
        ("keying_and_think_time", "maybe"),
        ("data_size", "huge"),
        ("customers_per_district", "0"),
        ("customers_per_district", "3001"),
        ("items", "0"),
        ("items", "100001"),
    ] {
        let e = workload(&[bad]).err().unwrap();
        assert!(matches!(e, WorkloadError::BadValue { .. }), "{bad:?}: {e}");
    }
}

/// One full-size warehouse: every batch loads, and the audit holds before and after a run.
/// Slow in a debug build; run with `cargo test --release -- --ignored full_size`.
#[test]
#[ignore]
fn a_full_size_warehouse_loads_and_audits() {
    let w = workload(&[]).unwrap();
    let mut ops = loaded(&w);
    assert_eq!(count(&ops, 1, b'C'), 30_000);
    assert_eq!(count(&ops, 1, b'N'), 9_000);
    assert_eq!(count(&ops, 1, b'S'), 100_000);
    let conditions = audit(&w, &mut ops);
    assert!(failed(&conditions).is_empty(), "{conditions:#?}");
    let mut rng = ChaCha8Rng::seed_from_u64(10);
    for _ in 0..2000 {
        let _ = commit(&mut ops, w.next(NodeId(1), &mut rng).as_mut());
    }
    let conditions = audit(&w, &mut ops);
    assert!(failed(&conditions).is_empty(), "{conditions:#?}");
}

/// A small database at the specification's mix and rates: one warehouse.
fn small(extra: &[(&str, &str)]) -> Tpcc {
    let mut set = vec![
        ("customers_per_district", "30"),
        ("items", "200"),
        ("data_size", "compact"),
    ];
    set.extend_from_slice(extra);
    workload(&set).unwrap()
}

#[test]
fn every_transaction_ships_as_a_call_of_its_name() {
    let w = tiny(&[]);
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut seen = BTreeSet::new();
    for _ in 0..2000 {
        let p = w.next(NodeId(0), &mut rng);
        let call = p.call().expect("a one-shot call");
        assert_eq!(
            (call.workload.as_str(), call.procedure.as_str()),
            ("tpcc", p.name())
        );
        seen.insert(p.name());
    }
    let all: BTreeSet<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(seen, all);
}

#[test]
fn calls_replay_at_the_specifications_mix() {
    crate::testing::assert_calls_replay(&small(&[]), 3, 400);
}

/// Several warehouses with many remote lines and customers, multi-district Stock-Levels, and a
/// mix with more of the rarer types.
#[test]
fn calls_replay_across_warehouses() {
    let w = small(&[
        ("warehouses", "4"),
        ("remote_new_order", "0.3"),
        ("remote_payment", "0.5"),
        ("stock_level_districts", "13"),
        ("preset", "30,30,10,15,15"),
        ("home_warehouse", "uniform"),
    ]);
    crate::testing::assert_calls_replay(&w, 3, 400);
}

#[test]
fn unknown_procedures_and_bad_arguments_are_refused() {
    let names: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
    crate::testing::assert_refuses_bad_calls("tpcc", "new-orders", &names);
    let invalid = |e: RequestError, procedure: &str| match e {
        RequestError::Invalid(why) => assert!(why.contains(procedure), "{why}"),
        other => panic!("{procedure}: {other:?}"),
    };
    // Arguments that decode but that no terminal draws, on which the bodies would panic.
    let mut lines = new_order(1, 1, 1, &[(1, 1, 1); 5]);
    lines.lines = vec![lines.lines[0]; 300];
    let bad: [(&str, Box<dyn Procedure>); 5] = [
        ("new-order", Box::new(new_order(1, 0, 1, &[(1, 1, 1); 5]))),
        ("new-order", Box::new(lines)),
        (
            "payment",
            Box::new(Payment {
                w: 1,
                d: 1,
                c_w: 1,
                c_d: 1,
                customer: CustomerBy::Id(1),
                amount: i64::MAX,
                date: 2,
                c_data_cap: 50,
                result: None,
            }),
        ),
        (
            "stock-level",
            Box::new(StockLevel {
                w: 1,
                d: 10,
                districts: 255,
                warehouses: 1,
                threshold: 15,
                result: None,
            }),
        ),
        (
            "stock-level",
            Box::new(StockLevel {
                w: 1,
                d: 1,
                districts: 11,
                warehouses: 1,
                threshold: 15,
                result: None,
            }),
        ),
    ];
    for (procedure, p) in bad {
        invalid(refused(&p.call().unwrap()), procedure);
    }
}

/// The keys a procedure reads (before writing them) and writes, over a store.
struct Touched<'a> {
    store: &'a mut FakeOps,
    reads: BTreeSet<Key>,
    writes: BTreeSet<Key>,
}

impl augur_client::Ops for Touched<'_> {
    fn read<'a>(
        &'a mut self,
        key: &'a Key,
    ) -> futures::future::BoxFuture<'a, Result<Option<augur_types::Value>, TxnError>> {
        if !self.writes.contains(key) {
            self.reads.insert(key.clone());
        }
        self.store.read(key)
    }

    fn write(&mut self, key: Key, value: Option<augur_types::Value>) -> Result<(), TxnError> {
        self.writes.insert(key.clone());
        self.store.write(key, value)
    }
}

/// What `calvin` locks from a declaration must cover what the body touches: every key it reads,
/// and the lock (the key, or its counter's row) of every key it writes. Only New-Order and
/// Payment by customer id declare.
#[test]
fn declared_keys_cover_every_key_new_order_and_payment_by_id_touch() {
    let w = tiny(&[("remote_new_order", "0.3"), ("remote_payment", "0.5")]);
    let mut ops = loaded(&w);
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut declared_by = BTreeSet::new();
    for _ in 0..3000 {
        let mut p = w.next(NodeId(0), &mut rng);
        let Some(declared) = p.declared_keys() else {
            let call = p.call().unwrap();
            let by_id = match p.name() {
                "payment" => {
                    let payment: Payment = call.decode().unwrap();
                    matches!(payment.customer, CustomerBy::Id(_))
                }
                "new-order" => true,
                _ => false,
            };
            assert!(!by_id, "{} declares nothing", p.name());
            continue;
        };
        declared_by.insert(p.name());
        let mut touched = Touched {
            store: &mut ops,
            reads: BTreeSet::new(),
            writes: BTreeSet::new(),
        };
        let result = futures::executor::block_on(p.run(&mut touched));
        let (reads, writes) = (touched.reads, touched.writes);
        let declared_reads: BTreeSet<&Key> = declared.reads.iter().collect();
        for key in &reads {
            assert!(
                declared_reads.contains(key),
                "{}: read {key} undeclared",
                p.name()
            );
        }
        for key in &writes {
            let lock = counter_guard(key).unwrap_or_else(|| key.clone());
            assert!(
                declared.writes.contains(&lock),
                "{}: wrote {key} undeclared",
                p.name()
            );
        }
        match result {
            Ok(()) => ops.commit(),
            Err(_) => {
                ops.buffered.clear();
                ops.log.clear();
            }
        }
    }
    assert_eq!(declared_by, BTreeSet::from(["new-order", "payment"]));
}
