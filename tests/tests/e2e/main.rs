//! End-to-end tests: build what a user builds, run the `flowscale` command line as a user does.
//!
//! Where things go: `align` for the alignment command, `validate` for configuration checking,
//! `plugin_loading` for the plugins directory. Shared helpers live in `harness`.

mod align;
mod harness;
mod plugin_loading;
mod validate;
