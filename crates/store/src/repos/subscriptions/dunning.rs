//! Shops' dunning policies (migration 51): a row for each shop that set one, its waits as a JSON
//! array of seconds.

use diesel::prelude::*;
use diesel::upsert::excluded;
use mercer_domain::Timestamp;
use mercer_domain::kernel::error::StoreResult;
use mercer_domain::kernel::ids::ShopId;
use mercer_domain::subscriptions::dunning::{AtMaxRetries, DunningPolicy, DunningPolicyRepository};

use super::corrupt;
use crate::connection::on_backend;
use crate::repos::StoreTx;
use crate::schema::subscription_dunning_policies as t;
use crate::store::storage_error;

impl DunningPolicyRepository for StoreTx<'_> {
    fn dunning_policy(&mut self, shop_id: ShopId) -> StoreResult<Option<DunningPolicy>> {
        let row = t::table
            .filter(t::shop_id.eq(shop_id.0))
            .select((t::retry_intervals_s, t::at_max_retries))
            .first::<(String, String)>(self.conn)
            .optional()
            .map_err(storage_error)?;
        let Some((intervals, outcome)) = row else {
            return Ok(None);
        };
        let what = "dunning policy of shop";
        let retry_intervals_s: Vec<i64> =
            serde_json::from_str(&intervals).map_err(|error| corrupt(what, shop_id.0, error))?;
        let at_max_retries = AtMaxRetries::parse(&outcome)
            .ok_or_else(|| corrupt(what, shop_id.0, format!("at_max_retries {outcome:?}")))?;
        Ok(Some(DunningPolicy {
            retry_intervals_s,
            at_max_retries,
        }))
    }

    fn save_dunning_policy(
        &mut self,
        shop_id: ShopId,
        policy: &DunningPolicy,
        now: Timestamp,
    ) -> StoreResult<()> {
        let intervals = serde_json::to_string(&policy.retry_intervals_s)
            .map_err(|error| corrupt("dunning policy of shop", shop_id.0, error))?;
        let values = (
            t::shop_id.eq(shop_id.0),
            t::retry_intervals_s.eq(intervals),
            t::at_max_retries.eq(policy.at_max_retries.as_str()),
            t::created_at.eq(now.as_micros()),
            t::updated_at.eq(now.as_micros()),
        );
        on_backend!(&mut *self.conn, |c| {
            diesel::insert_into(t::table)
                .values(values)
                .on_conflict(t::shop_id)
                .do_update()
                .set((
                    t::retry_intervals_s.eq(excluded(t::retry_intervals_s)),
                    t::at_max_retries.eq(excluded(t::at_max_retries)),
                    t::updated_at.eq(excluded(t::updated_at)),
                ))
                .execute(c)
        })
        .map(|_| ())
        .map_err(storage_error)
    }
}
