//! Tests of the whole workload against the in-memory store: the mix, the population, each
//! read-write interaction's effects, the read-only ones, the audit, the settings.

use super::load::{self, MAX_BATCH};
use super::mix::{self, Interaction, STATIONARY};
use super::schema::*;
use super::txns::*;
use super::*;
use crate::Condition;
use crate::list_append::fake::FakeOps;
use crate::testing::refused;
use crate::tpcc::schema::Row;
use augur_client::TxnError;
use augur_types::{Key, LatencyProfile, ProcedureCall, RequestError};
use rand::SeedableRng;
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

fn workload(set: &[(&str, &str)]) -> Result<Rubis, WorkloadError> {
    Rubis::new(&given(set), placement(3))
}

/// Three shards; 60 users, 30 old and 40 active items, 4 categories, 5 regions, up to 6 bids.
fn tiny(extra: &[(&str, &str)]) -> Rubis {
    let mut set = vec![
        ("users", "60"),
        ("old_items", "30"),
        ("items", "40"),
        ("categories", "4"),
        ("regions", "5"),
        ("bids_per_item", "6"),
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

fn loaded(w: &Rubis) -> FakeOps {
    let mut ops = FakeOps::default();
    for mut p in w.load() {
        assert_eq!(p.name(), "load");
        commit(&mut ops, p.as_mut()).unwrap();
    }
    ops
}

fn copy(ops: &FakeOps) -> FakeOps {
    FakeOps {
        store: ops.store.clone(),
        ..FakeOps::default()
    }
}

fn row<R: Row>(ops: &FakeOps, key: &Key) -> Option<R> {
    ops.store.get(key).map(|v| R::decode(v).unwrap())
}

fn put<R: Row>(ops: &mut FakeOps, key: Key, row: &R) {
    ops.store.insert(key, row.encode());
}

fn audit(w: &Rubis, ops: &mut FakeOps) -> Vec<Condition> {
    let mut audit = w.audit().unwrap();
    let conditions = futures::executor::block_on(audit.run(ops)).unwrap();
    assert!(ops.buffered.is_empty(), "the audit writes nothing");
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

/// How many stored keys carry table tag `tag`.
fn count(ops: &FakeOps, tag: u8) -> usize {
    ops.store.keys().filter(|k| k.as_bytes()[4] == tag).count()
}

fn counter(ops: &FakeOps, layout: &Layout, s: u32, table: Table) -> u32 {
    row::<Id>(ops, &layout.counter(s, table)).unwrap().0
}

#[test]
fn stationary_matches_a_walk_of_the_table() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let walked = mix::walk(2_000_000, || rng.random_range(0.0..1.0));
    for (i, (w, s)) in Interaction::ALL.iter().zip(walked.iter().zip(STATIONARY)) {
        assert!((w - s).abs() < 0.12, "{i:?}: walked {w}, table {s}");
    }
    assert!((STATIONARY.iter().sum::<f64>() - 100.0).abs() < 0.01);
    // Nothing leads to PutCommentAuth in the default set.
    assert_eq!(walked[Interaction::PutCommentAuth as usize], 0.0);
}

/// Prints the stationary shares of a long walk, to refresh [`STATIONARY`]:
/// `cargo test --release -- --ignored print_stationary --nocapture`.
#[test]
#[ignore]
fn print_stationary() {
    let mut rng = ChaCha8Rng::seed_from_u64(2024);
    let walked = mix::walk(1_000_000_000, || rng.random_range(0.0..1.0));
    let shares: Vec<String> = walked.iter().map(|s| format!("{s:.3}")).collect();
    println!("[{}]", shares.join(", "));
}

#[test]
fn the_table_is_normalised_per_state() {
    for (i, from) in Interaction::ALL.iter().zip(mix::TABLE) {
        let total = from.total();
        assert!((0.96..=1.21).contains(&total), "{i:?}: {total}");
        for u in [0.0, 0.3, 0.999_999] {
            let _ = mix::step(*i, u);
        }
        let wait = i.waiting_time().as_millis();
        assert!((2000..=10_000).contains(&wait), "{i:?}: {wait}");
    }
    assert_eq!(
        mix::step(Interaction::Home, 0.0),
        mix::Step::To(Interaction::Register)
    );
    assert_eq!(mix::step(Interaction::StoreBid, 0.999), mix::Step::End);
    assert_eq!(mix::step(Interaction::ViewUserInfo, 0.5), mix::Step::Back);
    let q = mix::next_page_probability(Interaction::SearchItemsInCategory);
    assert!((q - 0.4 / 1.2079).abs() < 1e-9, "{q}");
    let db: Vec<_> = Interaction::ALL
        .into_iter()
        .filter(|i| i.touches_database())
        .collect();
    assert_eq!(db.len(), 18);
    assert_eq!(db.iter().filter(|i| i.read_write()).count(), 5);
    for i in Interaction::ALL {
        assert_eq!(Interaction::of_name(i.name()), Some(i));
    }
}

#[test]
fn weights_scale_the_updates_to_the_fraction() {
    let w = mix::weights(Some(0.15));
    assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    let rw: f64 = Interaction::ALL
        .iter()
        .zip(w)
        .filter(|(i, _)| i.read_write())
        .map(|(_, w)| w)
        .sum();
    assert!((rw - 0.15).abs() < 1e-9);
    for (i, w) in Interaction::ALL.iter().zip(w) {
        assert_eq!(
            w > 0.0,
            i.touches_database() && *i != Interaction::PutCommentAuth
        );
    }
    // Within a class the walk's proportions stay.
    let ratio = |w: &[f64; 27], a: Interaction, b: Interaction| w[a as usize] / w[b as usize];
    let (a, b) = (Interaction::StoreBid, Interaction::RegisterItem);
    let stationary = STATIONARY[a as usize] / STATIONARY[b as usize];
    assert!((ratio(&w, a, b) - stationary).abs() < 1e-9);
    let matrix = mix::weights(None);
    let f = mix::stationary_update_fraction();
    assert!((0.09..0.12).contains(&f), "{f}");
    let rw: f64 = Interaction::ALL
        .iter()
        .zip(matrix)
        .filter(|(i, _)| i.read_write())
        .map(|(_, w)| w)
        .sum();
    assert!((rw - f).abs() < 1e-9);
    assert_eq!(mix::weights(Some(1.0))[Interaction::ViewItem as usize], 0.0);
}

#[test]
fn the_mix_draws_15_percent_updates() {
    let w = tiny(&[]);
    let weights = w.weights();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let draws = 40_000;
    let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
    let mut updates = 0;
    for _ in 0..draws {
        let p = w.next(NodeId(1), &mut rng);
        let i = Interaction::of_name(p.name()).unwrap();
        assert!(i.touches_database());
        assert_eq!(p.read_only(), !i.read_write(), "{i:?}");
        updates += u32::from(!p.read_only());
        *counts.entry(p.name()).or_default() += 1;
    }
    let share = f64::from(updates) / f64::from(draws);
    assert!((share - 0.15).abs() < 0.01, "{share}");
    for (i, weight) in Interaction::ALL.iter().zip(weights) {
        let got = f64::from(counts.get(i.name()).copied().unwrap_or(0)) / f64::from(draws);
        assert!((got - weight).abs() < 0.008, "{i:?}: {got} vs {weight}");
    }
    assert_eq!(counts.len(), 18);
    let w = tiny(&[("update_fraction", "matrix")]);
    let updates = (0..draws)
        .filter(|_| !w.next(NodeId(0), &mut rng).read_only())
        .count();
    let share = updates as f64 / f64::from(draws);
    assert!(
        (share - mix::stationary_update_fraction()).abs() < 0.01,
        "{share}"
    );
}

#[test]
fn population_is_bounded_and_consistent() {
    let w = tiny(&[]);
    let config = w.config().clone();
    let layout = config.layout;
    let parts = load::batch_parts(&config);
    for part in &parts {
        let rows = load::rows(&config, part);
        assert!(!rows.is_empty() && rows.len() <= MAX_BATCH, "{part:?}");
    }
    let ops = loaded(&w);
    assert_eq!(count(&ops, b'U'), 60);
    assert_eq!(count(&ops, b'n'), 60);
    assert_eq!(count(&ops, b'O'), 30);
    assert_eq!(count(&ops, b'I'), 40);
    assert_eq!(count(&ops, b'C'), 70, "one comment per item");
    assert_eq!(count(&ops, b'N'), 0);
    assert_eq!(count(&ops, b'T'), 4);
    assert_eq!(count(&ops, b'G'), 5);
    assert_eq!(count(&ops, b'#'), 3 * 5);
    let bids = count(&ops, b'B');
    assert!((70..=70 * 6).contains(&bids), "{bids}");
    // Users: the generator's credentials; comments and rating agree.
    let u7: User = row(&ops, &layout.user(7)).unwrap();
    assert_eq!(
        (u7.nickname.as_str(), u7.password.as_str()),
        ("user7", "password7")
    );
    assert_eq!(row::<Id>(&ops, &layout.nickname("user7")), Some(Id(7)));
    assert!((1..=5).contains(&u7.region));
    let mut sellers = BTreeSet::new();
    for i in 1..=70u32 {
        let key = if i <= 30 {
            layout.old_item(i)
        } else {
            layout.item(i)
        };
        let item: Item = row(&ops, &key).unwrap();
        assert_eq!(layout.shard_of(item.seller), layout.shard_of(i), "{i}");
        sellers.insert(item.seller);
        assert!((1..=4).contains(&item.category));
        assert!(item.quantity >= 1 && item.quantity <= 10);
        assert_eq!(item.open(LOAD_DATE), i > 30, "{i}: {item:?}");
        let mut last = item.initial_price;
        for n in 1..=item.nb_of_bids {
            let bid: Bid = row(&ops, &layout.bid(i, n)).unwrap();
            assert!(bid.bid > last);
            last = bid.bid;
            assert_eq!(layout.shard_of(bid.id), layout.shard_of(i));
            assert!(bid.id < counter(&ops, &layout, layout.shard_of(i), Table::Bids));
        }
        assert!(!ops.store.contains_key(&layout.bid(i, item.nb_of_bids + 1)));
        if item.nb_of_bids > 0 {
            assert_eq!(item.max_bid, last);
        }
    }
    // The seller's list is its most recent items.
    let seller = *sellers.iter().next().unwrap();
    let list: IdList = row(&ops, &layout.selling(seller)).unwrap();
    assert!(list.0.is_sorted_by(|a, b| a > b));
    let seller_row: User = row(&ops, &layout.user(seller)).unwrap();
    assert_eq!(seller_row.nb_comments as usize, list.0.len());
    // Counters start above the population.
    for s in 0..3 {
        assert!(counter(&ops, &layout, s, Table::Users) > 60);
        assert_eq!(counter(&ops, &layout, s, Table::Users) % 3, s);
        assert!(counter(&ops, &layout, s, Table::Items) > 70);
        assert_eq!(
            counter(&ops, &layout, s, Table::BuyNow),
            layout.next_above(0, s)
        );
    }
    // The category index of shard 1, category 2: its active items in order.
    let want: Vec<u32> = (31..=70)
        .filter(|i| layout.shard_of(*i) == 1)
        .filter(|i| load::item_owner(&config, *i).1 == 2)
        .collect();
    let head = row::<Id>(&ops, &layout.category_head(1, 2)).map_or(0, |Id(n)| n);
    assert_eq!(head as usize, want.len());
    let bucket: IdList = row(&ops, &layout.category_bucket(1, 2, 0)).unwrap_or_default();
    assert_eq!(bucket.0, want);
    let conditions = audit(&w, &mut copy(&ops));
    assert_eq!(
        conditions
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>(),
        [
            "rubis-bids",
            "rubis-comments",
            "rubis-buy-now",
            "rubis-ids",
            "rubis-index",
            "rubis-rows"
        ]
    );
    assert!(failed(&conditions).is_empty(), "{conditions:#?}");
    assert!(
        conditions[0].detail.contains("all 70 items"),
        "{conditions:?}"
    );
}

#[test]
fn default_scale_batches_stay_bounded() {
    let w = workload(&[]).unwrap();
    let config = w.config();
    let parts = load::batch_parts(config);
    let mut kinds = BTreeSet::new();
    for part in &parts {
        let kind = format!("{part:?}")
            .split([' ', '{'])
            .next()
            .unwrap()
            .to_string();
        if kinds.insert(kind) {
            assert!(load::rows(config, part).len() <= MAX_BATCH, "{part:?}");
        }
    }
    assert_eq!(kinds.len(), 6);
    // Every Items part holds at most MAX_BATCH keys by construction; check a sample.
    for part in parts
        .iter()
        .filter(|p| matches!(p, load::Part::Items { .. }))
        .step_by(97)
    {
        assert!(load::rows(config, part).len() <= MAX_BATCH);
    }
}

fn register_item(w: &Rubis, seller: u32, category: u16, date: u64) -> RegisterItem {
    let mut rng = ChaCha8Rng::seed_from_u64(u64::from(seller));
    let mut p = RegisterItem::draw(Arc::clone(w.config()), seller, date, &mut rng);
    p.category = category;
    p
}

#[test]
fn register_item_allocates_in_the_sellers_shard_and_indexes_it() {
    let w = tiny(&[]);
    let layout = w.config().layout;
    let mut ops = loaded(&w);
    let seller = 8; // shard 2
    let region = row::<User>(&ops, &layout.user(seller)).unwrap().region;
    let before = counter(&ops, &layout, 2, Table::Items);
    let head = row::<Id>(&ops, &layout.category_head(2, 3)).map_or(0, |Id(n)| n);
    let mut p = register_item(&w, seller, 3, LOAD_DATE + 5);
    commit(&mut ops, &mut p).unwrap();
    let id = p.result.unwrap();
    assert_eq!(id, before);
    assert_eq!(counter(&ops, &layout, 2, Table::Items), before + 3);
    let item: Item = row(&ops, &layout.item(id)).unwrap();
    assert_eq!((item.seller, item.category, item.nb_of_bids), (8, 3, 0));
    assert_eq!(item.start_date, LOAD_DATE + 5);
    assert!(item.end_date >= LOAD_DATE + 5 + DAY);
    let list: IdList = row(&ops, &layout.selling(seller)).unwrap();
    assert_eq!(list.0[0], id);
    assert_eq!(
        row::<Id>(&ops, &layout.category_head(2, 3)),
        Some(Id(head + 1))
    );
    let bucket: IdList = row(&ops, &layout.category_bucket(2, 3, head / BUCKET)).unwrap();
    assert_eq!(bucket.0.last(), Some(&id));
    let rhead = row::<Id>(&ops, &layout.region_head(2, region, 3))
        .unwrap()
        .0;
    let rbucket: IdList = row(
        &ops,
        &layout.region_bucket(2, region, 3, (rhead - 1) / BUCKET),
    )
    .unwrap();
    assert_eq!(rbucket.0.last(), Some(&id));
    // Every key written lives in the seller's shard: a local transaction.
    for _ in 0..25 {
        let mut p = register_item(&w, seller, 3, LOAD_DATE + 6);
        ops.run(&mut p).unwrap();
        assert!(ops.buffered.iter().all(|(k, _)| k.shard() == 2));
        ops.commit();
    }
    // 26 more entries: the index spilled into a new bucket.
    let head = row::<Id>(&ops, &layout.category_head(2, 3)).unwrap().0;
    assert!(head > BUCKET);
    assert!(ops.store.contains_key(&layout.category_bucket(2, 3, 1)));
    assert_eq!(
        row::<IdList>(&ops, &layout.selling(seller))
            .unwrap()
            .0
            .len(),
        LIST_CAP
    );
    assert!(failed(&audit(&w, &mut copy(&ops))).is_empty());
}

#[test]
fn register_user_takes_a_local_id_unless_the_nickname_is_taken() {
    let w = tiny(&[]);
    let layout = w.config().layout;
    let mut ops = loaded(&w);
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut p = RegisterUser::draw(Arc::clone(w.config()), 4, LOAD_DATE + 9, &mut rng);
    let before = counter(&ops, &layout, 1, Table::Users);
    commit(&mut ops, &mut p).unwrap();
    let id = p.result.unwrap().unwrap();
    assert_eq!((id, layout.shard_of(id)), (before, 1));
    let user: User = row(&ops, &layout.user(id)).unwrap();
    assert_eq!(user, p.user);
    assert_eq!(user.creation_date, LOAD_DATE + 9);
    assert_eq!(
        row::<Id>(&ops, &layout.nickname(&user.nickname)),
        Some(Id(id))
    );
    // The same nickname again: RUBiS's error page, nothing written.
    let store = ops.store.clone();
    commit(&mut ops, &mut p).unwrap();
    assert_eq!(p.result, Some(None));
    assert_eq!(ops.store, store);
    p.user.nickname = "user3".into();
    commit(&mut ops, &mut p).unwrap();
    assert_eq!(p.result, Some(None));
    assert!(failed(&audit(&w, &mut copy(&ops))).is_empty());
}

fn store_bid(w: &Rubis, user: u32, item: u32, raise: i64) -> StoreBid {
    StoreBid {
        config: Arc::clone(w.config()),
        user,
        item,
        raise,
        extra: 50,
        qty: 1,
        date: LOAD_DATE + 20,
        result: None,
    }
}

#[test]
fn store_bid_raises_the_price_and_records_the_bid() {
    let w = tiny(&[]);
    let layout = w.config().layout;
    let mut ops = loaded(&w);
    let i = 40; // shard 1
    let before: Item = row(&ops, &layout.item(i)).unwrap();
    // The bid is stored with the item but numbered by the bidder's shard.
    let bidder_shard = layout.shard_of(5);
    assert_ne!(bidder_shard, layout.shard_of(i));
    let bid_counter = counter(&ops, &layout, bidder_shard, Table::Bids);
    let mut p = store_bid(&w, 5, i, 700);
    commit(&mut ops, &mut p).unwrap();
    let amount = before.max_bid.max(before.initial_price) + 700;
    assert_eq!(p.result, Some(amount));
    let after: Item = row(&ops, &layout.item(i)).unwrap();
    assert_eq!(
        (after.nb_of_bids, after.max_bid),
        (before.nb_of_bids + 1, amount)
    );
    let bid: Bid = row(&ops, &layout.bid(i, after.nb_of_bids)).unwrap();
    assert_eq!(
        bid,
        Bid {
            id: bid_counter,
            user: 5,
            qty: 1,
            bid: amount,
            max_bid: amount + 50,
            date: LOAD_DATE + 20,
        }
    );
    assert_eq!(
        counter(&ops, &layout, bidder_shard, Table::Bids),
        bid_counter + 3
    );
    assert_eq!(row::<IdList>(&ops, &layout.bidding(5)).unwrap().0[0], i);
    // A second bid by someone else outbids the first.
    let mut p = store_bid(&w, 6, i, 100);
    commit(&mut ops, &mut p).unwrap();
    assert_eq!(p.result, Some(amount + 100));
    let history = {
        let mut p = ViewBidHistory {
            config: Arc::clone(w.config()),
            item: i,
            result: None,
        };
        commit(&mut ops, &mut p).unwrap();
        p.result.unwrap()
    };
    assert_eq!(history.1.len() as u32, before.nb_of_bids + 2);
    assert_eq!(history.1.last().unwrap().1, "user6");
    assert!(failed(&audit(&w, &mut copy(&ops))).is_empty());
}

#[test]
fn store_buy_now_sells_units_and_closes_sold_out_auctions() {
    let w = tiny(&[]);
    let layout = w.config().layout;
    let mut ops = loaded(&w);
    let i = 50;
    let mut item: Item = row(&ops, &layout.item(i)).unwrap();
    item.quantity = 3;
    put(&mut ops, layout.item(i), &item);
    let date = LOAD_DATE + 30;
    let buy = |buyer, qty| StoreBuyNow {
        config: Arc::clone(w.config()),
        buyer,
        item: i,
        qty,
        date,
        result: None,
    };
    let mut p = buy(10, 2);
    commit(&mut ops, &mut p).unwrap();
    assert_eq!(p.result, Some(2));
    let after: Item = row(&ops, &layout.item(i)).unwrap();
    assert_eq!((after.quantity, after.end_date), (1, item.end_date));
    let buyer: User = row(&ops, &layout.user(10)).unwrap();
    assert_eq!(buyer.nb_bought, 1);
    let purchase: Purchase = row(&ops, &layout.buy_now(10, 1)).unwrap();
    assert_eq!(
        purchase,
        Purchase {
            id: layout.next_above(0, 1),
            item: i,
            qty: 2,
            date
        }
    );
    // Asking for more than is left buys the rest and closes the auction.
    let mut p = buy(11, 5);
    commit(&mut ops, &mut p).unwrap();
    assert_eq!(p.result, Some(1));
    let after: Item = row(&ops, &layout.item(i)).unwrap();
    assert_eq!((after.quantity, after.end_date), (0, date));
    // Nothing left: RUBiS's error page, nothing written.
    let store = ops.store.clone();
    let mut p = buy(12, 1);
    p.date = date + 1;
    commit(&mut ops, &mut p).unwrap();
    assert_eq!(p.result, Some(0));
    assert_eq!(ops.store, store);
    // Sold-out auctions drop out of searches.
    let category = after.category;
    let mut search = SearchItemsInCategory {
        config: Arc::clone(w.config()),
        category,
        page: 0,
        date: date + 1,
        result: None,
    };
    commit(&mut ops, &mut search).unwrap();
    assert!(search.result.unwrap().iter().all(|(id, _)| *id != i));
    // The purchase shows in AboutMe.
    let mut about = AboutMe {
        config: Arc::clone(w.config()),
        login: Login::of(10),
        date: date + 2,
        result: None,
    };
    commit(&mut ops, &mut about).unwrap();
    let page = about.result.unwrap().unwrap();
    assert_eq!(page.bought.len(), 1);
    assert_eq!(page.bought[0].0.item, i);
    // The audit accounts for the units bought (the item's loaded quantity was not 3).
    let mut fixed = copy(&ops);
    let mut item: Item = row(&fixed, &layout.item(i)).unwrap();
    item.quantity = load::item_with_bids(w.config(), i)
        .0
        .quantity
        .saturating_sub(3);
    put(&mut fixed, layout.item(i), &item);
    let loaded_quantity = load::item_with_bids(w.config(), i).0.quantity;
    let conditions = audit(&w, &mut fixed);
    if loaded_quantity >= 3 {
        assert!(failed(&conditions).is_empty(), "{conditions:#?}");
    }
    let conditions = audit(&w, &mut copy(&ops));
    assert_eq!(failed(&conditions), ["rubis-buy-now"]);
}

#[test]
fn store_comment_moves_the_rating() {
    let w = tiny(&[]);
    let layout = w.config().layout;
    let mut ops = loaded(&w);
    let before: User = row(&ops, &layout.user(9)).unwrap();
    // Numbered by the commenter's shard (user 4), not the receiver's (user 9).
    assert_ne!(layout.shard_of(4), layout.shard_of(9));
    let comments = counter(&ops, &layout, layout.shard_of(4), Table::Comments);
    let mut p = StoreComment {
        config: Arc::clone(w.config()),
        from: 4,
        to: 9,
        item: 33,
        rating: -5,
        comment: "late".into(),
        date: LOAD_DATE + 40,
        result: None,
    };
    commit(&mut ops, &mut p).unwrap();
    assert_eq!(p.result, Some(comments));
    let after: User = row(&ops, &layout.user(9)).unwrap();
    assert_eq!(after.rating, before.rating - 5);
    assert_eq!(after.nb_comments, before.nb_comments + 1);
    let c: Comment = row(&ops, &layout.comment(9, after.nb_comments)).unwrap();
    assert_eq!((c.id, c.from_user, c.item, c.rating), (comments, 4, 33, -5));
    let mut info = ViewUserInfo {
        config: Arc::clone(w.config()),
        user: 9,
        result: None,
    };
    commit(&mut ops, &mut info).unwrap();
    let (user, shown) = info.result.unwrap();
    assert_eq!(user, after);
    assert_eq!(shown.last().unwrap().1, "user4");
    assert!(failed(&audit(&w, &mut copy(&ops))).is_empty());
}

#[test]
fn read_only_interactions_read_and_never_write() {
    let w = tiny(&[]);
    let layout = w.config().layout;
    let mut ops = loaded(&w);
    let config = Arc::clone(w.config());
    // Categories, regions.
    let mut p = BrowseCategories {
        config: Arc::clone(&config),
        result: None,
    };
    ops.run(&mut p).unwrap();
    assert_eq!(
        p.result.unwrap(),
        ["Category 1", "Category 2", "Category 3", "Category 4"]
    );
    let mut p = BrowseCategoriesInRegion {
        config: Arc::clone(&config),
        region: 5,
        result: None,
    };
    ops.run(&mut p).unwrap();
    assert_eq!(p.result.unwrap().0, "Region 5");
    // A category's first page lists its open items across all shards; page 1 the rest.
    let category = 2;
    let all: BTreeSet<u32> = (31..=70)
        .filter(|i| load::item_owner(&config, *i).1 == category)
        .collect();
    let mut shown = BTreeSet::new();
    for page in 0..3 {
        let mut p = SearchItemsInCategory {
            config: Arc::clone(&config),
            category,
            page,
            date: LOAD_DATE + 1,
            result: None,
        };
        ops.run(&mut p).unwrap();
        let result = p.result.unwrap();
        assert!(result.len() <= PAGE as usize);
        for (i, item) in result {
            assert_eq!(item.category, category);
            assert!(shown.insert(i), "{i} shown twice");
        }
    }
    assert_eq!(shown, all);
    // A region's search shows only its sellers' items.
    let mut p = SearchItemsInRegion {
        config: Arc::clone(&config),
        region: 3,
        category: 1,
        page: 0,
        date: LOAD_DATE + 1,
        result: None,
    };
    ops.run(&mut p).unwrap();
    for (_, item) in p.result.unwrap() {
        assert_eq!(load::user_region(&config, item.seller), 3);
        assert_eq!(item.category, 1);
    }
    // ViewItem falls back to OLD_ITEMS.
    let mut p = ViewItem {
        config: Arc::clone(&config),
        item: 12,
        result: None,
    };
    ops.run(&mut p).unwrap();
    let page = p.result.unwrap();
    assert!(page.old);
    assert_eq!(page.seller_nickname, format!("user{}", page.item.seller));
    // Logins: right and wrong passwords.
    let mut p = PutBid {
        config: Arc::clone(&config),
        login: Login::of(17),
        item: 44,
        result: None,
    };
    ops.run(&mut p).unwrap();
    assert!(p.result.as_ref().unwrap().is_some());
    p.login.password = "nope".into();
    ops.run(&mut p).unwrap();
    assert_eq!(p.result, Some(None));
    let mut p = AboutMe {
        config: Arc::clone(&config),
        login: Login::of(8),
        date: LOAD_DATE + 1,
        result: None,
    };
    ops.run(&mut p).unwrap();
    let page = p.result.unwrap().unwrap();
    let user: User = row(&ops, &layout.user(8)).unwrap();
    assert_eq!(page.comments.len() as u32, user.nb_comments);
    let sells = row::<IdList>(&ops, &layout.selling(8)).unwrap_or_default();
    assert_eq!(
        page.selling.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        sells.0
    );
    for (i, open) in page.selling {
        assert_eq!(open, i > 30);
    }
    assert!(ops.buffered.is_empty(), "{:?}", ops.buffered);
    // Every read-only procedure the mix draws writes nothing.
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for _ in 0..500 {
        let mut p = w.next(NodeId(2), &mut rng);
        if p.read_only() {
            ops.run(p.as_mut()).unwrap();
            assert!(ops.buffered.is_empty(), "{}", p.name());
        }
        ops.log.clear();
    }
}

#[test]
fn the_audit_holds_after_a_run_and_catches_corruption() {
    let w = tiny(&[("update_fraction", "0.5")]);
    let layout = w.config().layout;
    let mut ops = loaded(&w);
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let mut committed: BTreeMap<&str, u32> = BTreeMap::new();
    for i in 0..1500 {
        let mut p = w.next(NodeId(i % 3), &mut rng);
        commit(&mut ops, p.as_mut()).unwrap();
        *committed.entry(p.name()).or_default() += 1;
    }
    assert_eq!(committed.len(), 18, "{committed:?}");
    assert!(count(&ops, b'N') > 0);
    let conditions = audit(&w, &mut copy(&ops));
    assert!(failed(&conditions).is_empty(), "{conditions:#?}");

    let corrupt = |change: &dyn Fn(&mut FakeOps)| {
        let mut c = copy(&ops);
        change(&mut c);
        audit(&w, &mut c)
    };
    // A bid lost: the item's count disagrees.
    let (i, item) = (31..=70)
        .map(|i| (i, row::<Item>(&ops, &layout.item(i)).unwrap()))
        .find(|(_, item)| item.nb_of_bids > 1)
        .unwrap();
    let conditions = corrupt(&|ops| {
        ops.store.remove(&layout.bid(i, item.nb_of_bids));
    });
    // (The bidder's list may also name an item it no longer has a bid on.)
    let fails = failed(&conditions);
    assert_eq!(fails[0], "rubis-bids", "{conditions:#?}");
    assert!(fails[1..].iter().all(|f| *f == "rubis-index"), "{fails:?}");
    assert!(
        conditions[0].detail.contains(&format!("item {i}")),
        "{conditions:?}"
    );
    // max_bid off.
    let conditions = corrupt(&|ops| {
        let mut item = item.clone();
        item.max_bid += 1;
        put(ops, layout.item(i), &item);
    });
    assert_eq!(failed(&conditions), ["rubis-bids"]);
    // A rating that lost a comment's update.
    let conditions = corrupt(&|ops| {
        let mut u: User = row(ops, &layout.user(5)).unwrap();
        u.rating += 3;
        put(ops, layout.user(5), &u);
    });
    assert_eq!(failed(&conditions), ["rubis-comments"]);
    // A counter that lost an increment: the last user of shard 1 lies at the counter.
    let conditions = corrupt(&|ops| {
        let next = counter(ops, &layout, 1, Table::Users);
        let mut last = next - 3;
        while !ops.store.contains_key(&layout.user(last)) {
            last -= 3;
        }
        put(ops, layout.counter(1, Table::Users), &Id(last));
    });
    assert_eq!(failed(&conditions), ["rubis-ids"]);
    // A counter in the wrong shard, and an id handed out twice.
    let conditions = corrupt(&|ops| {
        put(ops, layout.counter(2, Table::BuyNow), &Id(4));
    });
    assert!(
        failed(&conditions).contains(&"rubis-ids"),
        "{conditions:#?}"
    );
    // A purchase row too many.
    let conditions = corrupt(&|ops| {
        let u: User = row(ops, &layout.user(7)).unwrap();
        let p = Purchase {
            id: 1,
            item: 40,
            qty: 1,
            date: LOAD_DATE,
        };
        put(ops, layout.buy_now(7, u.nb_bought + 1), &p);
    });
    let fails = failed(&conditions);
    assert!(fails.contains(&"rubis-buy-now"), "{fails:?}");
    // An index entry dropped, and garbage.
    let conditions = corrupt(&|ops| {
        let mut b: IdList = row(ops, &layout.category_bucket(1, 1, 0)).unwrap();
        b.0.pop();
        put(ops, layout.category_bucket(1, 1, 0), &b);
        ops.set(layout.user(2), "garbage");
    });
    let fails = failed(&conditions);
    assert!(
        fails.contains(&"rubis-index") && fails.contains(&"rubis-rows"),
        "{fails:?}"
    );
    assert!(
        conditions[5].detail.contains("malformed USERS row"),
        "{conditions:?}"
    );
    // A nickname pointing elsewhere.
    let conditions = corrupt(&|ops| put(ops, layout.nickname("user3"), &Id(4)));
    assert_eq!(failed(&conditions), ["rubis-index"]);
}

#[test]
fn acting_users_come_from_local_shards() {
    let w = tiny(&[]);
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    for node in 0..3u32 {
        let shards = w.home_shards(NodeId(node)).to_vec();
        assert_eq!(shards.len(), 1);
        for _ in 0..200 {
            let u = w.draw_acting_user(NodeId(node), &mut rng);
            assert!((1..=60).contains(&u));
            assert_eq!(u % 3, shards[0]);
        }
    }
    let w = tiny(&[("home_user", "uniform")]);
    let shards: BTreeSet<u32> = (0..300)
        .map(|_| w.draw_acting_user(NodeId(0), &mut rng) % 3)
        .collect();
    assert_eq!(shards.len(), 3);
}

#[test]
fn master_acting_users_come_from_the_shard_a_node_masters() {
    let lan = LatencyProfile::named("lan").unwrap();
    // Three nodes, each replicating two of the three shards and mastering one.
    let placement = Arc::new(Placement::ring(lan, 3, 2).unwrap());
    let mut set = vec![("users", "60"), ("items", "40"), ("old_items", "30")];
    let local = Rubis::new(&given(&set), Arc::clone(&placement)).unwrap();
    set.push(("home_user", "master"));
    let master = Rubis::new(&given(&set), Arc::clone(&placement)).unwrap();
    for node in placement.nodes() {
        let mastered: Vec<u32> = placement.mastered_by(node).map(|p| p.0).collect();
        assert_eq!(master.home_shards(node), mastered);
        assert_eq!(local.home_shards(node).len(), 2);
    }
}

#[test]
fn think_times_are_offered_when_on() {
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let off = tiny(&[]);
    assert_eq!(off.pause("store-bid", &mut rng), None);
    let on = tiny(&[("think_time", "on")]);
    assert_eq!(
        on.pause("store-bid", &mut rng),
        Some(Duration::from_secs(2))
    );
    assert_eq!(
        on.think_time_ms("search-items-in-category", &mut rng),
        Some(7000.0)
    );
    assert_eq!(on.pause("load", &mut rng), None);
    let tpcw = tiny(&[("think_time", "tpcw")]);
    let mut sum = 0.0;
    for _ in 0..4000 {
        let t = tpcw.pause("view-item", &mut rng).unwrap().as_secs_f64();
        assert!((0.0..=70.0).contains(&t));
        sum += t;
    }
    let mean = sum / 4000.0;
    assert!((6.5..7.5).contains(&mean), "{mean}");
}

#[test]
fn settings_are_echoed_and_validated() {
    let w = workload(&[]).unwrap();
    let s = w.settings();
    assert_eq!(s["users"], 100_000);
    assert_eq!(s["items"], 3300);
    assert_eq!(s["old_items"], 50_000);
    assert_eq!(s["categories"], 20);
    assert_eq!(s["regions"], 62);
    assert_eq!(s["bids_per_item"], 20);
    assert_eq!(s["update_fraction"], 0.15);
    assert_eq!(s["think_time"], "off");
    assert_eq!(s["home_user"], "local");
    assert_eq!(s["shards"], 3);
    let weights = s["weights_percent"].as_object().unwrap();
    assert_eq!(weights.len(), 18);
    let rw: f64 = [
        "register-user",
        "register-item",
        "store-bid",
        "store-buy-now",
        "store-comment",
    ]
    .iter()
    .map(|k| weights[*k].as_f64().unwrap())
    .sum();
    assert!((rw - 15.0).abs() < 0.01, "{rw}");
    let deviations = s["deviations"].to_string();
    for what in [
        "100000 users",
        "3300 active items",
        "50000 old items",
        "no think time",
    ] {
        assert!(deviations.contains(what), "{what}: {deviations}");
    }
    let w = tiny(&[("update_fraction", "matrix"), ("think_time", "on")]);
    let s = w.settings();
    assert_eq!(s["update_fraction"], "matrix");
    assert_eq!(s["think_time"], "on");
    assert!(s["deviations"].to_string().contains("walk's"));
    let e = workload(&[("user", "3")]).err().unwrap();
    assert!(matches!(e, WorkloadError::UnknownSetting { .. }), "{e}");
    for bad in [
        ("users", "0"),
        ("users", "many"),
        ("users", "2"), // fewer users than partitions
        ("items", "0"),
        ("old_items", "-1"),
        ("categories", "0"),
        ("regions", "1001"),
        ("bids_per_item", "101"),
        ("update_fraction", "1.5"),
        ("update_fraction", "most"),
        ("think_time", "maybe"),
        ("home_user", "near"),
    ] {
        let e = workload(&[bad]).err().unwrap();
        assert!(matches!(e, WorkloadError::BadValue { .. }), "{bad:?}: {e}");
    }
    assert!(workload(&[("old_items", "0")]).is_ok());
}

/// The default configuration loads and audits, before and after a run. Slow in a debug build:
/// `cargo test --release -- --ignored default_scale`.
#[test]
#[ignore]
fn default_scale_loads_and_audits() {
    let w = workload(&[]).unwrap();
    let mut ops = loaded(&w);
    assert_eq!(count(&ops, b'U'), 100_000);
    let conditions = audit(&w, &mut copy(&ops));
    assert!(failed(&conditions).is_empty(), "{conditions:#?}");
    let mut rng = ChaCha8Rng::seed_from_u64(10);
    for i in 0..5000 {
        commit(&mut ops, w.next(NodeId(i % 3), &mut rng).as_mut()).unwrap();
    }
    let conditions = audit(&w, &mut ops);
    assert!(failed(&conditions).is_empty(), "{conditions:#?}");
}

#[test]
fn every_interaction_ships_as_a_call_of_its_name() {
    let w = tiny(&[]);
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut seen = BTreeSet::new();
    for _ in 0..10_000 {
        let p = w.next(NodeId(0), &mut rng);
        let call = p.call().expect("a one-shot call");
        assert_eq!(
            (call.workload.as_str(), call.procedure.as_str()),
            ("rubis", p.name())
        );
        seen.insert(p.name());
    }
    let all: BTreeSet<&str> = Interaction::ALL
        .iter()
        .filter(|i| i.touches_database())
        .map(|i| i.name())
        .collect();
    assert_eq!(seen, all);
}

/// RUBiS's bidding mix (15% read-write).
#[test]
fn calls_replay_in_the_bidding_mix() {
    crate::testing::assert_calls_replay(&tiny(&[]), 3, 500);
}

/// Mostly read-write interactions, by users of every shard.
#[test]
fn calls_replay_in_an_update_heavy_mix() {
    let w = tiny(&[("update_fraction", "0.6"), ("home_user", "uniform")]);
    crate::testing::assert_calls_replay(&w, 3, 400);
}

#[test]
fn unknown_procedures_and_bad_arguments_are_refused() {
    // A static page has a name but no procedure.
    for name in ["store-bids", "home"] {
        let call = ProcedureCall::encode("rubis", name, &());
        assert_eq!(
            refused(&call),
            RequestError::UnknownProcedure(format!("rubis/{name}"))
        );
    }
    assert_eq!(
        refused(&ProcedureCall::encode("auction", "view-item", &())),
        RequestError::UnknownProcedure("auction/view-item".into())
    );
    let names: Vec<&str> = Interaction::ALL
        .iter()
        .filter(|i| i.touches_database())
        .map(|i| i.name())
        .collect();
    crate::testing::assert_refuses_bad_calls("rubis", "store-bids", &names);
    let invalid = |e: RequestError, procedure: &str| match e {
        RequestError::Invalid(why) => assert!(why.contains(procedure), "{why}"),
        other => panic!("{procedure}: {other:?}"),
    };
    // Arguments that decode but that no client draws, on which the bodies would panic.
    let w = tiny(&[]);
    let shardless = ViewItem {
        config: Arc::new(Config::new(w.config().settings.clone(), 3)),
        item: 1,
        result: None,
    };
    let mut call = shardless.call().unwrap();
    assert_eq!(call.args[0], 3, "the shard count leads the arguments");
    call.args[0] = 0;
    invalid(refused(&call), "view-item");
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut item = RegisterItem::draw(Arc::clone(w.config()), 4, LOAD_DATE, &mut rng);
    item.date = u64::MAX - DAY;
    let mut user = RegisterUser::draw(Arc::clone(w.config()), 4, LOAD_DATE, &mut rng);
    user.shard = 3;
    let bad: [(&str, Box<dyn Procedure>); 3] = [
        ("store-bid", Box::new(store_bid(&w, 4, 40, i64::MAX))),
        ("register-item", Box::new(item)),
        ("register-user", Box::new(user)),
    ];
    for (procedure, p) in bad {
        invalid(refused(&p.call().unwrap()), procedure);
    }
}
