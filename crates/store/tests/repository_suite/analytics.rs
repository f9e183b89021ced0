//! The subscription analytics counters (subscriptions::analytics): additions merge into their
//! day's row, a period reads its own days, the running figures' rows before a day are read
//! apart, and every shop has its own rows.

use mercer_domain::kernel::ids::{ShopId, SubscriptionId};
use mercer_domain::ports::Database;
use mercer_domain::subscriptions::analytics::{DayCount, Metric, Tally};
use mercer_domain::subscriptions::resources::SubscriptionStatus;

use crate::shop;
use crate::subscriptions::{insert_subscription, plain_state, subscriber};

fn count(shop_id: ShopId, day: i64, metric: Metric, value: i64) -> DayCount {
    DayCount {
        shop_id,
        day,
        metric,
        value,
    }
}

fn sorted(mut rows: Vec<DayCount>) -> Vec<(i64, String, i64)> {
    let mut out: Vec<_> = rows
        .drain(..)
        .map(|row| (row.day, row.metric.name(), row.value))
        .collect();
    out.sort();
    out
}

fn counters_add_up_per_day_and_metric_and_read_by_period(db: &impl Database) {
    let (a, b) = (shop(db, "a.test").id, shop(db, "b.test").id);
    let reason = || Metric::Reason(Some("moved".into()));
    db.write(|tx| {
        let mut tally = Tally::default();
        tally.add(a, 10, Metric::Active, 3);
        tally.add(a, 10, Metric::Mrr, 4_500);
        tally.add(a, 12, Metric::New, 2);
        tally.add(a, 12, reason(), 1);
        tally.add(a, 12, Metric::Reason(None), 1);
        tally.add(b, 12, Metric::New, 7);
        Ok(tally.record(tx)?)
    })
    .unwrap();
    // A second unit of work adds to the same rows.
    db.write(|tx| {
        tx.add_analytics(&[
            count(a, 10, Metric::Active, -1),
            count(a, 12, Metric::New, 1),
            count(a, 14, Metric::Mrr, -500),
        ])?;
        Ok(())
    })
    .unwrap();
    db.read(|tx| {
        assert_eq!(
            sorted(tx.analytics_between(a, 11, 14)?),
            [
                (12, "new".to_string(), 3),
                (12, "reason:".to_string(), 1),
                (12, "reason:moved".to_string(), 1),
                (14, "mrr".to_string(), -500),
            ]
        );
        assert_eq!(
            sorted(tx.analytics_before(a, 12, &Metric::running())?),
            [
                (10, "active".to_string(), 2),
                (10, "mrr".to_string(), 4_500)
            ]
        );
        assert_eq!(
            sorted(tx.analytics_before(a, 10, &Metric::running())?),
            [],
            "a day's own rows are not before it"
        );
        assert_eq!(
            sorted(tx.analytics_between(b, 0, 100)?),
            [(12, "new".to_string(), 7)]
        );
        Ok(())
    })
    .unwrap();
}
every_database!(counters_add_up_per_day_and_metric_and_read_by_period);

fn the_backfill_is_done_once_migrated_and_pages_every_shops_subscriptions(db: &impl Database) {
    let (a, b) = (shop(db, "a.test").id, shop(db, "b.test").id);
    let mut ids = Vec::new();
    for (shop_id, seconds) in [(a, 1), (b, 2), (a, 3)] {
        let (customer, address) = subscriber(db, shop_id, &Default::default());
        let state = plain_state(customer, address, SubscriptionStatus::Active);
        ids.push((shop_id, insert_subscription(db, shop_id, &state, seconds)));
    }
    db.write(|tx| {
        assert!(!tx.analytics_backfill_pending()?, "nothing waits");
        assert_eq!(tx.subscription_ids_after(SubscriptionId(0), 10)?, ids);
        assert_eq!(tx.subscription_ids_after(ids[0].1, 1)?, ids[1..2]);
        assert_eq!(tx.subscription_ids_after(ids[2].1, 10)?, []);
        tx.finish_analytics_backfill()?;
        assert!(!tx.analytics_backfill_pending()?);
        Ok(())
    })
    .unwrap();
}
every_database!(the_backfill_is_done_once_migrated_and_pages_every_shops_subscriptions);
