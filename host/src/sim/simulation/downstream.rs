//! A vertex and its downstream: how much input it may take given the free buffer space of the
//! subtasks it feeds (backpressure), and how its output is spread over them by each edge's
//! route.

use super::counts::to_f64;
use super::state::{Scratch, Simulation};
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
                    for (wj, s) in w.iter().zip(&down.subtasks) {
                        if *wj > 0.0 {
                            let free = to_f64(buffer.saturating_sub(s.queues[slot].records() + 1));
                            pooled = pooled.min(free / wj);
                        }
                    }
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
