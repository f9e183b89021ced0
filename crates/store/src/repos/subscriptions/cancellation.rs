//! Shops' cancellation reasons (migration 40): a row each, in the shop's order.

use diesel::prelude::*;
use mercer_domain::Timestamp;
use mercer_domain::kernel::error::StoreResult;
use mercer_domain::kernel::ids::ShopId;
use mercer_domain::subscriptions::cancellation::{
    CancellationReason, CancellationReasonRepository,
};

use crate::repos::StoreTx;
use crate::schema::subscription_cancellation_reasons as t;
use crate::store::storage_error;

impl CancellationReasonRepository for StoreTx<'_> {
    fn cancellation_reasons(&mut self, shop_id: ShopId) -> StoreResult<Vec<CancellationReason>> {
        t::table
            .filter(t::shop_id.eq(shop_id.0))
            .order(t::position.asc())
            .select((t::code, t::label))
            .load::<(String, String)>(self.conn)
            .map(|rows| {
                rows.into_iter()
                    .map(|(code, label)| CancellationReason { code, label })
                    .collect()
            })
            .map_err(storage_error)
    }

    fn replace_cancellation_reasons(
        &mut self,
        shop_id: ShopId,
        reasons: &[CancellationReason],
        now: Timestamp,
    ) -> StoreResult<()> {
        diesel::delete(t::table.filter(t::shop_id.eq(shop_id.0)))
            .execute(self.conn)
            .map_err(storage_error)?;
        for (position, reason) in reasons.iter().enumerate() {
            diesel::insert_into(t::table)
                .values((
                    t::shop_id.eq(shop_id.0),
                    t::position.eq(i32::try_from(position).unwrap_or(i32::MAX)),
                    t::code.eq(reason.code.as_str()),
                    t::label.eq(reason.label.as_str()),
                    t::created_at.eq(now.as_micros()),
                ))
                .execute(self.conn)
                .map_err(storage_error)?;
        }
        Ok(())
    }
}
