//! The subscription analytics counters in memory.

use super::MemoryState;
use crate::kernel::error::StoreResult;
use crate::kernel::ids::{ShopId, SubscriptionId};
use crate::subscriptions::analytics::{AnalyticsRepository, DayCount, Metric};

impl AnalyticsRepository for MemoryState {
    fn add_analytics(&mut self, counts: &[DayCount]) -> StoreResult<()> {
        for count in counts {
            *self
                .analytics
                .entry((count.shop_id, count.day, count.metric.clone()))
                .or_default() += count.value;
        }
        Ok(())
    }

    fn analytics_before(
        &mut self,
        shop_id: ShopId,
        day: i64,
        metrics: &[Metric],
    ) -> StoreResult<Vec<DayCount>> {
        Ok(self.rows(shop_id, |d, metric| d < day && metrics.contains(metric)))
    }

    fn analytics_between(
        &mut self,
        shop_id: ShopId,
        from: i64,
        to: i64,
    ) -> StoreResult<Vec<DayCount>> {
        Ok(self.rows(shop_id, |d, _| (from..=to).contains(&d)))
    }

    fn analytics_backfill_pending(&mut self) -> StoreResult<bool> {
        Ok(self.analytics_backfill_pending)
    }

    fn finish_analytics_backfill(&mut self) -> StoreResult<()> {
        self.analytics_backfill_pending = false;
        Ok(())
    }

    fn subscription_ids_after(
        &mut self,
        after: SubscriptionId,
        limit: usize,
    ) -> StoreResult<Vec<(ShopId, SubscriptionId)>> {
        let mut ids: Vec<(ShopId, SubscriptionId)> = self
            .subscriptions
            .iter()
            .filter(|s| s.id > after)
            .map(|s| (s.shop_id, s.id))
            .collect();
        ids.sort_by_key(|(_, id)| *id);
        ids.truncate(limit);
        Ok(ids)
    }
}

impl MemoryState {
    fn rows(&self, shop_id: ShopId, keep: impl Fn(i64, &Metric) -> bool) -> Vec<DayCount> {
        self.analytics
            .iter()
            .filter(|((shop, day, metric), _)| *shop == shop_id && keep(*day, metric))
            .map(|((shop_id, day, metric), value)| DayCount {
                shop_id: *shop_id,
                day: *day,
                metric: metric.clone(),
                value: *value,
            })
            .collect()
    }
}
