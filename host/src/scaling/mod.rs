//! The decision pipeline: metric window, evaluation, vertex targets, execution with cooldown.

pub mod cooldown;
