//! The jobs queue (docs/jobs.md). A claimed job's `run_at` moves to its lease's end, so it is
//! due again, for any worker, when the lease runs out; every change to a claimed job checks
//! that the worker still holds it.

use diesel::prelude::*;
use mercer_domain::kernel::error::StoreResult;
use mercer_domain::kernel::ids::{JobId, ShopId};
use mercer_domain::kernel::jobs::{
    Enqueued, Job, JobCount, JobFilter, JobRepository, JobState, NewJob, traces_exported,
};
use mercer_domain::{StorageError, Timestamp};

use crate::connection::{DbConnection, KeepPrepared, on_backend, statement_sites};

use crate::repos::StoreTx;
use crate::schema::{job_trace_parents, jobs};
use crate::store::{storable, storage_error};

#[derive(Queryable, Selectable)]
#[diesel(table_name = jobs)]
struct JobRow {
    id: i64,
    kind: String,
    payload: String,
    unique_key: Option<String>,
    state: String,
    run_at: i64,
    attempts: i64,
    max_attempts: i64,
    locked_by: Option<String>,
    last_error: Option<String>,
    created_at: i64,
    updated_at: i64,
    shop_id: Option<i64>,
    request_id: Option<String>,
}

impl TryFrom<JobRow> for Job {
    type Error = StorageError;

    fn try_from(row: JobRow) -> Result<Self, StorageError> {
        Ok(Job {
            id: JobId(row.id),
            kind: row.kind,
            payload: row.payload,
            unique_key: row.unique_key,
            state: JobState::parse(&row.state)
                .ok_or_else(|| StorageError::other(format!("job {}: stored state", row.id)))?,
            run_at: Timestamp::from_micros(row.run_at),
            attempts: row.attempts,
            max_attempts: row.max_attempts,
            locked_by: row.locked_by,
            last_error: row.last_error,
            created_at: Timestamp::from_micros(row.created_at),
            updated_at: Timestamp::from_micros(row.updated_at),
            shop_id: row.shop_id.map(ShopId),
            request_id: row.request_id,
            // Read apart, when a job is claimed (`claim_jobs`).
            trace_parent: None,
        })
    }
}

statement_sites!(HeldKey);

const QUEUED: &str = "queued";
const RUNNING: &str = "running";
const FAILED: &str = "failed";
const CANCELLED: &str = "cancelled";
/// The states the unique key is held in.
const UNFINISHED: [&str; 2] = [QUEUED, RUNNING];

/// Due jobs of `$kinds`, the longest due first.
macro_rules! due {
    ($kinds:expr, $now:expr, $limit:expr) => {
        jobs::table
            .filter(jobs::state.eq_any(UNFINISHED))
            .filter(jobs::run_at.le($now))
            .filter(jobs::kind.eq_any($kinds))
            .order((jobs::run_at.asc(), jobs::id.asc()))
            .limit($limit as i64)
            .select(JobRow::as_select())
    };
}

fn due_rows(
    conn: &mut DbConnection,
    kinds: &[&str],
    now: i64,
    limit: usize,
) -> QueryResult<Vec<JobRow>> {
    match conn {
        // The claiming transaction is `BEGIN IMMEDIATE`: one claimer at a time.
        DbConnection::Sqlite(c) => due!(kinds, now, limit).load(c),
        // Several processes share the queue: each takes rows the others have not locked.
        DbConnection::Pg(c) => due!(kinds, now, limit).for_update().skip_locked().load(c),
    }
}

/// The columns of a new job's row, `queued`.
macro_rules! job_values {
    ($job:expr, $now:expr) => {
        (
            jobs::kind.eq($job.kind),
            jobs::payload.eq(&$job.payload),
            jobs::unique_key.eq($job.unique_key.as_deref()),
            jobs::state.eq(QUEUED),
            jobs::run_at.eq($job.run_at.as_micros()),
            jobs::attempts.eq(0),
            jobs::max_attempts.eq($job.max_attempts.max(1)),
            jobs::created_at.eq($now.as_micros()),
            jobs::updated_at.eq($now.as_micros()),
            jobs::shop_id.eq($job.shop_id.map(|shop| shop.0)),
            jobs::request_id.eq($job.request_id.as_deref()),
        )
    };
}

/// The job `worker` holds.
macro_rules! held {
    ($id:expr, $worker:expr) => {
        jobs::table
            .filter(jobs::id.eq($id))
            .filter(jobs::state.eq(RUNNING))
            .filter(jobs::locked_by.eq($worker))
    };
}

/// Counts as `(kind, state, count)` rows read them.
fn job_counts(rows: Vec<(String, String, i64)>) -> StoreResult<Vec<JobCount>> {
    rows.into_iter()
        .map(|(kind, state, count)| {
            Ok(JobCount {
                state: JobState::parse(&state)
                    .ok_or_else(|| StorageError::other("stored job state"))?,
                kind,
                count,
            })
        })
        .collect()
}

impl StoreTx<'_> {
    fn insert_job(&mut self, job: &NewJob, now: Timestamp) -> StoreResult<Option<i64>> {
        let id = self.insert_job_row(job, now)?;
        if let (Some(id), Some(trace_parent)) = (id, job.trace_parent.as_deref()) {
            // A statement of its own (the `jobs` declaration is full), made only when traces
            // are exported.
            diesel::update(job_trace_parents::table.find(id))
                .set(job_trace_parents::trace_parent.eq(trace_parent))
                .execute(self.conn)
                .map_err(storage_error)?;
        }
        Ok(id)
    }

    /// The claimed jobs' trace contexts, read only when traces are exported.
    fn read_trace_parents(&mut self, claimed: &mut [Job]) -> StoreResult<()> {
        if claimed.is_empty() || !traces_exported() {
            return Ok(());
        }
        let ids: Vec<i64> = claimed.iter().map(|job| job.id.0).collect();
        let parents: Vec<(i64, Option<String>)> = job_trace_parents::table
            .filter(job_trace_parents::id.eq_any(&ids))
            .select((job_trace_parents::id, job_trace_parents::trace_parent))
            .load(self.conn)
            .map_err(storage_error)?;
        for (id, trace_parent) in parents {
            if let Some(job) = claimed.iter_mut().find(|job| job.id.0 == id) {
                job.trace_parent = trace_parent;
            }
        }
        Ok(())
    }

    fn insert_job_row(&mut self, job: &NewJob, now: Timestamp) -> StoreResult<Option<i64>> {
        let values = job_values!(job, now);
        // A clash with the partial unique index leaves the row out instead of failing the
        // caller's transaction (PostgreSQL would abort it).
        on_backend!(&mut *self.conn, |c| {
            diesel::insert_into(jobs::table)
                .values(values)
                .on_conflict_do_nothing()
                .returning(jobs::id)
                .get_result::<i64>(c)
                .optional()
        })
        .map_err(storage_error)
    }

    /// [`Self::insert_job_row`] for several jobs in one statement: the `(id, unique_key)` of
    /// those inserted, in no promised order.
    fn insert_job_rows(
        &mut self,
        jobs: &[NewJob],
        now: Timestamp,
    ) -> StoreResult<Vec<(i64, Option<String>)>> {
        let rows: Vec<_> = jobs.iter().map(|job| job_values!(job, now)).collect();
        on_backend!(&mut *self.conn, |c| {
            diesel::insert_into(jobs::table)
                .values(&rows)
                .on_conflict_do_nothing()
                .returning((jobs::id, jobs::unique_key))
                .get_results(c)
        })
        .map_err(storage_error)
    }

    /// Folds an enqueue into the unfinished job holding `key`: a queued one is due no later
    /// than `run_at`; a running one runs again after this run.
    fn coalesce_job(
        &mut self,
        key: &str,
        run_at: Timestamp,
        now: Timestamp,
    ) -> StoreResult<Option<i64>> {
        // The states written out as the partial unique index `jobs_unique_key` is, and the
        // statement kept prepared: with the states as parameters PostgreSQL cannot use that
        // index in a generic plan, and planned the lookup anew at every enqueue, which cost
        // ten times its run.
        let held: Vec<(i64, String, i64, Option<i64>)> = on_backend!(&mut *self.conn, |c| {
            KeepPrepared::<HeldKey, _>::new(
                jobs::table
                    .filter(jobs::unique_key.eq(key))
                    .filter(diesel::dsl::sql::<diesel::sql_types::Bool>(
                        "\"jobs\".\"state\" IN ('queued', 'running')",
                    ))
                    .select((jobs::id, jobs::state, jobs::run_at, jobs::again_at))
                    .limit(1),
            )
            .load(c)
        })
        .map_err(storage_error)?;
        let Some((id, state, due, again)) = held.into_iter().next() else {
            return Ok(None);
        };
        let run_at = run_at.as_micros();
        let changed = if state == QUEUED {
            diesel::update(jobs::table.find(id).filter(jobs::state.eq(QUEUED)))
                .set((
                    jobs::run_at.eq(due.min(run_at)),
                    jobs::updated_at.eq(now.as_micros()),
                ))
                .execute(self.conn)
        } else {
            let again = again.map_or(run_at, |again| again.min(run_at));
            diesel::update(jobs::table.find(id).filter(jobs::state.eq(RUNNING)))
                .set((
                    jobs::again_at.eq(Some(again)),
                    jobs::updated_at.eq(now.as_micros()),
                ))
                .execute(self.conn)
        }
        .map_err(storage_error)?;
        Ok((changed == 1).then_some(id))
    }
}

impl JobRepository for StoreTx<'_> {
    fn enqueue_job(&mut self, job: &NewJob, now: Timestamp) -> StoreResult<Enqueued> {
        let Some(key) = &job.unique_key else {
            return match self.insert_job(job, now)? {
                Some(id) => Ok(Enqueued::New(JobId(id))),
                None => Err(StorageError::other("a job without a key was not inserted")),
            };
        };
        // The job holding the key may end between the two statements: then try again.
        for _ in 0..3 {
            if let Some(id) = self.coalesce_job(key, job.run_at, now)? {
                return Ok(Enqueued::Coalesced(JobId(id)));
            }
            if let Some(id) = self.insert_job(job, now)? {
                return Ok(Enqueued::New(JobId(id)));
            }
        }
        Err(StorageError::transient(format!(
            "the job {key} kept changing while it was enqueued"
        )))
    }

    fn enqueue_jobs(&mut self, jobs: &[NewJob], now: Timestamp) -> StoreResult<Vec<Enqueued>> {
        // Keyed jobs, keys all different, no trace to write: one insert for them all. A job
        // whose key an unfinished job holds is left out of it and enqueued on its own, which
        // folds it into that job.
        let mut keys: Vec<&str> = jobs
            .iter()
            .filter_map(|job| job.unique_key.as_deref())
            .collect();
        keys.sort_unstable();
        keys.dedup();
        let one_statement = jobs.len() > 1
            && keys.len() == jobs.len()
            && jobs.iter().all(|job| job.trace_parent.is_none());
        if !one_statement {
            return jobs.iter().map(|job| self.enqueue_job(job, now)).collect();
        }
        let inserted = self.insert_job_rows(jobs, now)?;
        jobs.iter()
            .map(|job| {
                let key = job.unique_key.as_deref();
                match inserted.iter().find(|(_, held)| held.as_deref() == key) {
                    Some((id, _)) => Ok(Enqueued::New(JobId(*id))),
                    None => self.enqueue_job(job, now),
                }
            })
            .collect()
    }

    fn claim_jobs(
        &mut self,
        kinds: &[&str],
        worker: &str,
        now: Timestamp,
        lease_until: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<Job>> {
        let rows = due_rows(self.conn, kinds, now.as_micros(), limit).map_err(storage_error)?;
        // Its worker stopped during the last attempt allowed (it crashed, or the job crashes
        // it): failed rather than tried again.
        let (exhausted, rows): (Vec<JobRow>, Vec<JobRow>) = rows
            .into_iter()
            .partition(|row| row.state == RUNNING && row.attempts >= row.max_attempts);
        for row in exhausted {
            diesel::update(jobs::table.find(row.id))
                .set((
                    jobs::state.eq(FAILED),
                    jobs::locked_by.eq(None::<String>),
                    jobs::locked_until.eq(None::<i64>),
                    jobs::again_at.eq(None::<i64>),
                    jobs::last_error.eq(Some("its worker stopped during the last attempt")),
                    jobs::updated_at.eq(now.as_micros()),
                ))
                .execute(self.conn)
                .map_err(storage_error)?;
        }
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        // Every claimed job gets the same lease: one statement for all of them.
        let ids: Vec<i64> = rows.iter().map(|row| row.id).collect();
        diesel::update(jobs::table.filter(jobs::id.eq_any(&ids)))
            .set((
                jobs::state.eq(RUNNING),
                jobs::attempts.eq(jobs::attempts + 1),
                jobs::locked_by.eq(Some(worker)),
                jobs::locked_until.eq(Some(lease_until.as_micros())),
                jobs::run_at.eq(lease_until.as_micros()),
                jobs::updated_at.eq(now.as_micros()),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
        let mut claimed = Vec::with_capacity(rows.len());
        for row in rows {
            let id = row.id;
            let job = JobRow {
                state: RUNNING.to_string(),
                attempts: row.attempts + 1,
                locked_by: Some(worker.to_string()),
                run_at: lease_until.as_micros(),
                updated_at: now.as_micros(),
                ..row
            };
            match Job::try_from(job) {
                Ok(job) => claimed.push(job),
                Err(error) => {
                    self.fail_job(JobId(id), worker, &error.to_string(), now)?;
                }
            }
        }
        self.read_trace_parents(&mut claimed)?;
        Ok(claimed)
    }

    fn has_due_jobs(&mut self, kinds: &[&str], now: Timestamp) -> StoreResult<bool> {
        let due = jobs::table
            .filter(jobs::state.eq_any(UNFINISHED))
            .filter(jobs::run_at.le(now.as_micros()))
            .filter(jobs::kind.eq_any(kinds))
            .select(jobs::id)
            .first::<i64>(self.conn)
            .optional()
            .map_err(storage_error)?;
        Ok(due.is_some())
    }

    fn renew_job_leases(
        &mut self,
        ids: &[JobId],
        worker: &str,
        lease_until: Timestamp,
        now: Timestamp,
    ) -> StoreResult<Vec<JobId>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = ids.iter().map(|id| id.0).collect();
        let mine = || {
            jobs::table
                .filter(jobs::id.eq_any(&ids))
                .filter(jobs::state.eq(RUNNING))
                .filter(jobs::locked_by.eq(worker))
        };
        diesel::update(mine())
            .set((
                jobs::locked_until.eq(Some(lease_until.as_micros())),
                jobs::run_at.eq(lease_until.as_micros()),
                jobs::updated_at.eq(now.as_micros()),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(mine()
            .select(jobs::id)
            .load(self.conn)
            .map_err(storage_error)?
            .into_iter()
            .map(JobId)
            .collect())
    }

    fn complete_job(
        &mut self,
        id: JobId,
        worker: &str,
        again_at: Option<Timestamp>,
        now: Timestamp,
    ) -> StoreResult<bool> {
        // Most jobs end for good, with no enqueue coming in while they ran: one statement.
        if again_at.is_none() {
            let deleted: Vec<i64> = on_backend!(&mut *self.conn, |c| {
                diesel::delete(held!(id.0, worker).filter(jobs::again_at.is_null()))
                    .returning(jobs::id)
                    .load(c)
            })
            .map_err(storage_error)?;
            if !deleted.is_empty() {
                return Ok(true);
            }
        }
        let Some(enqueued_again) = held!(id.0, worker)
            .select(jobs::again_at)
            .first::<Option<i64>>(self.conn)
            .optional()
            .map_err(storage_error)?
        else {
            return Ok(false);
        };
        let next = match (again_at.map(Timestamp::as_micros), enqueued_again) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let changed = match next {
            None => diesel::delete(held!(id.0, worker)).execute(self.conn),
            Some(run_at) => diesel::update(held!(id.0, worker))
                .set((
                    jobs::state.eq(QUEUED),
                    jobs::run_at.eq(run_at),
                    jobs::attempts.eq(0),
                    jobs::locked_by.eq(None::<String>),
                    jobs::locked_until.eq(None::<i64>),
                    jobs::again_at.eq(None::<i64>),
                    jobs::last_error.eq(None::<String>),
                    jobs::updated_at.eq(now.as_micros()),
                ))
                .execute(self.conn),
        }
        .map_err(storage_error)?;
        Ok(changed == 1)
    }

    fn retry_job(
        &mut self,
        id: JobId,
        worker: &str,
        run_at: Timestamp,
        error: &str,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let changed = diesel::update(held!(id.0, worker))
            .set((
                jobs::state.eq(QUEUED),
                jobs::run_at.eq(run_at.as_micros()),
                jobs::locked_by.eq(None::<String>),
                jobs::locked_until.eq(None::<i64>),
                jobs::again_at.eq(None::<i64>),
                jobs::last_error.eq(Some(storable(error))),
                jobs::updated_at.eq(now.as_micros()),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(changed == 1)
    }

    fn fail_job(
        &mut self,
        id: JobId,
        worker: &str,
        error: &str,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let changed = diesel::update(held!(id.0, worker))
            .set((
                jobs::state.eq(FAILED),
                jobs::locked_by.eq(None::<String>),
                jobs::locked_until.eq(None::<i64>),
                jobs::again_at.eq(None::<i64>),
                jobs::last_error.eq(Some(storable(error))),
                jobs::updated_at.eq(now.as_micros()),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(changed == 1)
    }

    fn release_job(&mut self, id: JobId, worker: &str, now: Timestamp) -> StoreResult<bool> {
        let changed = diesel::update(held!(id.0, worker))
            .set((
                jobs::state.eq(QUEUED),
                jobs::run_at.eq(now.as_micros()),
                jobs::attempts.eq(jobs::attempts - 1),
                jobs::locked_by.eq(None::<String>),
                jobs::locked_until.eq(None::<i64>),
                jobs::again_at.eq(None::<i64>),
                jobs::updated_at.eq(now.as_micros()),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(changed == 1)
    }

    fn job(&mut self, id: JobId) -> StoreResult<Option<Job>> {
        jobs::table
            .find(id.0)
            .select(JobRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(storage_error)?
            .map(Job::try_from)
            .transpose()
    }

    fn list_jobs(&mut self, state: Option<JobState>, limit: usize) -> StoreResult<Vec<Job>> {
        let mut query = jobs::table
            .order(jobs::id.asc())
            .limit(limit as i64)
            .select(JobRow::as_select())
            .into_boxed();
        if let Some(state) = state {
            query = query.filter(jobs::state.eq(state.as_str()));
        }
        query
            .load(self.conn)
            .map_err(storage_error)?
            .into_iter()
            .map(Job::try_from)
            .collect()
    }

    fn shop_jobs(
        &mut self,
        shop_id: ShopId,
        filter: &JobFilter,
        before: Option<JobId>,
        limit: usize,
    ) -> StoreResult<Vec<Job>> {
        let mut query = jobs::table.filter(jobs::shop_id.eq(shop_id.0)).into_boxed();
        if let Some(state) = filter.state {
            query = query.filter(jobs::state.eq(state.as_str()));
        }
        if let Some(kind) = &filter.kind {
            query = query.filter(jobs::kind.eq(kind.clone()));
        }
        if let Some(before) = before {
            query = query.filter(jobs::id.lt(before.0));
        }
        query
            .order(jobs::id.desc())
            .limit(i64::try_from(limit).unwrap_or(i64::MAX))
            .select(JobRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?
            .into_iter()
            .map(Job::try_from)
            .collect()
    }

    fn count_jobs(&mut self) -> StoreResult<Vec<JobCount>> {
        job_counts(
            jobs::table
                .group_by((jobs::kind, jobs::state))
                .select((jobs::kind, jobs::state, diesel::dsl::count_star()))
                .load(self.conn)
                .map_err(storage_error)?,
        )
    }

    fn count_shop_jobs(&mut self, shop_id: ShopId) -> StoreResult<Vec<JobCount>> {
        job_counts(
            jobs::table
                .filter(jobs::shop_id.eq(shop_id.0))
                .group_by((jobs::kind, jobs::state))
                .select((jobs::kind, jobs::state, diesel::dsl::count_star()))
                .load(self.conn)
                .map_err(storage_error)?,
        )
    }

    fn requeue_jobs(&mut self, ids: Option<&[JobId]>, now: Timestamp) -> StoreResult<Vec<JobId>> {
        let mut query = jobs::table
            .filter(jobs::state.eq_any([FAILED, CANCELLED]))
            .select((jobs::id, jobs::unique_key))
            .order(jobs::id.asc())
            .into_boxed();
        match ids {
            Some(ids) => {
                let ids: Vec<i64> = ids.iter().map(|id| id.0).collect();
                query = query.filter(jobs::id.eq_any(ids));
            }
            None => query = query.filter(jobs::state.eq(FAILED)),
        }
        let candidates: Vec<(i64, Option<String>)> =
            query.load(self.conn).map_err(storage_error)?;
        let mut requeued = Vec::with_capacity(candidates.len());
        for (id, key) in candidates {
            if let Some(key) = key {
                let held = jobs::table
                    .filter(jobs::unique_key.eq(&key))
                    .filter(jobs::state.eq_any(UNFINISHED))
                    .count()
                    .get_result::<i64>(self.conn)
                    .map_err(storage_error)?;
                if held > 0 {
                    continue;
                }
            }
            diesel::update(jobs::table.find(id))
                .set((
                    jobs::state.eq(QUEUED),
                    jobs::run_at.eq(now.as_micros()),
                    jobs::attempts.eq(0),
                    jobs::locked_by.eq(None::<String>),
                    jobs::locked_until.eq(None::<i64>),
                    jobs::updated_at.eq(now.as_micros()),
                ))
                .execute(self.conn)
                .map_err(storage_error)?;
            requeued.push(JobId(id));
        }
        Ok(requeued)
    }

    fn cancel_jobs(&mut self, ids: &[JobId], now: Timestamp) -> StoreResult<Vec<JobId>> {
        let ids: Vec<i64> = ids.iter().map(|id| id.0).collect();
        let cancellable = jobs::table
            .filter(jobs::id.eq_any(&ids))
            .filter(jobs::state.eq_any([QUEUED, RUNNING, FAILED]));
        let found: Vec<i64> = cancellable
            .select(jobs::id)
            .order(jobs::id.asc())
            .load(self.conn)
            .map_err(storage_error)?;
        diesel::update(jobs::table.filter(jobs::id.eq_any(&found)))
            .set((
                jobs::state.eq(CANCELLED),
                jobs::locked_by.eq(None::<String>),
                jobs::locked_until.eq(None::<i64>),
                jobs::again_at.eq(None::<i64>),
                jobs::updated_at.eq(now.as_micros()),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(found.into_iter().map(JobId).collect())
    }
}
