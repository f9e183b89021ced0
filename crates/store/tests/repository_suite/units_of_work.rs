//! Units of work: a failed one leaves nothing behind; the jobs queue.

use mercer_domain::kernel::ids::JobId;
use mercer_domain::kernel::jobs::{Enqueued, JobState, NewJob};
use mercer_domain::platform::destinations::Topic;
use mercer_domain::ports::Database;
use mercer_domain::{DomainError, Timestamp};

use crate::platform::settings;
use crate::{at, shop};

fn a_failed_unit_of_work_leaves_nothing_behind(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let result: Result<(), DomainError> = db.write(|tx| {
        tx.insert_destination(shop.id, &settings(Topic::Customers), at(1))?;
        Err(DomainError::NotFound { resource: "test" })
    });
    assert!(result.is_err());
    assert!(
        db.read(|tx| Ok(tx.live_destinations(shop.id)?))
            .unwrap()
            .is_empty()
    );
}
every_database!(a_failed_unit_of_work_leaves_nothing_behind);

fn new_job(key: Option<&str>, run_at: Timestamp) -> NewJob {
    NewJob {
        kind: "test.job",
        payload: "{}".to_string(),
        unique_key: key.map(str::to_string),
        run_at,
        max_attempts: 2,
        shop_id: None,
        request_id: None,
        trace_parent: None,
    }
}

fn the_jobs_queue_claims_coalesces_retries_and_requeues(db: &impl Database) {
    let kinds = ["test.job"];
    let enqueue = |key, run_at| {
        db.write(|tx| Ok(tx.enqueue_job(&new_job(key, run_at), at(0))?))
            .unwrap()
    };
    let claim = |worker: &str, now, lease_until| {
        db.write(|tx| Ok(tx.claim_jobs(&kinds, worker, now, lease_until, 10)?))
            .unwrap()
    };
    let job = |id| db.read(|tx| Ok(tx.job(id)?)).unwrap();
    let keyed = enqueue(Some("k"), at(20)).id();
    assert_eq!(enqueue(Some("k"), at(10)), Enqueued::Coalesced(keyed));
    let plain = enqueue(None, at(15)).id();
    assert!(!db.read(|tx| Ok(tx.has_due_jobs(&kinds, at(9))?)).unwrap());
    assert!(claim("w", at(9), at(100)).is_empty());
    let claimed = claim("w", at(15), at(100));
    assert_eq!(
        claimed
            .iter()
            .map(|job| (job.id, job.state, job.attempts))
            .collect::<Vec<_>>(),
        [(keyed, JobState::Running, 1), (plain, JobState::Running, 1)],
        "the longest due first"
    );
    assert!(claim("v", at(50), at(150)).is_empty(), "leased");
    assert_eq!(
        db.write(|tx| Ok(tx.renew_job_leases(&[keyed, plain], "w", at(120), at(50))?))
            .unwrap(),
        [keyed, plain]
    );
    // Enqueued while it runs: queued again when this run ends.
    assert_eq!(enqueue(Some("k"), at(60)), Enqueued::Coalesced(keyed));
    assert!(
        !db.write(|tx| Ok(tx.complete_job(keyed, "v", None, at(61))?))
            .unwrap(),
        "only the holder"
    );
    assert!(
        db.write(|tx| Ok(tx.complete_job(keyed, "w", None, at(61))?))
            .unwrap()
    );
    let again = job(keyed).unwrap();
    assert_eq!(
        (again.state, again.run_at, again.attempts),
        (JobState::Queued, at(60), 0)
    );
    db.write(|tx| Ok(tx.retry_job(plain, "w", at(70), "down", at(62))?))
        .unwrap();
    let retried = job(plain).unwrap();
    assert_eq!(
        (retried.state, retried.run_at, retried.last_error.as_deref()),
        (JobState::Queued, at(70), Some("down"))
    );
    assert_eq!(claim("w", at(70), at(200)).len(), 2);
    db.write(|tx| Ok(tx.release_job(keyed, "w", at(71))?))
        .unwrap();
    assert_eq!(
        job(keyed).unwrap().attempts,
        0,
        "a released run does not count"
    );
    db.write(|tx| Ok(tx.fail_job(plain, "w", "gave up", at(72))?))
        .unwrap();
    // The keyed job's lease runs out during its last attempt: failed when next claimed.
    assert_eq!(claim("w", at(73), at(80))[0].id, keyed);
    assert_eq!(claim("w", at(80), at(90))[0].attempts, 2);
    assert!(claim("w", at(90), at(100)).is_empty());
    assert_eq!(
        db.read(|tx| Ok(tx.list_jobs(Some(JobState::Failed), 10)?))
            .unwrap()
            .iter()
            .map(|job| job.id)
            .collect::<Vec<_>>(),
        [keyed, plain]
    );
    let counts = db.read(|tx| Ok(tx.count_jobs()?)).unwrap();
    assert_eq!(
        counts
            .iter()
            .map(|count| (count.kind.as_str(), count.state, count.count))
            .collect::<Vec<_>>(),
        [("test.job", JobState::Failed, 2)]
    );
    let newer = enqueue(Some("k"), at(0)).id();
    assert_eq!(
        db.write(|tx| Ok(tx.requeue_jobs(None, at(91))?)).unwrap(),
        [plain],
        "not the one whose key a newer job holds"
    );
    assert_eq!(
        db.write(|tx| Ok(tx.cancel_jobs(&[newer, plain, JobId(999)], at(92))?))
            .unwrap(),
        [plain, newer]
    );
    assert!(claim("w", at(1000), at(2000)).is_empty());
    db.write(|tx| Ok(tx.complete_job(newer, "w", None, at(93))?))
        .unwrap();
    assert_eq!(job(newer).unwrap().state, JobState::Cancelled);
}
every_database!(the_jobs_queue_claims_coalesces_retries_and_requeues);

fn a_shops_jobs_are_listed_newest_first_by_state(db: &impl Database) {
    use mercer_domain::kernel::jobs::JobState;
    let shop = crate::shop(db, "jobs.shop.test");
    let other = crate::shop(db, "other-jobs.shop.test");
    let ids: Vec<JobId> = db
        .write(|tx| {
            let mut ids = Vec::new();
            for (n, shop_id) in [
                Some(shop.id),
                Some(other.id),
                None,
                Some(shop.id),
                Some(shop.id),
            ]
            .into_iter()
            .enumerate()
            {
                let mut job = new_job(None, at(n as i64));
                job.shop_id = shop_id;
                ids.push(tx.enqueue_job(&job, at(0))?.id());
            }
            tx.cancel_jobs(&[ids[3]], at(1))?;
            Ok(ids)
        })
        .unwrap();
    let list = |state, before, limit| {
        let filter = mercer_domain::kernel::jobs::JobFilter { state, kind: None };
        db.read(|tx| Ok(tx.shop_jobs(shop.id, &filter, before, limit)?))
            .unwrap()
            .into_iter()
            .map(|job| {
                assert_eq!(job.shop_id, Some(shop.id));
                job.id
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(list(None, None, 10), [ids[4], ids[3], ids[0]]);
    assert_eq!(list(None, None, 2), [ids[4], ids[3]]);
    assert_eq!(list(None, Some(ids[3]), 2), [ids[0]]);
    assert_eq!(list(Some(JobState::Cancelled), None, 10), [ids[3]]);
    assert_eq!(list(Some(JobState::Queued), None, 10), [ids[4], ids[0]]);
    let process_wide = db.read(|tx| Ok(tx.job(ids[2])?)).unwrap().unwrap();
    assert_eq!(process_wide.shop_id, None);
    // By kind too: none of this shop's jobs is of another kind.
    let of_kind = |kind: &str| {
        let filter = mercer_domain::kernel::jobs::JobFilter {
            state: None,
            kind: Some(kind.to_string()),
        };
        db.read(|tx| Ok(tx.shop_jobs(shop.id, &filter, None, 10)?))
            .unwrap()
            .len()
    };
    assert_eq!(of_kind("test.job"), 3);
    assert_eq!(of_kind("another.kind"), 0);
    // The overview's counts by kind and state, of this shop's jobs only.
    let mut counts: Vec<(String, JobState, i64)> = db
        .read(|tx| Ok(tx.count_shop_jobs(shop.id)?))
        .unwrap()
        .into_iter()
        .map(|count| (count.kind, count.state, count.count))
        .collect();
    counts.sort_by_key(|(_, state, _)| state.as_str());
    assert_eq!(
        counts,
        [
            ("test.job".to_string(), JobState::Cancelled, 1),
            ("test.job".to_string(), JobState::Queued, 2)
        ]
    );
}
every_database!(a_shops_jobs_are_listed_newest_first_by_state);

fn shop_activity_adds_up_per_bucket_and_is_pruned_by_age(db: &impl Database) {
    use mercer_domain::kernel::activity::{
        Activity, ActivityCount, Tally, bucket_of, last_hour_and_day, prune,
    };
    let shop = crate::shop(db, "activity.shop.test");
    let other = crate::shop(db, "quiet.shop.test");
    let minutes = |m: i64| Timestamp::from_micros(1_800_000_000_000_000 + m * 60_000_000);
    let now = minutes(3 * 24 * 60);
    let mut first = Tally::default();
    first.add(shop.id, Activity::WebhooksSent, now.plus_seconds(-60), 2);
    first.add(
        shop.id,
        Activity::WebhooksSent,
        now.plus_seconds(-3 * 3600),
        5,
    );
    first.add(
        shop.id,
        Activity::OrdersPlaced,
        now.plus_seconds(-3 * 24 * 3600),
        7,
    );
    first.add(other.id, Activity::WebhooksSent, now, 100);
    db.write(|tx| Ok(first.record(tx)?)).unwrap();
    // A second unit of work adds to a bucket the first made and makes a new one, in one
    // statement.
    let mut second = Tally::default();
    second.add(shop.id, Activity::WebhooksSent, now.plus_seconds(-60), 3);
    second.add(other.id, Activity::WebhooksDelivered, now, 90);
    db.write(|tx| Ok(second.record(tx)?)).unwrap();
    let mut others: Vec<(&str, i64)> = db
        .read(|tx| Ok(tx.shop_activity_since(other.id, minutes(0))?))
        .unwrap()
        .iter()
        .map(|c| (c.activity.as_str(), c.count))
        .collect();
    others.sort_unstable();
    assert_eq!(
        others,
        [
            (Activity::WebhooksDelivered.as_str(), 90),
            (Activity::WebhooksSent.as_str(), 100)
        ]
    );
    let (hour, day) = db.read(|tx| last_hour_and_day(tx, shop.id, now)).unwrap();
    assert_eq!((hour.webhooks_sent, day.webhooks_sent), (5, 10));
    assert_eq!(day.orders_placed, 0, "older than a day");
    let since = |at| {
        db.read(|tx| Ok(tx.shop_activity_since(shop.id, at)?))
            .unwrap()
    };
    assert_eq!(
        since(bucket_of(now.plus_seconds(-60))),
        [ActivityCount {
            shop_id: shop.id,
            activity: Activity::WebhooksSent,
            bucket: bucket_of(now.plus_seconds(-60)),
            count: 5,
        }]
    );
    assert_eq!(since(minutes(0)).len(), 3);
    // Two days are kept: the three-day-old bucket goes.
    assert_eq!(db.write(|tx| prune(tx, now)).unwrap(), 1);
    assert_eq!(since(minutes(0)).len(), 2);
}
every_database!(shop_activity_adds_up_per_bucket_and_is_pruned_by_age);
