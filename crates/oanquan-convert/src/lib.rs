//! Protobuf ↔ domain conversions at the edge of the server ([`oanquan_proto`] ↔
//! [`oanquan_game`]). Inputs are validated field by field, so nothing a client sends can reach a
//! cast or an index unchecked; errors name the field (`move.square`).
//!
//! Split by direction: `input` (requests, validated), `output` (responses) and `events`
//! (watch streams). Everything is re-exported here, so callers write `convert::position`.

mod events;
mod history;
mod input;
mod output;
#[cfg(test)]
mod tests;

pub use events::*;
pub use history::*;
pub use input::*;
pub use output::*;
