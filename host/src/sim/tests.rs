//! Physics and termination tests of the simulator.
