//! Iteration sources and termination detection: fed-back records travel from the tails to the
//! head, markers circulate, and a vertex finishes once all its inputs have ended and its buffers
//! are empty. Termination is marker-based and exact: it can be late, never early.

use super::state::{InputFrom, Simulation};
use crate::sim::queue::{Queue, Token};
use crate::sim::routing::apportion;
use crate::sim::spec::VertexKind;

impl Simulation {
    /// Moves fed-back records, markers and ends from the tails into the head's loop input.
    pub(super) fn forward_feedback(&mut self, it: usize) {
        let head = self.iterations[it].head;
        let slot = self.iterations[it].slot;
        let p = self.vertices[head].subtasks.len();
        let offset = self.tick as usize;
        let mut parts = vec![0u64; p];
        for tail in 0..self.iterations[it].queues.len() {
            let tokens = self.iterations[it].queues[tail].drain();
            for token in tokens {
                let iteration = &mut self.iterations[it];
                if iteration.terminated {
                    if let Token::Records(n) = token {
                        iteration.dropped += n;
                    }
                    continue;
                }
                match token {
                    Token::Records(n) => {
                        iteration.records_since_marker += n;
                        apportion(n, &vec![1.0; p], offset, &mut parts);
                        for (s, k) in self.vertices[head].subtasks.iter_mut().zip(&parts) {
                            s.queues[slot].push_records(*k);
                        }
                    }
                    Token::Marker => iteration.markers[tail] += 1,
                    Token::End => iteration.ended[tail] = true,
                }
                self.iteration_round(it);
            }
        }
    }

    /// Passes a marker once one has arrived from every tail that has not ended; terminates on
    /// two consecutive markers with no record in between (or when every tail has ended).
    fn iteration_round(&mut self, it: usize) {
        let head = self.iterations[it].head;
        let slot = self.iterations[it].slot;
        loop {
            let iteration = &mut self.iterations[it];
            if iteration.terminated {
                return;
            }
            let open: Vec<u64> = iteration
                .markers
                .iter()
                .zip(&iteration.ended)
                .filter(|(_, e)| !**e)
                .map(|(m, _)| *m)
                .collect();
            let all_ended = open.is_empty();
            let aligned = !all_ended && open.iter().all(|&m| m > iteration.passed);
            if all_ended || (aligned && iteration.passed > 0 && iteration.records_since_marker == 0)
            {
                iteration.terminated = true;
                for s in &mut self.vertices[head].subtasks {
                    s.queues[slot].push_end();
                }
                self.events.push(format!(
                    "iteration {} terminated",
                    self.spec.vertices[head].id
                ));
                return;
            }
            if !aligned {
                return;
            }
            iteration.passed += 1;
            iteration.records_since_marker = 0;
            for s in &mut self.vertices[head].subtasks {
                s.queues[slot].push_marker();
            }
        }
    }

    /// Sends `token` to every subtask downstream of `v`, over its edges and its feedback edges.
    fn broadcast(&mut self, v: usize, token: Token) {
        for &e in &self.vertices[v].outputs.clone() {
            let (to, slot) = (self.edges[e].to, self.edges[e].slot);
            for s in &mut self.vertices[to].subtasks {
                match token {
                    Token::Marker => s.queues[slot].push_marker(),
                    Token::End => s.queues[slot].push_end(),
                    Token::Records(n) => s.queues[slot].push_records(n),
                }
            }
        }
        for (it, tail, _) in self.vertices[v].feedback_out.clone() {
            let q = &mut self.iterations[it].queues[tail];
            match token {
                Token::Marker => q.push_marker(),
                Token::End => q.push_end(),
                Token::Records(n) => q.push_records(n),
            }
        }
    }

    /// Termination bookkeeping after a vertex processed its tick: heads start a round once their
    /// regular inputs are done; every vertex passes a marker on once one has arrived on each
    /// input that has not ended; a vertex whose inputs have all ended and whose buffers are empty
    /// finishes. Bounded sources finish once everything they will ever produce has been read.
    pub(super) fn after_processing(&mut self, v: usize) {
        let vertex = &self.vertices[v];
        if self.spec.vertices[v].kind == VertexKind::Source {
            let bounded_done = self.spec.vertices[v]
                .workload
                .as_ref()
                .and_then(|w| w.total_records)
                .is_some_and(|t| vertex.generated >= t)
                && vertex.partitions.iter().all(|p| p.pending == 0);
            if bounded_done {
                self.vertices[v].finished = true;
                self.broadcast(v, Token::End);
            }
            return;
        }
        let n_inputs = vertex.inputs.len();
        let ended = |slot: usize| vertex.subtasks.iter().all(|s| s.ended[slot]);
        let all_ended = (0..n_inputs).all(ended);
        if all_ended
            && vertex
                .subtasks
                .iter()
                .all(|s| s.queues.iter().all(Queue::is_empty))
        {
            self.vertices[v].finished = true;
            self.broadcast(v, Token::End);
            return;
        }
        if self.iterations.is_empty() {
            // Markers only start at iteration heads: without iterations there are none.
            return;
        }
        let mut emit = 0;
        let head = vertex.head_of.is_some();
        let mut emitted = vertex.markers_emitted;
        let mut initiated = vertex.head_initiated;
        if head && !initiated {
            let regular_done = vertex
                .inputs
                .iter()
                .enumerate()
                .all(|(slot, input)| matches!(input, InputFrom::Loop(_)) || ended(slot));
            if !regular_done {
                return;
            }
            initiated = true;
            emit += 1;
            emitted += 1;
        }
        let received = (0..n_inputs)
            .filter(|&slot| !ended(slot))
            .map(|slot| {
                vertex
                    .subtasks
                    .iter()
                    .map(|s| s.markers[slot])
                    .min()
                    .unwrap_or(0)
            })
            .min();
        if let Some(received) = received {
            let extra = u64::from(!head);
            while received >= emitted + extra {
                emit += 1;
                emitted += 1;
            }
        }
        self.vertices[v].head_initiated = initiated;
        self.vertices[v].markers_emitted = emitted;
        for _ in 0..emit {
            self.broadcast(v, Token::Marker);
        }
    }
}
