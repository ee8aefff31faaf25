//! RUBiS's default ("bidding") transition table, the stationary mix augur draws interactions
//! from, and the think times.
//!
//! # The transition table
//!
//! RUBiS's client emulator walks a Markov chain over the 27 states of its transition table
//! ([`Interaction`]): from each state, the table gives the probability of every next state, of
//! going *back* to the previous page, and of ending the session (a new session starts at
//! `Home`), plus the state's *transition waiting time*. [`TABLE`] transcribes the "Default
//! transition set" of the `workload/default_transitions.txt` distributed with RUBiS 1.4, the
//! bidding mix of RUBiS's papers ("15% read-write interactions"; `browse_only_transitions.txt` is
//! the browsing mix). Several of its columns do not sum to exactly 1 (the header links add 0.0079
//! to most, and some states list next states summing to ~1 besides a 0.2 chance of ending the
//! session), so each state's probabilities are normalised by their sum.
//!
//! # The stationary mix
//!
//! augur's clients do not walk sessions: each transaction is drawn independently from the
//! stationary distribution of that walk ([`STATIONARY`]: the long-run share of every state, from a
//! simulation of 10^9 steps of the walk above, back moves and session ends included;
//! `stationary_matches_a_walk_of_the_table` in the tests re-derives it). Nine states are static
//! pages that issue no database query (`Home`, `Register`, `Browse`, the three `…Auth` login forms
//! of buy-now, bid and comment, `Sell`, `SellItemForm`, the `AboutMe` login form); they are
//! dropped, and the other 18 interactions keep their relative stationary shares within their class:
//! the five read-write interactions (`RegisterUser`, `StoreBuyNow`, `StoreBid`, `StoreComment`,
//! `RegisterItem` — STR's "five of which are update transactions") are scaled together to
//! `update_fraction` of all draws (default 0.15, RUBiS's and STR's "15% update" bidding mix), the
//! 13 read-only ones to the rest. Left unscaled (`update_fraction=matrix`), the walk makes them
//! 10.41% of the database interactions (7.29% of all states).
//!
//! Where the walk would repeat a search state (`SearchItemsInCategory` → itself is RUBiS's "next
//! page" link), the drawn search asks for page `k` with the probability of `k` consecutive
//! repetitions: geometric with the state's self-transition probability ([`next_page_probability`]).

use std::time::Duration;

/// The states of RUBiS's transition table, in the table's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Interaction {
    Home,
    Register,
    RegisterUser,
    Browse,
    BrowseCategories,
    SearchItemsInCategory,
    BrowseRegions,
    BrowseCategoriesInRegion,
    SearchItemsInRegion,
    ViewItem,
    ViewUserInfo,
    ViewBidHistory,
    BuyNowAuth,
    BuyNow,
    StoreBuyNow,
    PutBidAuth,
    PutBid,
    StoreBid,
    PutCommentAuth,
    PutComment,
    StoreComment,
    Sell,
    SelectCategoryToSellItem,
    SellItemForm,
    RegisterItem,
    AboutMeAuth,
    AboutMe,
}

use Interaction::*;

impl Interaction {
    pub const ALL: [Interaction; 27] = [
        Home,
        Register,
        RegisterUser,
        Browse,
        BrowseCategories,
        SearchItemsInCategory,
        BrowseRegions,
        BrowseCategoriesInRegion,
        SearchItemsInRegion,
        ViewItem,
        ViewUserInfo,
        ViewBidHistory,
        BuyNowAuth,
        BuyNow,
        StoreBuyNow,
        PutBidAuth,
        PutBid,
        StoreBid,
        PutCommentAuth,
        PutComment,
        StoreComment,
        Sell,
        SelectCategoryToSellItem,
        SellItemForm,
        RegisterItem,
        AboutMeAuth,
        AboutMe,
    ];

    /// The procedure name: RUBiS's interaction name in kebab case.
    pub fn name(self) -> &'static str {
        match self {
            Home => "home",
            Register => "register",
            RegisterUser => "register-user",
            Browse => "browse",
            BrowseCategories => "browse-categories",
            SearchItemsInCategory => "search-items-in-category",
            BrowseRegions => "browse-regions",
            BrowseCategoriesInRegion => "browse-categories-in-region",
            SearchItemsInRegion => "search-items-in-region",
            ViewItem => "view-item",
            ViewUserInfo => "view-user-info",
            ViewBidHistory => "view-bid-history",
            BuyNowAuth => "buy-now-auth",
            BuyNow => "buy-now",
            StoreBuyNow => "store-buy-now",
            PutBidAuth => "put-bid-auth",
            PutBid => "put-bid",
            StoreBid => "store-bid",
            PutCommentAuth => "put-comment-auth",
            PutComment => "put-comment",
            StoreComment => "store-comment",
            Sell => "sell",
            SelectCategoryToSellItem => "select-category-to-sell-item",
            SellItemForm => "sell-item-form",
            RegisterItem => "register-item",
            AboutMeAuth => "about-me-auth",
            AboutMe => "about-me",
        }
    }

    pub fn of_name(name: &str) -> Option<Interaction> {
        Interaction::ALL.into_iter().find(|i| i.name() == name)
    }

    /// Whether the interaction queries the database (the others are static pages).
    pub fn touches_database(self) -> bool {
        !matches!(
            self,
            Home | Register
                | Browse
                | BuyNowAuth
                | PutBidAuth
                | PutCommentAuth
                | Sell
                | SellItemForm
                | AboutMeAuth
        )
    }

    /// The five interactions that write.
    pub fn read_write(self) -> bool {
        matches!(
            self,
            RegisterUser | StoreBuyNow | StoreBid | StoreComment | RegisterItem
        )
    }

    /// The table's transition waiting time of this state.
    pub fn waiting_time(self) -> Duration {
        Duration::from_millis(TABLE[self as usize].wait_ms)
    }
}

/// One state's row of the table: where the walk goes next.
#[derive(Clone, Copy, Debug)]
pub struct Transitions {
    pub to: &'static [(Interaction, f64)],
    /// Back to the previous page.
    pub back: f64,
    /// End of the session.
    pub end: f64,
    /// The transition waiting time, in milliseconds.
    pub wait_ms: u64,
}

impl Transitions {
    /// The sum the probabilities are normalised by.
    pub fn total(&self) -> f64 {
        self.to.iter().map(|(_, p)| p).sum::<f64>() + self.back + self.end
    }
}

/// RUBiS 1.4's default (bidding) transition set, per current state in [`Interaction::ALL`] order.
pub const TABLE: [Transitions; 27] = [
    // Home
    Transitions {
        to: &[
            (Register, 0.07),
            (Browse, 0.7),
            (Sell, 0.05),
            (AboutMeAuth, 0.15),
        ],
        back: 0.0,
        end: 0.0,
        wait_ms: 3000,
    },
    // Register
    Transitions {
        to: &[
            (Home, 0.0001),
            (RegisterUser, 0.99),
            (Browse, 0.0058),
            (Sell, 0.0005),
            (AboutMeAuth, 0.0015),
        ],
        back: 0.0,
        end: 0.0,
        wait_ms: 10000,
    },
    // RegisterUser
    Transitions {
        to: &[
            (Home, 0.01),
            (Browse, 0.58),
            (Sell, 0.05),
            (AboutMeAuth, 0.15),
        ],
        back: 0.0,
        end: 0.2,
        wait_ms: 3000,
    },
    // Browse
    Transitions {
        to: &[
            (Home, 0.0001),
            (Register, 0.01),
            (BrowseCategories, 0.7),
            (BrowseRegions, 0.29),
            (Sell, 0.0005),
            (AboutMeAuth, 0.0015),
        ],
        back: 0.0,
        end: 0.0,
        wait_ms: 2000,
    },
    // BrowseCategories
    Transitions {
        to: &[
            (Home, 0.0001),
            (Register, 0.01),
            (Browse, 0.0058),
            (SearchItemsInCategory, 0.99),
            (Sell, 0.0005),
            (AboutMeAuth, 0.0015),
        ],
        back: 0.0,
        end: 0.0,
        wait_ms: 3000,
    },
    // SearchItemsInCategory
    Transitions {
        to: &[
            (Home, 0.0001),
            (Register, 0.01),
            (Browse, 0.0058),
            (SearchItemsInCategory, 0.4),
            (ViewItem, 0.5),
            (PutBidAuth, 0.09),
            (Sell, 0.0005),
            (AboutMeAuth, 0.0015),
        ],
        back: 0.0,
        end: 0.2,
        wait_ms: 7000,
    },
    // BrowseRegions
    Transitions {
        to: &[
            (Home, 0.0001),
            (Register, 0.01),
            (Browse, 0.0058),
            (BrowseCategoriesInRegion, 0.99),
            (Sell, 0.0005),
            (AboutMeAuth, 0.0015),
        ],
        back: 0.0,
        end: 0.0,
        wait_ms: 3000,
    },
    // BrowseCategoriesInRegion
    Transitions {
        to: &[
            (Home, 0.0001),
            (Register, 0.01),
            (Browse, 0.0058),
            (SearchItemsInRegion, 0.99),
            (Sell, 0.0005),
            (AboutMeAuth, 0.0015),
        ],
        back: 0.0,
        end: 0.0,
        wait_ms: 3000,
    },
    // SearchItemsInRegion
    Transitions {
        to: &[
            (Home, 0.0001),
            (Register, 0.01),
            (Browse, 0.0058),
            (SearchItemsInRegion, 0.4),
            (ViewItem, 0.5),
            (PutBidAuth, 0.09),
            (Sell, 0.0005),
            (AboutMeAuth, 0.0015),
        ],
        back: 0.0,
        end: 0.2,
        wait_ms: 7000,
    },
    // ViewItem
    Transitions {
        to: &[
            (Home, 0.0001),
            (Register, 0.01),
            (Browse, 0.0058),
            (ViewUserInfo, 0.1),
            (ViewBidHistory, 0.05),
            (BuyNowAuth, 0.1),
            (PutBidAuth, 0.22),
            (PutComment, 0.02),
            (Sell, 0.0005),
            (AboutMeAuth, 0.0015),
        ],
        back: 0.5,
        end: 0.2,
        wait_ms: 7000,
    },
    // ViewUserInfo
    Transitions {
        to: &[
            (Home, 0.0001),
            (Register, 0.01),
            (Browse, 0.0058),
            (ViewUserInfo, 0.19),
            (Sell, 0.0005),
            (AboutMeAuth, 0.0015),
        ],
        back: 0.8,
        end: 0.2,
        wait_ms: 7000,
    },
    // ViewBidHistory
    Transitions {
        to: &[
            (Home, 0.0001),
            (Register, 0.01),
            (Browse, 0.0058),
            (ViewUserInfo, 0.19),
            (Sell, 0.0005),
            (AboutMeAuth, 0.0015),
        ],
        back: 0.8,
        end: 0.0,
        wait_ms: 7000,
    },
    // BuyNowAuth
    Transitions {
        to: &[
            (Home, 0.0001),
            (Register, 0.01),
            (Browse, 0.0058),
            (BuyNow, 0.99),
            (Sell, 0.0005),
            (AboutMeAuth, 0.0015),
        ],
        back: 0.0,
        end: 0.0,
        wait_ms: 5000,
    },
    // BuyNow
    Transitions {
        to: &[
            (Home, 0.0001),
            (Register, 0.01),
            (Browse, 0.0058),
            (StoreBuyNow, 0.99),
            (Sell, 0.0005),
            (AboutMeAuth, 0.0015),
        ],
        back: 0.0,
        end: 0.0,
        wait_ms: 5000,
    },
    // StoreBuyNow
    Transitions {
        to: &[
            (Home, 0.01),
            (Register, 0.01),
            (Browse, 0.58),
            (Sell, 0.05),
            (AboutMeAuth, 0.15),
        ],
        back: 0.0,
        end: 0.2,
        wait_ms: 2000,
    },
    // PutBidAuth
    Transitions {
        to: &[
            (Home, 0.0001),
            (Register, 0.01),
            (Browse, 0.0058),
            (PutBid, 0.99),
            (Sell, 0.0005),
            (AboutMeAuth, 0.0015),
        ],
        back: 0.0,
        end: 0.0,
        wait_ms: 5000,
    },
    // PutBid
    Transitions {
        to: &[
            (Home, 0.0001),
            (Register, 0.01),
            (Browse, 0.0058),
            (ViewUserInfo, 0.05),
            (ViewBidHistory, 0.15),
            (StoreBid, 0.74),
            (PutComment, 0.05),
            (Sell, 0.0005),
            (AboutMeAuth, 0.0015),
        ],
        back: 0.0,
        end: 0.0,
        wait_ms: 5000,
    },
    // StoreBid
    Transitions {
        to: &[
            (Home, 0.01),
            (Register, 0.01),
            (Browse, 0.58),
            (Sell, 0.05),
            (AboutMeAuth, 0.15),
        ],
        back: 0.0,
        end: 0.2,
        wait_ms: 2000,
    },
    // PutCommentAuth (no state leads here in the default set)
    Transitions {
        to: &[
            (Home, 0.0001),
            (Register, 0.01),
            (Browse, 0.0058),
            (PutComment, 0.99),
            (Sell, 0.0005),
            (AboutMeAuth, 0.0015),
        ],
        back: 0.0,
        end: 0.0,
        wait_ms: 5000,
    },
    // PutComment
    Transitions {
        to: &[
            (Home, 0.0001),
            (Register, 0.01),
            (Browse, 0.0058),
            (StoreComment, 0.99),
            (Sell, 0.0005),
            (AboutMeAuth, 0.0015),
        ],
        back: 0.0,
        end: 0.0,
        wait_ms: 5000,
    },
    // StoreComment
    Transitions {
        to: &[
            (Home, 0.01),
            (Register, 0.01),
            (Browse, 0.58),
            (Sell, 0.05),
            (AboutMeAuth, 0.15),
        ],
        back: 0.0,
        end: 0.2,
        wait_ms: 2000,
    },
    // Sell
    Transitions {
        to: &[
            (Home, 0.0001),
            (Register, 0.01),
            (Browse, 0.0058),
            (Sell, 0.0005),
            (SelectCategoryToSellItem, 0.99),
            (AboutMeAuth, 0.0015),
        ],
        back: 0.0,
        end: 0.0,
        wait_ms: 5000,
    },
    // SelectCategoryToSellItem
    Transitions {
        to: &[
            (Home, 0.0001),
            (Register, 0.01),
            (Browse, 0.0058),
            (Sell, 0.0005),
            (SellItemForm, 0.99),
            (AboutMeAuth, 0.0015),
        ],
        back: 0.0,
        end: 0.0,
        wait_ms: 3000,
    },
    // SellItemForm
    Transitions {
        to: &[
            (Home, 0.0001),
            (Register, 0.01),
            (Browse, 0.0058),
            (Sell, 0.0005),
            (RegisterItem, 0.99),
            (AboutMeAuth, 0.0015),
        ],
        back: 0.0,
        end: 0.0,
        wait_ms: 7000,
    },
    // RegisterItem
    Transitions {
        to: &[
            (Home, 0.01),
            (Register, 0.01),
            (Browse, 0.58),
            (Sell, 0.05),
            (AboutMeAuth, 0.15),
        ],
        back: 0.0,
        end: 0.2,
        wait_ms: 2000,
    },
    // AboutMeAuth
    Transitions {
        to: &[
            (Home, 0.0001),
            (Register, 0.01),
            (Browse, 0.0058),
            (Sell, 0.0005),
            (AboutMeAuth, 0.0015),
            (AboutMe, 0.99),
        ],
        back: 0.0,
        end: 0.0,
        wait_ms: 3000,
    },
    // AboutMe
    Transitions {
        to: &[
            (Home, 0.002),
            (Register, 0.01),
            (Browse, 0.116),
            (ViewItem, 0.65),
            (ViewUserInfo, 0.05),
            (PutBidAuth, 0.1),
            (Sell, 0.01),
            (AboutMeAuth, 0.03),
        ],
        back: 0.0,
        end: 0.2,
        wait_ms: 7000,
    },
];

/// The long-run share of each state (percent, [`Interaction::ALL`] order) of the walk over
/// [`TABLE`] described in the module docs, from a simulation of 10^9 steps (`print_stationary` in
/// the tests).
pub const STATIONARY: [f64; 27] = [
    8.217, 1.412, 1.401, 10.888, 7.605, 15.619, 3.151, 3.095, 6.355, 12.305, 2.336, 1.456, 1.019,
    1.001, 0.983, 4.181, 4.977, 3.654, 0.0, 0.451, 0.443, 0.856, 0.841, 0.826, 0.812, 2.569, 3.545,
];

/// The probability that a search state is followed by itself (its next page).
pub fn next_page_probability(state: Interaction) -> f64 {
    let from = &TABLE[state as usize];
    let own: f64 = from
        .to
        .iter()
        .filter(|(to, _)| *to == state)
        .map(|(_, p)| p)
        .sum();
    own / from.total()
}

/// One step of the emulator's walk from `state`, given a uniform draw `u` in `0..1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    To(Interaction),
    Back,
    End,
}

pub fn step(state: Interaction, u: f64) -> Step {
    let from = &TABLE[state as usize];
    let mut x = u * from.total();
    for (to, p) in from.to {
        if x < *p {
            return Step::To(*to);
        }
        x -= p;
    }
    if x < from.back { Step::Back } else { Step::End }
}

/// The share of every state over `steps` steps of the walk (back moves return to the page before,
/// a session end starts the next session at `Home`), in percent.
pub fn walk(steps: u64, mut uniform: impl FnMut() -> f64) -> [f64; 27] {
    let mut counts = [0u64; 27];
    let mut state = Home;
    let mut previous: Vec<Interaction> = Vec::new();
    for _ in 0..steps {
        counts[state as usize] += 1;
        state = match step(state, uniform()) {
            Step::To(next) => {
                previous.push(state);
                next
            }
            Step::Back => previous.pop().unwrap_or(Home),
            Step::End => {
                previous.clear();
                Home
            }
        };
    }
    counts.map(|c| c as f64 * 100.0 / steps as f64)
}

/// The share of the five read-write interactions among the database interactions, unscaled.
pub fn stationary_update_fraction() -> f64 {
    let (mut rw, mut all) = (0.0, 0.0);
    for i in Interaction::ALL {
        if i.touches_database() {
            all += STATIONARY[i as usize];
            if i.read_write() {
                rw += STATIONARY[i as usize];
            }
        }
    }
    rw / all
}

/// The weights augur draws the database interactions with, [`Interaction::ALL`] order (zero for
/// static pages), summing to 1: the stationary shares with the read-write class scaled to
/// `update_fraction` (unscaled with `None`).
pub fn weights(update_fraction: Option<f64>) -> [f64; 27] {
    let (mut rw, mut ro) = (0.0, 0.0);
    for i in Interaction::ALL {
        if i.touches_database() {
            if i.read_write() {
                rw += STATIONARY[i as usize];
            } else {
                ro += STATIONARY[i as usize];
            }
        }
    }
    let (rw_scale, ro_scale) = match update_fraction {
        Some(f) => (f / rw, (1.0 - f) / ro),
        None => (1.0 / (rw + ro), 1.0 / (rw + ro)),
    };
    Interaction::ALL.map(|i| {
        let share = STATIONARY[i as usize];
        match (i.touches_database(), i.read_write()) {
            (false, _) => 0.0,
            (true, true) => share * rw_scale,
            (true, false) => share * ro_scale,
        }
    })
}

/// TPC-W's think time, which RUBiS's client uses instead of the table's times when
/// `workload_use_tpcw_think_time` is set: negative exponential with a mean of 7 s, at most 70 s.
pub fn tpcw_think_time(u: f64) -> Duration {
    let u = u.max(f64::MIN_POSITIVE);
    Duration::from_secs_f64((-u.ln() * 7.0).min(70.0))
}
