//! End-to-end tests: build what a user builds, run the `flowscale` binary as a user runs it.

mod plugin_loading;
