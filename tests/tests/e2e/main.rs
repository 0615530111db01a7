//! End-to-end tests: each runs the `flowscale` command line as a user would.
//!
//! Where things go: `align` for the alignment command, `validate` for configuration checking.
//! Shared helpers live in `harness`.

mod align;
mod harness;
mod validate;
