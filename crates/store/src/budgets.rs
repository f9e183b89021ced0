//! Request budgets' buckets shared by the processes on one PostgreSQL database
//! (`mercer_domain::access::budgets::SharedBudgets`): a row per budget in `request_budgets`.
//!
//! A lease is one statement, atomic by itself (no BEGIN and COMMIT): an upsert that refills the
//! row's tokens for the time since it was last counted, on the database's clock (so processes
//! on several hosts agree), takes up to the whole tokens asked for, and returns how many it
//! took (`last_granted`) and how many are left. A new row starts full (the burst, `2 × per_s`).
//! The arithmetic is `TokenBucket::take_up_to`'s; a test holds the two to the same answers.
//! SQLite serves one process, whose buckets stay in its memory: leases are refused there.

use diesel::prelude::*;
use std::time::Duration;

use diesel::sql_types::{BigInt, Double, Text};
use mercer_domain::StorageError;
use mercer_domain::access::budgets::{Lease, SharedBudgets, burst_of};

use crate::connection::DbConnection;
use crate::store::{Store, storage_error};

/// The tokens there now, from the row's, up to the burst (`$3`) at `$2` per second; "now" is
/// the inserted row's `refilled_at`, the database's clock.
const AVAILABLE: &str =
    "LEAST($3, b.tokens + $2 * GREATEST(0, EXCLUDED.refilled_at - b.refilled_at) / 1e6)";

fn lease_statement() -> String {
    format!(
        "INSERT INTO request_budgets AS b (budget_key, tokens, refilled_at, last_granted) \
         VALUES ($1, $3 - LEAST($4, $3), (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, \
                 LEAST($4, $3)) \
         ON CONFLICT (budget_key) DO UPDATE SET \
           last_granted = LEAST($4, floor({AVAILABLE})), \
           tokens = {AVAILABLE} - LEAST($4, floor({AVAILABLE})), \
           refilled_at = GREATEST(b.refilled_at, EXCLUDED.refilled_at) \
         RETURNING last_granted, tokens"
    )
}

#[derive(QueryableByName)]
struct LeaseRow {
    #[diesel(sql_type = Double)]
    last_granted: f64,
    #[diesel(sql_type = Double)]
    tokens: f64,
}

impl SharedBudgets for Store {
    fn lease(&self, key: &str, per_s: u32, wanted: u32) -> Result<Lease, StorageError> {
        let mut conn = self.connection()?;
        let DbConnection::Pg(conn) = &mut *conn else {
            return Err(shared_on_postgres_only());
        };
        let per_s = per_s.max(1);
        let row: LeaseRow = diesel::sql_query(lease_statement())
            .bind::<Text, _>(key)
            .bind::<Double, _>(f64::from(per_s))
            .bind::<Double, _>(f64::from(burst_of(per_s)))
            .bind::<Double, _>(f64::from(wanted))
            .get_result(conn)
            .map_err(storage_error)?;
        Ok(Lease {
            granted: row.last_granted.max(0.0) as u32,
            left: row.tokens,
        })
    }

    fn forget_idle(&self, idle: Duration) -> Result<usize, StorageError> {
        let mut conn = self.connection()?;
        let DbConnection::Pg(conn) = &mut *conn else {
            return Err(shared_on_postgres_only());
        };
        let idle_us = i64::try_from(idle.as_micros()).unwrap_or(i64::MAX);
        diesel::sql_query(
            "DELETE FROM request_budgets \
             WHERE refilled_at < (extract(epoch FROM clock_timestamp()) * 1000000)::bigint - $1",
        )
        .bind::<BigInt, _>(idle_us)
        .execute(conn)
        .map_err(storage_error)
    }
}

fn shared_on_postgres_only() -> StorageError {
    StorageError::other("request budgets are shared on PostgreSQL only")
}
