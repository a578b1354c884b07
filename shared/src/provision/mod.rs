//! The provisioner's decisions around the solver: when to solve, which offerings to keep
//! out, how launches are named.

pub mod attempts;
mod aws_ports;
mod batch;
mod discovery;
pub mod fleet_cost;
pub mod fleet_view;
pub mod in_flight;
pub mod launch;
pub mod launch_judgement;
pub mod live_catalog;
pub mod next_round;
pub mod node_template;
mod nodeclaim;
pub mod on_demand_prices;
pub mod owned_listing;
pub mod pending_age;
pub mod planning_order;
mod profiles;
pub mod service;
mod shared_launches;
mod shared_unavailable;
pub(crate) mod spoken_for;
pub mod swr;
pub mod template_gc;
mod turn;
mod unavailable;
pub mod unseen_launches;

pub use aws_ports::AwsPorts;
pub use batch::{Batch, BatchWindow, DEFAULT_FIRST_IDLE};
pub use discovery::DISCOVERY_TTL;
pub use fleet_cost::{FleetCost, fleet_cost, instance_price};
pub use live_catalog::{CATALOG_TTL, LiveCatalog, build_catalog, bundled_on_demand_prices};
pub use node_template::ClusterFacts;
pub use nodeclaim::nodeclaim_id;
pub use on_demand_prices::{
    OnDemandPrices, PRICE_RETRY_AFTER, PRICE_TTL, PriceOrigin, PriceRefresh, merge_prices,
};
pub use service::replace::{Offering, ReplaceReport, Replacement};
pub use service::{
    MAX_LAUNCH_ROUNDS, PollReport, ProvisionError, Provisioner, ProvisionerSettings, Warmed,
};
pub use shared_launches::{
    PUBLISHED_FOR, SharedLaunch, merge as merge_shared_launches, read as read_shared_launches,
};
pub use shared_unavailable::{
    SharedExclusion, SharedFacts, SharedState, merge as merge_shared, read as read_shared,
};
pub use turn::Turn;
pub use unavailable::{Exclusion, UNAVAILABLE_TTL, UnavailableOfferings};
