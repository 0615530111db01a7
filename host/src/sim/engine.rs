//! The simulator as an engine the control loop runs: on its own clock, from the current
//! simulated time with no end, until a bounded job finishes.

use super::Simulation;
use crate::engine::{Clock, Engine};

impl Engine for Simulation {
    fn clock(&self) -> Clock {
        Clock::Virtual {
            start_ms: self.now_ms(),
            end_ms: None,
        }
    }
    fn is_finished(&self) -> bool {
        Simulation::is_finished(self)
    }
}
