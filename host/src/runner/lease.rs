//! A job's lease, when several hosts share the fleet's state (`[host] state`): the job's loop
//! acts only while this host holds the lease, resumes the stored state when it takes the job
//! over, and stops at once when the lease is gone.

use std::sync::{Arc, Mutex};

use crate::engine::Engine;
use crate::events::{Event, EventReason, Severity};
use crate::state::{JobLeases, StateStore};

use super::job::JobRunner;

/// One job's view of its lease.
pub(super) struct JobLease {
    leases: Arc<dyn JobLeases>,
    job: String,
    /// The token this loop acts under; `None` while it does not hold the lease.
    token: Option<i64>,
}

impl JobLease {
    /// The lease of `job` when `store` is shared by several hosts (asked for at once), else
    /// `None`: the job is always this host's.
    pub(super) fn of(store: &Mutex<Box<dyn StateStore + Send>>, job: &str) -> Option<JobLease> {
        let leases = store.lock().ok()?.leases()?;
        leases.want(job);
        Some(JobLease {
            leases,
            job: job.to_string(),
            token: None,
        })
    }

    /// A job's view of `leases` without asking for the job (tests drive `held` themselves).
    #[cfg(test)]
    pub(super) fn over(leases: Arc<dyn JobLeases>, job: &str) -> JobLease {
        JobLease {
            leases,
            job: job.to_string(),
            token: None,
        }
    }

    /// Runs a lease round now, for a run of one step (`run --once`): the job's one step acts
    /// if this host could claim the lease (its share when other hosts run), and is left to the
    /// host that holds it otherwise. An `AutoscalerError` event when the round failed.
    pub(super) fn claim_now(&self) -> Option<Event> {
        let err = self.leases.claim_now().err()?;
        Some(self.event(
            EventReason::AutoscalerError,
            Severity::Warning,
            format!("cannot claim the job's lease for this run: {err}"),
        ))
    }

    /// Whether the job's next step may act. A lease just taken (or taken again under a new
    /// token) makes `runner` resume what the store holds of the job, and adds a
    /// `LeaseAcquired` event (and what restoring found) to `events`; a lease just lost adds
    /// `LeaseLost`. A lease lost and taken again between two steps (its token changed) adds
    /// both, in that order: whatever the loop did under the old token was fenced from the
    /// moment another host took the job.
    pub(super) fn before_step<E: Engine>(
        &mut self,
        runner: &mut JobRunner<E>,
        store: &Mutex<Box<dyn StateStore + Send>>,
        events: &mut Vec<Event>,
    ) -> bool {
        let held = self.leases.held(&self.job);
        if let Some(mine) = self.token
            && held != Some(mine)
        {
            self.token = None;
            runner.lose_lease();
            events.push(
                self.event(
                    EventReason::LeaseLost,
                    Severity::Warning,
                    format!(
                        "host {} no longer holds the job's lease (fencing token {mine}): it stopped acting on the job",
                        self.leases.host_id()
                    ),
                )
                .detail("token", mine),
            );
        }
        match (self.token, held) {
            (Some(mine), Some(now)) if mine == now => true,
            (_, Some(token)) => {
                let Ok(mut store) = store.lock() else {
                    return false;
                };
                if let Err(err) = store.refresh(&self.job) {
                    // Without the previous owner's state the job would start over: wait.
                    events.push(self.event(
                        EventReason::AutoscalerError,
                        Severity::Warning,
                        format!("cannot read the job's state to take it over: {err}"),
                    ));
                    return false;
                }
                let restored = runner.take_over(store.as_mut(), Arc::clone(&self.leases), token);
                self.token = Some(token);
                events.push(
                    self.event(
                        EventReason::LeaseAcquired,
                        Severity::Normal,
                        format!(
                            "host {} holds the job's lease (fencing token {token}) and acts on it",
                            self.leases.host_id()
                        ),
                    )
                    .detail("token", token),
                );
                match restored {
                    Ok(found) => events.extend(found),
                    Err(err) => events.push(self.event(
                        EventReason::AutoscalerError,
                        Severity::Warning,
                        err.to_string(),
                    )),
                }
                true
            }
            (_, None) => false,
        }
    }

    /// Tells the leases whether the job may move to another host after a step at `now_ms`.
    pub(super) fn after_step<E: Engine>(&self, runner: &JobRunner<E>, now_ms: i64) {
        if self.token.is_some() {
            self.leases.set_busy(&self.job, runner.is_busy(now_ms));
        }
    }

    fn event(&self, reason: EventReason, severity: Severity, message: String) -> Event {
        Event::new(reason, severity, message).job(&self.job)
    }
}

impl Drop for JobLease {
    /// The loop ended: the lease is given up at the next renewal.
    fn drop(&mut self) {
        self.leases.unwant(&self.job);
    }
}
