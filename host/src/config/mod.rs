//! Reading fleet and job configuration.

mod duration;

pub use duration::{format_duration, parse_duration};
