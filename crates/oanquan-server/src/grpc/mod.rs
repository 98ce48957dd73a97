//! Thin gRPC adapters over [`crate::domain`]: conversions at the edge ([`convert`]), one status
//! table ([`status`]), and service impls that hold no logic.

pub mod accept;
mod account_service;
pub mod connections;
pub mod deadline;
mod fit;
pub mod frames;
// The adapters name `oanquan_convert` directly; the path stays for tests and tools outside.
pub use oanquan_convert as convert;
mod game_service;
pub mod health;
pub mod hosts;
#[cfg(test)]
mod imports;
pub mod observe;
pub mod rate_limit;
pub mod reflection;
pub mod reflection_index;
mod rules_service;
pub mod stalls;
pub mod status;
mod stream;
pub mod unread;
pub mod wire;

pub use account_service::AccountApi;
pub use game_service::GameApi;
pub use observe::ObserveLayer;
pub use rate_limit::RateLimitLayer;
pub use rules_service::RulesApi;
pub use stream::{StreamSettings, WatchStream};
pub use wire::GameRoutes;
