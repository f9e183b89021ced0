//! The kernel's jobs queue and activity counts in memory, by the rules of the store's
//! (`repos/kernel/`).

use super::{MemoryJob, MemoryState};
use crate::kernel::activity::{Activity, ActivityCount, ActivityRepository};
use crate::kernel::error::StoreResult;
use crate::kernel::ids::{JobId, ShopId};
use crate::kernel::jobs::{Enqueued, Job, JobCount, JobFilter, JobRepository, JobState, NewJob};
use crate::kernel::time::Timestamp;

fn unfinished(job: &Job) -> bool {
    matches!(job.state, JobState::Queued | JobState::Running)
}

impl MemoryState {
    /// How many jobs there are of each kind in each state: the shop's, or every one.
    fn count_jobs_of(&self, shop_id: Option<ShopId>) -> Vec<JobCount> {
        let mut counts: Vec<JobCount> = Vec::new();
        for held in &self.jobs {
            if shop_id.is_some_and(|shop_id| held.job.shop_id != Some(shop_id)) {
                continue;
            }
            match counts
                .iter_mut()
                .find(|count| count.kind == held.job.kind && count.state == held.job.state)
            {
                Some(count) => count.count += 1,
                None => counts.push(JobCount {
                    kind: held.job.kind.clone(),
                    state: held.job.state,
                    count: 1,
                }),
            }
        }
        counts
    }

    fn held(&mut self, id: JobId, worker: &str) -> Option<&mut MemoryJob> {
        self.jobs.iter_mut().find(|held| {
            held.job.id == id
                && held.job.state == JobState::Running
                && held.job.locked_by.as_deref() == Some(worker)
        })
    }
}

impl JobRepository for MemoryState {
    fn enqueue_job(&mut self, new: &NewJob, now: Timestamp) -> StoreResult<Enqueued> {
        if let Some(key) = &new.unique_key
            && let Some(held) = self
                .jobs
                .iter_mut()
                .find(|held| unfinished(&held.job) && held.job.unique_key.as_ref() == Some(key))
        {
            if held.job.state == JobState::Queued {
                held.job.run_at = held.job.run_at.min(new.run_at);
            } else {
                held.again_at = Some(held.again_at.map_or(new.run_at, |at| at.min(new.run_at)));
            }
            held.job.updated_at = now;
            return Ok(Enqueued::Coalesced(held.job.id));
        }
        let id = JobId(
            self.jobs
                .iter()
                .map(|held| held.job.id.0)
                .max()
                .unwrap_or(0)
                + 1,
        );
        self.jobs.push(MemoryJob {
            job: Job {
                id,
                kind: new.kind.to_string(),
                payload: new.payload.clone(),
                unique_key: new.unique_key.clone(),
                state: JobState::Queued,
                run_at: new.run_at,
                attempts: 0,
                max_attempts: new.max_attempts.max(1),
                locked_by: None,
                last_error: None,
                created_at: now,
                updated_at: now,
                shop_id: new.shop_id,
                request_id: new.request_id.clone(),
                trace_parent: new.trace_parent.clone(),
            },
            again_at: None,
        });
        Ok(Enqueued::New(id))
    }

    fn claim_jobs(
        &mut self,
        kinds: &[&str],
        worker: &str,
        now: Timestamp,
        lease_until: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<Job>> {
        let mut due: Vec<usize> = (0..self.jobs.len())
            .filter(|&n| {
                let job = &self.jobs[n].job;
                unfinished(job) && job.run_at <= now && kinds.contains(&job.kind.as_str())
            })
            .collect();
        due.sort_by_key(|&n| (self.jobs[n].job.run_at, self.jobs[n].job.id));
        let mut claimed = Vec::new();
        for n in due.into_iter().take(limit) {
            let held = &mut self.jobs[n];
            held.job.updated_at = now;
            if held.job.state == JobState::Running && held.job.attempts >= held.job.max_attempts {
                held.job.state = JobState::Failed;
                held.job.locked_by = None;
                held.again_at = None;
                held.job.last_error = Some("its worker stopped during the last attempt".into());
                continue;
            }
            held.job.state = JobState::Running;
            held.job.attempts += 1;
            held.job.locked_by = Some(worker.to_string());
            held.job.run_at = lease_until;
            claimed.push(held.job.clone());
        }
        Ok(claimed)
    }

    fn has_due_jobs(&mut self, kinds: &[&str], now: Timestamp) -> StoreResult<bool> {
        Ok(self.jobs.iter().any(|held| {
            unfinished(&held.job)
                && held.job.run_at <= now
                && kinds.contains(&held.job.kind.as_str())
        }))
    }

    fn renew_job_leases(
        &mut self,
        ids: &[JobId],
        worker: &str,
        lease_until: Timestamp,
        now: Timestamp,
    ) -> StoreResult<Vec<JobId>> {
        let mut held = Vec::new();
        for &id in ids {
            if let Some(job) = self.held(id, worker) {
                job.job.run_at = lease_until;
                job.job.updated_at = now;
                held.push(id);
            }
        }
        Ok(held)
    }

    fn complete_job(
        &mut self,
        id: JobId,
        worker: &str,
        again_at: Option<Timestamp>,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let Some(held) = self.held(id, worker) else {
            return Ok(false);
        };
        let next = match (again_at, held.again_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match next {
            None => self.jobs.retain(|held| held.job.id != id),
            Some(at) => {
                held.job.state = JobState::Queued;
                held.job.run_at = at;
                held.job.attempts = 0;
                held.job.locked_by = None;
                held.job.last_error = None;
                held.job.updated_at = now;
                held.again_at = None;
            }
        }
        Ok(true)
    }

    fn retry_job(
        &mut self,
        id: JobId,
        worker: &str,
        run_at: Timestamp,
        error: &str,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let Some(held) = self.held(id, worker) else {
            return Ok(false);
        };
        held.job.state = JobState::Queued;
        held.job.run_at = run_at;
        held.job.locked_by = None;
        held.job.last_error = Some(error.to_string());
        held.job.updated_at = now;
        held.again_at = None;
        Ok(true)
    }

    fn fail_job(
        &mut self,
        id: JobId,
        worker: &str,
        error: &str,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let Some(held) = self.held(id, worker) else {
            return Ok(false);
        };
        held.job.state = JobState::Failed;
        held.job.locked_by = None;
        held.job.last_error = Some(error.to_string());
        held.job.updated_at = now;
        held.again_at = None;
        Ok(true)
    }

    fn release_job(&mut self, id: JobId, worker: &str, now: Timestamp) -> StoreResult<bool> {
        let Some(held) = self.held(id, worker) else {
            return Ok(false);
        };
        held.job.state = JobState::Queued;
        held.job.run_at = now;
        held.job.attempts -= 1;
        held.job.locked_by = None;
        held.job.updated_at = now;
        held.again_at = None;
        Ok(true)
    }

    fn job(&mut self, id: JobId) -> StoreResult<Option<Job>> {
        Ok(self
            .jobs
            .iter()
            .find(|held| held.job.id == id)
            .map(|held| held.job.clone()))
    }

    fn list_jobs(&mut self, state: Option<JobState>, limit: usize) -> StoreResult<Vec<Job>> {
        let mut jobs: Vec<Job> = self
            .jobs
            .iter()
            .filter(|held| state.is_none_or(|state| held.job.state == state))
            .map(|held| held.job.clone())
            .collect();
        jobs.sort_by_key(|job| job.id);
        jobs.truncate(limit);
        Ok(jobs)
    }

    fn shop_jobs(
        &mut self,
        shop_id: ShopId,
        filter: &JobFilter,
        before: Option<JobId>,
        limit: usize,
    ) -> StoreResult<Vec<Job>> {
        let mut jobs: Vec<Job> = self
            .jobs
            .iter()
            .map(|held| &held.job)
            .filter(|job| job.shop_id == Some(shop_id))
            .filter(|job| filter.state.is_none_or(|state| job.state == state))
            .filter(|job| filter.kind.as_ref().is_none_or(|kind| job.kind == *kind))
            .filter(|job| before.is_none_or(|before| job.id < before))
            .cloned()
            .collect();
        jobs.sort_by_key(|job| std::cmp::Reverse(job.id));
        jobs.truncate(limit);
        Ok(jobs)
    }

    fn count_shop_jobs(&mut self, shop_id: ShopId) -> StoreResult<Vec<JobCount>> {
        Ok(self.count_jobs_of(Some(shop_id)))
    }

    fn count_jobs(&mut self) -> StoreResult<Vec<JobCount>> {
        Ok(self.count_jobs_of(None))
    }

    fn requeue_jobs(&mut self, ids: Option<&[JobId]>, now: Timestamp) -> StoreResult<Vec<JobId>> {
        let mut requeued = Vec::new();
        for n in 0..self.jobs.len() {
            let job = &self.jobs[n].job;
            let chosen = match ids {
                Some(ids) => {
                    ids.contains(&job.id)
                        && matches!(job.state, JobState::Failed | JobState::Cancelled)
                }
                None => job.state == JobState::Failed,
            };
            let key_held = job.unique_key.as_ref().is_some_and(|key| {
                self.jobs.iter().any(|other| {
                    unfinished(&other.job) && other.job.unique_key.as_ref() == Some(key)
                })
            });
            if !chosen || key_held {
                continue;
            }
            let job = &mut self.jobs[n].job;
            job.state = JobState::Queued;
            job.run_at = now;
            job.attempts = 0;
            job.locked_by = None;
            job.updated_at = now;
            requeued.push(job.id);
        }
        Ok(requeued)
    }

    fn cancel_jobs(&mut self, ids: &[JobId], now: Timestamp) -> StoreResult<Vec<JobId>> {
        let mut cancelled = Vec::new();
        for held in &mut self.jobs {
            if ids.contains(&held.job.id) && held.job.state != JobState::Cancelled {
                held.job.state = JobState::Cancelled;
                held.job.locked_by = None;
                held.job.updated_at = now;
                held.again_at = None;
                cancelled.push(held.job.id);
            }
        }
        cancelled.sort_unstable();
        Ok(cancelled)
    }
}

impl ActivityRepository for MemoryState {
    fn add_activity(&mut self, counts: &[ActivityCount]) -> StoreResult<()> {
        for count in counts {
            *self
                .activity
                .entry((count.shop_id, count.bucket.as_micros(), count.activity))
                .or_default() += count.count;
        }
        Ok(())
    }

    fn shop_activity_since(
        &mut self,
        shop_id: ShopId,
        since: Timestamp,
    ) -> StoreResult<Vec<ActivityCount>> {
        Ok(self
            .activity
            .range(
                (shop_id, since.as_micros(), Activity::ALL[0])
                    ..(ShopId(shop_id.0 + 1), i64::MIN, Activity::ALL[0]),
            )
            .map(|(&(shop_id, bucket, activity), &count)| ActivityCount {
                shop_id,
                activity,
                bucket: Timestamp::from_micros(bucket),
                count,
            })
            .collect())
    }

    fn prune_activity(&mut self, before: Timestamp) -> StoreResult<usize> {
        let count = self.activity.len();
        self.activity
            .retain(|&(_, bucket, _), _| bucket >= before.as_micros());
        Ok(count - self.activity.len())
    }
}
