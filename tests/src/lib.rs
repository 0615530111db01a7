//! Helpers shared by the end-to-end tests in `tests/e2e`: they drive the `flowscale` binary the
//! way a user does.
