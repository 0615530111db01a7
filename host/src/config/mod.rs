//! Reading fleet and job configuration.

mod duration;
mod lookup;

pub use duration::{format_duration, parse_duration};
pub use lookup::{ConfigLookup, ConfigLookupExt, OptionError};
