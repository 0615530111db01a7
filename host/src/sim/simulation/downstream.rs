//! A vertex and its downstream: how much input it may take given the free buffer space of the
//! subtasks it feeds (backpressure), and how its output is spread over them by each edge's
//! route.

use super::counts::to_f64;
use super::state::{Scratch, Simulation, Subtask};
use crate::sim::routing::{Route, apportion};

impl Simulation {
    /// How many input records each subtask may take given the free space downstream: a pooled
    /// allowance shared by all subtasks (all-to-all edges, returned) and a per-subtask one
    /// (pointwise edges, written to `per`). The flag says whether there is a pointwise edge:
    /// without one, `per` is left as it was, as every subtask's allowance would be infinite.
    pub(super) fn output_allowance(&self, v: usize, per: &mut Vec<f64>) -> (f64, bool) {
        let vertex = &self.vertices[v];
        let p = vertex.subtasks.len();
        let selectivity = self.spec.vertices[v].selectivity;
        let mut pooled = f64::INFINITY;
        if selectivity <= 0.0 {
            return (pooled, false);
        }
        let pointwise = vertex
            .outputs
            .iter()
            .any(|&e| matches!(self.edges[e].route, Route::Pointwise(_)));
        if pointwise {
            per.clear();
            per.resize(p, f64::INFINITY);
        }
        for &e in &vertex.outputs {
            let edge = &self.edges[e];
            let down = &self.vertices[edge.to];
            let buffer = self.spec.vertices[edge.to].buffer;
            let slot = edge.slot;
            // One record of headroom: apportioning can round a share up by one.
            let free = |j: usize| {
                to_f64(buffer.saturating_sub(down.subtasks[j].queues[slot].records() + 1))
            };
            match &edge.route {
                Route::Shared(w) => {
                    pooled = pooled.min(shared_allowance(w, &down.subtasks, slot, buffer));
                }
                Route::Broadcast => {
                    for j in 0..down.subtasks.len() {
                        pooled = pooled.min(free(j));
                    }
                }
                Route::Pointwise(lists) => {
                    let feeders =
                        |j: usize| lists.iter().flatten().filter(|(k, _)| *k == j).count();
                    let shared = lists.len() > down.subtasks.len();
                    for (i, list) in lists.iter().enumerate().take(p) {
                        for (j, wj) in list {
                            if *wj > 0.0 {
                                let n = if shared { feeders(*j) as f64 } else { 1.0 };
                                per[i] = per[i].min(free(*j) / n / wj);
                            }
                        }
                    }
                }
            }
        }
        if pointwise {
            per.iter_mut().for_each(|x| *x /= selectivity);
        }
        (pooled / selectivity, pointwise)
    }

    /// Pushes `sc.regular` (records emitted per subtask) into every output edge's queues.
    pub(super) fn emit_records(&mut self, v: usize, sc: &mut Scratch) {
        let offset = self.tick as usize;
        let pooled: u64 = sc.regular.iter().sum();
        for k in 0..self.vertices[v].outputs.len() {
            let e = self.vertices[v].outputs[k];
            let edge = &self.edges[e];
            let (to, slot) = (edge.to, edge.slot);
            let q = self.vertices[to].subtasks.len();
            sc.parts.clear();
            sc.parts.resize(q, 0);
            match &edge.route {
                Route::Shared(w) => apportion(pooled, w, offset, &mut sc.parts),
                Route::Broadcast => sc.parts.iter_mut().for_each(|x| *x = pooled),
                Route::Pointwise(lists) => {
                    for (i, list) in lists.iter().enumerate() {
                        let n = sc.regular.get(i).copied().unwrap_or(0);
                        if let [(j, _)] = list.as_slice() {
                            sc.parts[*j] += n;
                            continue;
                        }
                        sc.weights.clear();
                        sc.weights.extend(list.iter().map(|(_, w)| *w));
                        sc.take.resize(list.len(), 0);
                        apportion(n, &sc.weights, offset, &mut sc.take);
                        for ((j, _), n) in list.iter().zip(&sc.take) {
                            sc.parts[*j] += n;
                        }
                    }
                }
            }
            for (s, n) in self.vertices[to].subtasks.iter_mut().zip(&sc.parts) {
                s.queues[slot].push_records(*n);
            }
        }
    }
}

/// The most records an all-to-all edge with weights `w` lets its upstream vertex emit: the
/// least, over the downstream subtasks it sends to, of their free space (in input `slot`, of
/// `buffer` records each, one record of headroom) over their share.
///
/// Every quotient is finite or infinite, never NaN (a share is positive, a free space a
/// count), so their minimum does not depend on the order it is taken in: four running minima
/// over interleaved subtasks, instead of one that waits for every comparison before the next.
#[inline]
fn shared_allowance(w: &[f64], down: &[Subtask], slot: usize, buffer: u64) -> f64 {
    let mut least = [f64::INFINITY; 4];
    for (weights, subtasks) in w.chunks(4).zip(down.chunks(4)) {
        for ((wj, s), least) in weights.iter().zip(subtasks).zip(&mut least) {
            if *wj > 0.0 {
                let free = to_f64(buffer.saturating_sub(s.queues[slot].records() + 1));
                let quotient = free / wj;
                if quotient < *least {
                    *least = quotient;
                }
            }
        }
    }
    least.into_iter().fold(f64::INFINITY, f64::min)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::queue::Queue;

    /// Downstream subtasks whose one input holds `filled` records.
    fn subtasks(filled: &[u64]) -> Vec<Subtask> {
        filled
            .iter()
            .map(|&n| {
                let mut s = Subtask::default();
                s.queues.push(Queue::default());
                s.queues[0].push_records(n);
                s
            })
            .collect()
    }

    #[test]
    fn the_shared_allowance_is_the_least_free_space_over_share() {
        // Buffers of 100 with one record of headroom: free 89, 99, 4, 59, 49, 79. The third
        // gets no share and limits nothing; the fifth (in the second run of four) limits most:
        // 49 / 0.25 = 196, against 890, 495, 196.67 and 526.67.
        let w = [0.1, 0.2, 0.0, 0.3, 0.25, 0.15];
        let down = subtasks(&[10, 0, 95, 40, 50, 20]);
        assert_eq!(shared_allowance(&w, &down, 0, 100), 196.0);
        // A full subtask stops the edge; no share at all leaves it unbounded.
        let down = subtasks(&[10, 0, 95, 40, 99, 20]);
        assert_eq!(shared_allowance(&w, &down, 0, 100), 0.0);
        assert_eq!(shared_allowance(&[0.0; 6], &down, 0, 100), f64::INFINITY);
    }
}
