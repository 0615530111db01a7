//! What the engine seams ask of a running simulation: a rescale (a restart whose downtime
//! grows with the state; in-flight records are kept and spread over the new subtasks) and a
//! rate limit on a source.

use std::collections::BTreeMap;

use super::state::{InputFrom, PendingRestart, Simulation, Subtask};
use crate::engine::EngineError;
use crate::sim::cluster::{Seat, SlotPool, capped, slots_needed};
use crate::sim::routing::{Route, apportion};
use crate::sim::spec::VertexKind;

impl Simulation {
    /// Requests a rescale: the job restarts and the new parallelism applies once the restart
    /// downtime has passed. Vertices not in `parallelism` keep theirs.
    pub(crate) fn request_rescale(
        &mut self,
        parallelism: &BTreeMap<String, u32>,
    ) -> Result<(), EngineError> {
        let mut target: Vec<u32> = match &self.pending {
            Some(p) => p.parallelism.clone(),
            None => self.vertices.iter().map(|v| v.parallelism).collect(),
        };
        for (id, &p) in parallelism {
            let v = self
                .spec
                .vertex_index(id)
                .ok_or_else(|| EngineError::InvalidRequest(format!("unknown vertex `{id}`")))?;
            let max = self.spec.vertices[v].max_parallelism;
            if p == 0 || p > max {
                return Err(EngineError::InvalidRequest(format!(
                    "parallelism {p} for `{id}` is outside 1..={max}"
                )));
            }
            target[v] = p;
        }
        if let Some(seat) = self.seat.as_mut() {
            seat.decided.clone_from(&target);
        }
        self.restart_to(target);
        Ok(())
    }

    /// On a shared cluster, a job running below its decided parallelism takes the slots that
    /// have freed up since (a restart, as the adaptive scheduler's upscale is). Called before
    /// each observation.
    pub(crate) fn take_free_slots(&mut self) {
        let Some(seat) = &self.seat else { return };
        if self.pending.is_some() {
            return;
        }
        let current: Vec<u32> = self.vertices.iter().map(|v| v.parallelism).collect();
        let wanted = slots_needed(&seat.decided);
        if slots_needed(&current) >= wanted || seat.pool.usage().free == 0 {
            return;
        }
        let decided = seat.decided.clone();
        self.restart_to(decided);
    }

    /// Restarts the job towards `target` (one parallelism per vertex): on a shared cluster,
    /// capped to the slots it gets.
    fn restart_to(&mut self, target: Vec<u32>) {
        let target = match &self.seat {
            Some(seat) => capped(&target, seat.pool.acquire(&seat.job, slots_needed(&target))),
            None => target,
        };
        let current: Vec<u32> = self.vertices.iter().map(|v| v.parallelism).collect();
        if self.pending.is_none() && target == current {
            return;
        }
        let state: f64 = self.vertices.iter().map(|v| v.state_bytes).sum();
        let downtime = self.spec.restart.downtime_ms
            + (self.spec.restart.per_gib_ms as f64 * state / f64::from(1u32 << 30)) as i64;
        let changes: Vec<String> = self
            .spec
            .vertices
            .iter()
            .zip(current.iter().zip(&target))
            .filter(|(_, (c, t))| c != t)
            .map(|(v, (c, t))| format!("{}:{c}->{t}", v.id))
            .collect();
        self.events.push(format!("rescale {}", changes.join(",")));
        self.restarts += 1;
        self.pending = Some(PendingRestart {
            until_ms: self.now_ms + downtime,
            parallelism: target,
        });
    }

    /// Runs the job on the shared cluster of `pool` as `job`: it takes the slots its
    /// parallelism needs, or what is free (then it starts below it).
    pub(crate) fn join_pool(&mut self, pool: std::sync::Arc<SlotPool>, job: &str) {
        let decided: Vec<u32> = self.vertices.iter().map(|v| v.parallelism).collect();
        let granted = pool.acquire(job, slots_needed(&decided));
        let start = capped(&decided, granted);
        self.seat = Some(Seat {
            pool,
            job: job.to_string(),
            decided,
        });
        if start
            != self
                .vertices
                .iter()
                .map(|v| v.parallelism)
                .collect::<Vec<_>>()
        {
            self.apply_parallelism(&start);
        }
    }

    /// The shared cluster's pool, when the job runs on one.
    pub(crate) fn pool(&self) -> Option<&std::sync::Arc<SlotPool>> {
        self.seat.as_ref().map(|seat| &seat.pool)
    }

    /// Sets or lifts the intake limit of a source.
    pub(crate) fn limit_rate(&mut self, id: &str, limit: Option<f64>) -> Result<(), EngineError> {
        let v = self
            .spec
            .vertex_index(id)
            .ok_or_else(|| EngineError::InvalidRequest(format!("unknown vertex `{id}`")))?;
        if self.spec.vertices[v].kind != VertexKind::Source {
            return Err(EngineError::InvalidRequest(format!(
                "`{id}` is not a source"
            )));
        }
        if let Some(l) = limit {
            if !l.is_finite() || l < 0.0 {
                return Err(EngineError::InvalidRequest(format!(
                    "rate limit {l} for `{id}` is not a rate"
                )));
            }
        }
        if self.vertices[v].rate_limit != limit {
            self.events.push(match limit {
                Some(l) => format!("rate-limit {id}={l:.0}"),
                None => format!("rate-limit {id}=none"),
            });
        }
        self.vertices[v].rate_limit = limit;
        Ok(())
    }

    /// Applies a new parallelism after a restart: rebuilds subtasks, spreads queued records by the
    /// new routes, reassigns partitions, and starts a fresh termination round.
    pub(super) fn apply_parallelism(&mut self, target: &[u32]) {
        for (v, &p) in target.iter().enumerate() {
            self.vertices[v].parallelism = p;
        }
        self.reroute();
        for v in 0..self.vertices.len() {
            let inputs = self.vertices[v].inputs.clone();
            let queued: Vec<u64> = (0..inputs.len())
                .map(|slot| {
                    self.vertices[v]
                        .subtasks
                        .iter()
                        .map(|s| s.queues[slot].records())
                        .sum()
                })
                .collect();
            let p = self.vertices[v].parallelism as usize;
            let mut subtasks: Vec<Subtask> = (0..p).map(|_| self.new_subtask(v)).collect();
            let mut parts = vec![0u64; p];
            for (slot, input) in inputs.iter().enumerate() {
                let (weights, upstream_done) = match input {
                    InputFrom::Edge(e) => (
                        self.downstream_weights(*e),
                        self.vertices[self.edges[*e].from].finished,
                    ),
                    InputFrom::Loop(it) => (vec![1.0; p], self.iterations[*it].terminated),
                };
                apportion(queued[slot], &weights, 0, &mut parts);
                for (s, n) in subtasks.iter_mut().zip(&parts) {
                    s.queues[slot].push_records(*n);
                    if upstream_done {
                        s.queues[slot].push_end();
                    }
                }
            }
            let vertex = &mut self.vertices[v];
            vertex.subtasks = subtasks;
            vertex.head_initiated = false;
            vertex.markers_emitted = 0;
            self.assign_partitions(v);
        }
        for it in &mut self.iterations {
            for q in &mut it.queues {
                q.clear_markers();
            }
            it.markers.iter_mut().for_each(|m| *m = 0);
            it.passed = 0;
            it.records_since_marker = 0;
        }
    }

    /// The share of an edge's records each downstream subtask receives.
    fn downstream_weights(&self, e: usize) -> Vec<f64> {
        let p = self.vertices[self.edges[e].to].parallelism as usize;
        match &self.edges[e].route {
            Route::Shared(w) => w.clone(),
            Route::Broadcast => vec![1.0; p],
            Route::Pointwise(lists) => {
                let mut w = vec![0.0; p];
                for (j, share) in lists.iter().flatten() {
                    w[*j] += share;
                }
                w
            }
        }
    }
}
