//! Reading fleet and job configuration.

mod closest;
mod duration;
mod lookup;

pub use closest::closest;
pub use duration::{format_duration, parse_duration};
pub use lookup::{ConfigLookup, ConfigLookupExt, OptionError};
