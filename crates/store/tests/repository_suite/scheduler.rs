//! The subscription scheduler: due subscriptions, order attempts, expiring payment methods.

use mercer_domain::kernel::ids::ShopId;
use mercer_domain::kernel::ids::{AddressId, CustomerId, SubscriptionId};
use mercer_domain::ports::Database;
use mercer_domain::subscriptions::pausing::AutoResume;
use mercer_domain::subscriptions::repository::{
    NewSubscriptionOrder, OrderAttemptEnd, OrderAttemptStatus,
};
use mercer_domain::subscriptions::resources::{PaymentExpiry, SubscriptionStatus};
use mercer_domain::{DomainError, Timestamp};

use crate::subscriptions::{
    fields, insert_subscription, plain_state, read_subscription, subscriber,
};
use crate::{at, shop};

/// An active subscription of `customer` whose next order is at `next` seconds.
fn due_at(
    db: &impl Database,
    shop_id: ShopId,
    customer: (CustomerId, AddressId),
    status: SubscriptionStatus,
    next: i64,
    retry: Option<i64>,
) -> SubscriptionId {
    let mut state = plain_state(customer.0, customer.1, status);
    state.next_order_datetime = Some(at(next));
    state.next_processing_datetime = retry.map(at);
    insert_subscription(db, shop_id, &state, 1)
}

fn due_subscriptions_are_found_by_status_date_and_retry_wait(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let other = self::shop(db, "b.shop.test");
    let ours = subscriber(db, shop.id, &fields(Some("a@example.test"), None, None));
    let theirs = subscriber(db, other.id, &fields(Some("b@example.test"), None, None));
    use SubscriptionStatus::{Active, Paused, Processing, Scheduled};
    let later = due_at(db, shop.id, ours, Active, 300, None);
    let earliest = due_at(db, other.id, theirs, Active, 100, None);
    let middle = due_at(db, shop.id, ours, Active, 200, Some(150));
    let waiting = due_at(db, shop.id, ours, Active, 100, Some(1_000));
    let future = due_at(db, shop.id, ours, Active, 10_000, None);
    let paused = due_at(db, shop.id, ours, Paused, 100, None);
    let processing = due_at(db, shop.id, ours, Processing, 100, None);
    let scheduled = due_at(db, shop.id, ours, Scheduled, 100, None);
    let mut undated = plain_state(ours.0, ours.1, Active);
    undated.next_order_datetime = None;
    insert_subscription(db, shop.id, &undated, 1);

    let due = |status, now, limit| {
        db.write(|tx| Ok(tx.lock_due_subscriptions(status, at(now), limit)?))
            .unwrap()
    };
    assert_eq!(
        due(Active, 500, 10),
        [(other.id, earliest), (shop.id, middle), (shop.id, later)],
        "every shop's, by order date; not before the retry wait ends"
    );
    assert_eq!(
        due(Active, 500, 2),
        [(other.id, earliest), (shop.id, middle)]
    );
    assert!(due(Active, 99, 10).is_empty());
    assert_eq!(
        due(Active, 1_000, 10).len(),
        4,
        "the wait is over at its time"
    );
    assert!(due(Active, 1_000, 10).contains(&(shop.id, waiting)));
    assert!(!due(Active, 1_000, 10).contains(&(shop.id, future)));
    assert_eq!(due(Scheduled, 500, 10), [(shop.id, scheduled)]);
    assert_eq!(due(Paused, 500, 10), [(shop.id, paused)]);
    assert_eq!(due(Processing, 500, 10), [(shop.id, processing)]);

    let backlog = db.read(|tx| Ok(tx.scheduler_backlog(at(500))?)).unwrap();
    assert_eq!(
        (backlog.due, backlog.processing, backlog.waiting_retry),
        (3, 1, 1)
    );
    let upcoming = db
        .read(|tx| Ok(tx.upcoming_subscription_ids(shop.id, at(300), 10)?))
        .unwrap();
    assert_eq!(
        upcoming,
        [waiting, processing, scheduled, middle, later],
        "active, scheduled and processing of the shop, by order date then id"
    );
    let whole = db
        .read(|tx| Ok(tx.subscriptions_by_ids(shop.id, &[later, middle, earliest])?))
        .unwrap();
    assert_eq!(
        whole.iter().map(|s| s.id).collect::<Vec<_>>(),
        [later, middle],
        "in the order asked, of the shop only"
    );
}
every_database!(due_subscriptions_are_found_by_status_date_and_retry_wait);

fn new_attempt(
    subscription_id: SubscriptionId,
    shop_id: ShopId,
    scheduled: i64,
    attempt: i64,
) -> NewSubscriptionOrder {
    NewSubscriptionOrder {
        shop_id,
        subscription_id,
        scheduled_at: at(scheduled),
        attempt,
        idempotency_key: format!("{subscription_id}:{scheduled}"),
        due_at: at(scheduled + attempt),
        created_at: at(scheduled + 10 * attempt),
    }
}

fn order_attempts_are_kept_and_end_once(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let customer = subscriber(db, shop.id, &fields(None, None, None));
    let one = due_at(db, shop.id, customer, SubscriptionStatus::Active, 100, None);
    let two = due_at(db, shop.id, customer, SubscriptionStatus::Active, 100, None);
    let insert = |order: NewSubscriptionOrder| {
        db.write(|tx| Ok(tx.insert_subscription_order(&order)?))
            .unwrap()
    };
    let first = insert(new_attempt(one, shop.id, 100, 1));
    let again =
        db.write(|tx| Ok(tx.insert_subscription_order(&new_attempt(one, shop.id, 100, 1))?));
    assert!(
        matches!(again, Err(DomainError::Storage(ref e)) if e.is_unique_violation()),
        "one row per attempt of a date: {again:?}"
    );
    let stored = db
        .read(|tx| Ok(tx.subscription_order(first)?))
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            stored.subscription_id,
            stored.scheduled_at,
            stored.attempt,
            stored.status,
            stored.due_at,
            stored.created_at
        ),
        (
            one,
            at(100),
            1,
            OrderAttemptStatus::Placing,
            at(101),
            at(110)
        )
    );
    assert_eq!(stored.idempotency_key, format!("{one}:100"));
    assert_eq!(stored.platform_order_id, None);

    db.write(|tx| Ok(tx.set_order_platform_id(first, "ord-1", at(111))?))
        .unwrap();
    let of_date = |id, scheduled| {
        db.read(|tx| Ok(tx.attempts_of_date(id, at(scheduled))?))
            .unwrap()
            .into_iter()
            .map(|attempt| (attempt.id, attempt.attempt, attempt.platform_order_id))
            .collect::<Vec<_>>()
    };
    assert_eq!(of_date(one, 100), [(first, 1, Some("ord-1".to_string()))]);
    assert_eq!(of_date(one, 200), []);
    assert_eq!(of_date(two, 100), []);

    let failed = OrderAttemptEnd::Failed {
        code: "payment_declined".into(),
        reason: "the payment was declined".into(),
    };
    let answered = db
        .write(|tx| Ok(tx.finish_subscription_order(first, &failed, at(120))?))
        .unwrap()
        .expect("a placing attempt ends");
    let placed = OrderAttemptEnd::Placed {
        platform_order_id: "ord-1".into(),
        platform_payment_id: Some("pay-1".into()),
    };
    assert_eq!(
        db.write(|tx| Ok(tx.finish_subscription_order(first, &placed, at(121))?))
            .unwrap(),
        None,
        "an attempt ends once"
    );
    let ended = db
        .read(|tx| Ok(tx.subscription_order(first)?))
        .unwrap()
        .unwrap();
    assert_eq!(answered, ended, "the attempt is answered as it was stored");
    assert_eq!(ended.status, OrderAttemptStatus::Failed);
    assert_eq!(ended.failure_code.as_deref(), Some("payment_declined"));
    assert_eq!(
        ended.failure_reason.as_deref(),
        Some("the payment was declined")
    );
    assert_eq!(ended.finished_at, Some(at(120)));
    db.write(|tx| Ok(tx.set_order_platform_id(first, "ord-9", at(122))?))
        .unwrap();
    assert_eq!(
        db.read(|tx| Ok(tx.subscription_order(first)?))
            .unwrap()
            .unwrap()
            .platform_order_id
            .as_deref(),
        Some("ord-1"),
        "an ended attempt keeps its platform order"
    );

    let retry = insert(new_attempt(one, shop.id, 100, 2));
    assert_eq!(
        of_date(one, 100),
        [(first, 1, Some("ord-1".to_string())), (retry, 2, None)],
        "the date's attempts, first first, with the platform order"
    );
    assert!(
        db.write(|tx| Ok(tx.finish_subscription_order(retry, &placed, at(130))?))
            .unwrap()
            .is_some()
    );
    let done = db
        .read(|tx| Ok(tx.subscription_order(retry)?))
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            done.status,
            done.platform_order_id.as_deref(),
            done.platform_payment_id.as_deref()
        ),
        (OrderAttemptStatus::Placed, Some("ord-1"), Some("pay-1"))
    );

    let placing = || db.read(|tx| Ok(tx.count_placing_orders()?)).unwrap();
    assert_eq!(placing(), 0, "both ended");
    let other = insert(new_attempt(two, shop.id, 100, 1));
    assert_eq!(placing(), 1);
    let stalled = |before| {
        db.read(|tx| Ok(tx.stalled_subscription_orders(at(before), 10)?))
            .unwrap()
            .iter()
            .map(|o| o.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(stalled(111), [other], "placing ones begun before the time");
    assert!(stalled(110).is_empty());
    let recent = db
        .read(|tx| Ok(tx.orders_of_subscriptions(&[one, two], 1)?))
        .unwrap()
        .iter()
        .map(|o| o.id)
        .collect::<Vec<_>>();
    assert_eq!(recent, [retry, other], "the latest of each");
    let all = db
        .read(|tx| Ok(tx.orders_of_subscriptions(&[one], 5)?))
        .unwrap()
        .iter()
        .map(|o| o.id)
        .collect::<Vec<_>>();
    assert_eq!(all, [retry, first], "newest first");
}
every_database!(order_attempts_are_kept_and_end_once);

fn attempts_inserted_together_get_their_own_ids(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let customer = subscriber(db, shop.id, &fields(None, None, None));
    let subscriptions: Vec<SubscriptionId> = (0..3)
        .map(|_| due_at(db, shop.id, customer, SubscriptionStatus::Active, 100, None))
        .collect();
    // Given in an order of their own: the ids must follow the attempts, not the insert.
    let attempts = vec![
        new_attempt(subscriptions[2], shop.id, 300, 2),
        new_attempt(subscriptions[0], shop.id, 100, 1),
        new_attempt(subscriptions[1], shop.id, 200, 1),
    ];
    let ids = db
        .write(|tx| Ok(tx.insert_subscription_orders(&attempts)?))
        .unwrap();
    assert_eq!(ids.len(), 3);
    for (id, attempt) in ids.iter().zip(&attempts) {
        let stored = db
            .read(|tx| Ok(tx.subscription_order(*id)?))
            .unwrap()
            .unwrap();
        assert_eq!(
            (stored.subscription_id, stored.scheduled_at, stored.attempt),
            (
                attempt.subscription_id,
                attempt.scheduled_at,
                attempt.attempt
            )
        );
        assert_eq!(stored.status, OrderAttemptStatus::Placing);
    }
    assert_eq!(
        db.write(|tx| Ok(tx.insert_subscription_orders(&[])?))
            .unwrap(),
        Vec::new()
    );
}

every_database!(attempts_inserted_together_get_their_own_ids);

fn payment_methods_expiring_are_announced_once(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let other = self::shop(db, "b.shop.test");
    let customer = subscriber(db, shop.id, &fields(None, None, None));
    let theirs = subscriber(db, other.id, &fields(None, None, None));
    let with_expiry = |shop_id: ShopId, customer: (CustomerId, AddressId), status, expiry: &str| {
        let mut state = plain_state(customer.0, customer.1, status);
        state.payment_method_expires_at = PaymentExpiry::parse(expiry);
        insert_subscription(db, shop_id, &state, 1)
    };
    use SubscriptionStatus::{Active, Inactive, Paused, Scheduled};
    let march = with_expiry(shop.id, customer, Active, "2027-03");
    let february = with_expiry(shop.id, customer, Paused, "2027-02");
    let scheduled = with_expiry(shop.id, customer, Scheduled, "2027-02");
    with_expiry(shop.id, customer, Inactive, "2027-01");
    with_expiry(shop.id, customer, Active, "2027-06");
    with_expiry(other.id, theirs, Active, "2027-01");
    assert_eq!(
        read_subscription(db, shop.id, march)
            .state
            .payment_method_expires_at,
        PaymentExpiry::parse("2027-03"),
        "the month reads back"
    );
    let expiring = |by: &str| {
        db.read(|tx| {
            Ok(tx.expiring_payment_subscriptions(
                shop.id,
                Timestamp::parse_rfc3339(by).unwrap(),
                10,
            )?)
        })
        .unwrap()
    };
    // March 2027 expires at 2027-04-01T00:00Z.
    assert_eq!(
        expiring("2027-04-01T00:00:00Z"),
        [february, scheduled, march],
        "not inactive, this shop's, soonest first"
    );
    assert_eq!(expiring("2027-03-31T23:59:59Z"), [february, scheduled]);
    db.write(|tx| Ok(tx.set_expiring_payment_notified(shop.id, february, Some(at(5)))?))
        .unwrap();
    db.write(|tx| Ok(tx.set_expiring_payment_notified(other.id, march, Some(at(5)))?))
        .unwrap();
    assert_eq!(
        expiring("2027-04-01T00:00:00Z"),
        [scheduled, march],
        "announced once; another shop's call changes nothing"
    );
    db.write(|tx| Ok(tx.set_expiring_payment_notified(shop.id, february, None)?))
        .unwrap();
    assert_eq!(expiring("2027-03-01T00:00:00Z"), [february, scheduled]);
}
every_database!(payment_methods_expiring_are_announced_once);

fn paused_subscriptions_are_due_to_resume_once_their_day_has_begun(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let other = self::shop(db, "b.shop.test");
    let ours = subscriber(db, shop.id, &fields(Some("a@example.test"), None, None));
    let theirs = subscriber(db, other.id, &fields(Some("b@example.test"), None, None));
    let paused_until = |shop_id, customer: (CustomerId, AddressId), status, day: &str, start| {
        let mut state = plain_state(customer.0, customer.1, status);
        state.resume_on = AutoResume::read(day, at(start));
        insert_subscription(db, shop_id, &state, 1)
    };
    use SubscriptionStatus::{Active, Paused};
    let later = paused_until(shop.id, ours, Paused, "2031-01-03", 300);
    let earliest = paused_until(other.id, theirs, Paused, "2031-01-01", 100);
    let future = paused_until(shop.id, ours, Paused, "2031-01-09", 10_000);
    // Only a paused subscription comes back.
    paused_until(shop.id, ours, Active, "2031-01-01", 100);
    insert_subscription(db, shop.id, &plain_state(ours.0, ours.1, Paused), 1);
    assert_eq!(
        read_subscription(db, shop.id, later).state.resume_on,
        AutoResume::read("2031-01-03", at(300)),
        "read back as written"
    );

    let due = |shop_id, now, limit| {
        db.read(|tx| Ok(tx.due_resumptions(shop_id, at(now), limit)?))
            .unwrap()
    };
    assert_eq!(
        due(None, 300, 10),
        [(other.id, earliest), (shop.id, later)],
        "every shop's, earliest first, from the start of the day on"
    );
    assert_eq!(due(None, 300, 1), [(other.id, earliest)]);
    assert_eq!(due(Some(shop.id), 300, 10), [(shop.id, later)]);
    assert_eq!(due(None, 99, 10), []);
    let lock = |shop_id, id, now| {
        db.write(|tx| Ok(tx.lock_due_resumption(shop_id, id, at(now))?))
            .unwrap()
    };
    assert!(lock(shop.id, later, 300));
    assert!(!lock(shop.id, later, 299), "not yet");
    assert!(!lock(shop.id, future, 300));
    assert!(!lock(shop.id, earliest, 300), "another shop's");
    // Resumed (its date dropped): no longer due.
    let mut state = read_subscription(db, shop.id, later).state;
    state.subscription_status = Active;
    state.resume_on = None;
    db.write(|tx| Ok(tx.save_subscription(shop.id, later, &state)?))
        .unwrap();
    assert!(!lock(shop.id, later, 300));
    assert_eq!(
        due(None, 100_000, 10),
        [(other.id, earliest), (shop.id, future)]
    );
}
every_database!(paused_subscriptions_are_due_to_resume_once_their_day_has_begun);

fn a_shops_order_attempts_are_listed_by_order_date_status_and_cursor(db: &impl Database) {
    use mercer_domain::subscriptions::repository::OrderFilter;
    let shop = shop(db, "a.shop.test");
    let other = self::shop(db, "b.shop.test");
    let ours = subscriber(db, shop.id, &fields(Some("a@example.test"), None, None));
    let theirs = subscriber(db, other.id, &fields(Some("b@example.test"), None, None));
    let one = due_at(db, shop.id, ours, SubscriptionStatus::Active, 100, None);
    let foreign = due_at(db, other.id, theirs, SubscriptionStatus::Active, 100, None);
    let insert = |order: NewSubscriptionOrder| {
        db.write(|tx| Ok(tx.insert_subscription_order(&order)?))
            .unwrap()
    };
    let failed = insert(new_attempt(one, shop.id, 100, 1));
    let retried = insert(new_attempt(one, shop.id, 100, 2));
    let later = insert(new_attempt(one, shop.id, 300, 1));
    insert(new_attempt(foreign, other.id, 200, 1));
    db.write(|tx| {
        let failure = OrderAttemptEnd::Failed {
            code: "payment_declined".to_string(),
            reason: "declined".to_string(),
        };
        tx.finish_subscription_order(failed, &failure, at(101))?;
        let placed = OrderAttemptEnd::Placed {
            platform_order_id: "o-1".to_string(),
            platform_payment_id: None,
        };
        tx.finish_subscription_order(retried, &placed, at(120))?;
        Ok(())
    })
    .unwrap();
    let list = |filter: OrderFilter, limit| {
        db.read(|tx| Ok(tx.shop_subscription_orders(shop.id, &filter, limit)?))
            .unwrap()
            .iter()
            .map(|order| order.id)
            .collect::<Vec<_>>()
    };
    let all = OrderFilter::default();
    assert_eq!(
        list(all, 10),
        [later, retried, failed],
        "the shop's only, newest order date first, then newest attempt"
    );
    assert_eq!(list(all, 2), [later, retried]);
    let next = OrderFilter {
        before: Some((at(100), retried)),
        ..all
    };
    assert_eq!(list(next, 10), [failed], "after the cursor");
    let status = |status| OrderFilter {
        status: Some(status),
        ..all
    };
    assert_eq!(list(status(OrderAttemptStatus::Failed), 10), [failed]);
    assert_eq!(list(status(OrderAttemptStatus::Placed), 10), [retried]);
    assert_eq!(list(status(OrderAttemptStatus::Placing), 10), [later]);
    let dates = OrderFilter {
        from: Some(at(100)),
        until: Some(at(300)),
        ..all
    };
    assert_eq!(
        list(dates, 10),
        [retried, failed],
        "from is inclusive, until is not"
    );
}
every_database!(a_shops_order_attempts_are_listed_by_order_date_status_and_cursor);
