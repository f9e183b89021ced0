//! The list checks (docs/connector.md section 3.3): ascending `platform_id`, `limit` capping a page,
//! cursors visiting each record once and ending with an empty `next`, the fallback to 250, and
//! List Customers' email filter. They read whatever the shop holds, the test customers included.

use mercer_domain::platform::resources::{Category, Customer, Order, PlatformId, Product};
use serde::de::DeserializeOwned;

use super::checks::{self, Check};
use super::session::{Call, Session, listed_by_email, needs, status, transport};
use super::{Outcome, Record};
use crate::client::{self, Method};

/// The default page size, and the largest `limit` allowed.
const DEFAULT_LIMIT: usize = 250;
/// Limits outside 1..250 (or not numbers): each answers the default page.
const INVALID_LIMITS: [&str; 4] = ["0", "251", "-1", "abc"];
/// The walk: this many pages of one record, against pages of `REFERENCE_LIMIT`.
const WALK_PAGES: usize = 5;
const REFERENCE_LIMIT: usize = 5;

/// One page, reduced to what the rules are about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fetched {
    pub ids: Vec<String>,
    /// The next page's cursor; `None` when empty or absent.
    pub next: Option<String>,
}

/// Fetches one page: `(limit, cursor)`.
pub(crate) type Fetch<'a> = dyn FnMut(Option<&str>, Option<&str>) -> Result<Fetched, String> + 'a;

/// Resources of a list: each has a platform id.
trait Listed: DeserializeOwned {
    fn id(&self) -> Option<&PlatformId>;
}

macro_rules! listed {
    ($($kind:ty),*) => {$(
        impl Listed for $kind {
            fn id(&self) -> Option<&PlatformId> {
                self.platform_id.as_ref()
            }
        }
    )*};
}

listed!(Customer, Order, Product, Category);

pub(crate) fn run(session: &mut Session, record: &mut Record<'_>) {
    list::<Customer>(
        session,
        record,
        "customers",
        [&checks::CUSTOMERS_PAGING, &checks::CUSTOMERS_LIMIT_FALLBACK],
    );
    record(&checks::CUSTOMERS_EMAIL_FILTER, email_filter(session));
    list::<Order>(
        session,
        record,
        "orders",
        [&checks::ORDERS_PAGING, &checks::ORDERS_LIMIT_FALLBACK],
    );
    list::<Product>(
        session,
        record,
        "products",
        [&checks::PRODUCTS_PAGING, &checks::PRODUCTS_LIMIT_FALLBACK],
    );
    list::<Category>(
        session,
        record,
        "categories",
        [
            &checks::CATEGORIES_PAGING,
            &checks::CATEGORIES_LIMIT_FALLBACK,
        ],
    );
}

fn list<T: Listed>(
    session: &mut Session,
    record: &mut Record<'_>,
    collection: &str,
    [paging_check, fallback_check]: [&'static Check; 2],
) {
    let what = format!(
        "List {}{}",
        collection[..1].to_uppercase(),
        &collection[1..]
    );
    let mut fetch = |limit: Option<&str>, cursor: Option<&str>| {
        fetch_page::<T>(session, &what, collection, limit, cursor)
    };
    record(paging_check, paging(&mut fetch));
    record(fallback_check, limit_fallback(&mut fetch));
}

fn fetch_page<T: Listed>(
    session: &mut Session,
    what: &str,
    collection: &str,
    limit: Option<&str>,
    cursor: Option<&str>,
) -> Result<Fetched, String> {
    let mut query = Vec::new();
    query.extend(limit.map(|limit| ("limit", limit)));
    query.extend(cursor.map(|cursor| ("cursor", cursor)));
    let answer = session.send(Call::new(what, Method::Get, &[collection]).query(&query))?;
    status(&answer, what, &[200])?;
    let page = client::list::<T>(&answer.body, collection)
        .map_err(|error| format!("{what}: {}", transport(error)))?;
    let ids = page
        .items
        .iter()
        .map(|item| item.id().map(|id| id.as_str().to_string()))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| format!("{what}: a record of data.{collection} has no platform_id"))?;
    Ok(Fetched {
        ids,
        next: page.pagination.next_cursor().map(str::to_string),
    })
}

/// Whether `ids` strictly ascend: as numbers when every id is an integer, else as text.
fn ascending(ids: &[String]) -> Result<(), String> {
    let numbers: Option<Vec<i128>> = ids.iter().map(|id| id.parse().ok()).collect();
    for (index, pair) in ids.windows(2).enumerate() {
        let rises = match &numbers {
            Some(numbers) => numbers[index] < numbers[index + 1],
            None => pair[0] < pair[1],
        };
        if pair[0] == pair[1] {
            return Err(format!("{} came twice", pair[0]));
        }
        if !rises {
            return Err(format!(
                "{} came before {}: results ascend by platform_id",
                pair[0], pair[1]
            ));
        }
    }
    Ok(())
}

/// The first records of the list by pages of `REFERENCE_LIMIT`: up to two pages, and whether
/// the list ended there.
fn reference(fetch: &mut Fetch<'_>) -> Result<(Vec<String>, bool), String> {
    let limit = REFERENCE_LIMIT.to_string();
    let first = fetch(Some(&limit), None)?;
    let mut ids = first.ids.clone();
    let mut ended = first.next.is_none();
    let mut pages = vec![first];
    if let Some(cursor) = pages[0].next.clone() {
        let second = fetch(Some(&limit), Some(&cursor))?;
        if second.ids.is_empty() {
            return Err(
                "pagination.next led to an empty page: next must be empty when no \
                        further records exist"
                    .to_string(),
            );
        }
        ids.extend(second.ids.iter().cloned());
        ended = second.next.is_none();
        pages.push(second);
    }
    if let Some(page) = pages.iter().find(|page| page.ids.len() > REFERENCE_LIMIT) {
        return Err(format!(
            "limit={REFERENCE_LIMIT} answered {} records",
            page.ids.len()
        ));
    }
    ascending(&ids)?;
    Ok((ids, ended))
}

/// The paging rule: pages of one record, cursor after cursor, visit the same records in the
/// same order as pages of five, each once, and the walk ends with an empty `next`.
pub(crate) fn paging(fetch: &mut Fetch<'_>) -> Outcome {
    let (reference, reference_ended) = reference(fetch)?;
    if reference.is_empty() {
        return Ok("the list is empty: only its answer was checked".to_string());
    }
    let mut walked: Vec<String> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut ended = false;
    for _ in 0..WALK_PAGES {
        let page = fetch(Some("1"), cursor.as_deref())?;
        if page.ids.len() > 1 {
            return Err(format!("limit=1 answered {} records", page.ids.len()));
        }
        if page.ids.is_empty() {
            return Err(
                "pagination.next led to an empty page: next must be empty when no further \
                 records exist"
                    .to_string(),
            );
        }
        walked.extend(page.ids);
        if page.next.is_some() && page.next == cursor {
            return Err("pagination.next repeated the cursor it was given".to_string());
        }
        cursor = page.next;
        if cursor.is_none() {
            ended = true;
            break;
        }
    }
    ascending(&walked)?;
    let expected = &reference[..walked.len().min(reference.len())];
    if walked != expected {
        return Err(format!(
            "pages of 1 visited {} where pages of {REFERENCE_LIMIT} list {}",
            walked.join(", "),
            expected.join(", ")
        ));
    }
    if ended && !(reference_ended && reference.len() == walked.len()) {
        return Err(format!(
            "pages of 1 ended after {} records, pages of {REFERENCE_LIMIT} did not",
            walked.len()
        ));
    }
    if !ended && reference_ended && reference.len() <= walked.len() {
        return Err(format!(
            "pages of {REFERENCE_LIMIT} ended after {} records, pages of 1 went on",
            reference.len()
        ));
    }
    Ok(String::new())
}

/// The limit rule: no limit, or one outside 1..250, answers the default page of 250.
pub(crate) fn limit_fallback(fetch: &mut Fetch<'_>) -> Outcome {
    let default = fetch(None, None)?;
    let count = default.ids.len();
    if count > DEFAULT_LIMIT {
        return Err(format!(
            "without limit, a page of {count} records (250 at most)"
        ));
    }
    if default.next.is_some() && count != DEFAULT_LIMIT {
        return Err(format!(
            "without limit, a page of {count} records with more after it: the default is 250"
        ));
    }
    for limit in INVALID_LIMITS {
        let page = fetch(Some(limit), None).map_err(|reason| format!("limit={limit}: {reason}"))?;
        if page.ids != default.ids {
            return Err(format!(
                "limit={limit} answered {} records, not the default page's {count}: an invalid \
                 limit falls back to 250",
                page.ids.len()
            ));
        }
    }
    Ok(match count {
        0 => "the list is empty: limits could not be told apart".to_string(),
        1..DEFAULT_LIMIT => format!("{count} records: limit=251 could not be told from 250"),
        _ => String::new(),
    })
}

/// List Customers with `email=` answers the test customer of that email, and no other.
fn email_filter(session: &mut Session) -> Outcome {
    if session.fixtures.customers.is_empty() {
        return Err(needs(checks::CREATE_CUSTOMER.name));
    }
    for customer in session.fixtures.customers.clone() {
        let listed = listed_by_email(session, &customer.email)?;
        let ids: Vec<String> = listed
            .iter()
            .map(|c| {
                c.platform_id
                    .as_ref()
                    .map(|id| id.to_string())
                    .unwrap_or_default()
            })
            .collect();
        if ids != [customer.id().to_string()] {
            return Err(format!(
                "email={} answered [{}], not [{}]",
                customer.email,
                ids.join(", "),
                customer.id()
            ));
        }
    }
    Ok(String::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A list of `count` records `r01…`, paged by position, with the faults a test asks for.
    #[derive(Default, Clone, Copy)]
    struct Fake {
        count: usize,
        ignores_limit: bool,
        honors_zero: bool,
        honors_large: bool,
        descending: bool,
        next_on_last_page: bool,
        repeats_first: bool,
    }

    impl Fake {
        fn fetch(self) -> impl FnMut(Option<&str>, Option<&str>) -> Result<Fetched, String> {
            move |limit, cursor| {
                let mut ids: Vec<String> = (1..=self.count).map(|n| format!("r{n:02}")).collect();
                if self.descending {
                    ids.reverse();
                }
                let parsed = limit.and_then(|l| l.parse::<usize>().ok());
                let limit = match parsed {
                    _ if self.ignores_limit => 250,
                    Some(n) if (1..=250).contains(&n) => n,
                    Some(0) if self.honors_zero => 0,
                    Some(n) if n > 250 && self.honors_large => n,
                    _ => 250,
                };
                let start: usize = cursor.map_or(0, |c| c.parse().unwrap_or(0));
                let start = if self.repeats_first && start > 0 {
                    start - 1
                } else {
                    start
                };
                let end = (start + limit).min(ids.len());
                let more = end < ids.len() || (self.next_on_last_page && start < ids.len());
                Ok(Fetched {
                    ids: ids[start.min(end)..end].to_vec(),
                    next: more.then(|| end.to_string()),
                })
            }
        }
    }

    fn paging_of(fake: Fake) -> Outcome {
        paging(&mut fake.fetch())
    }

    fn fallback_of(fake: Fake) -> Outcome {
        limit_fallback(&mut fake.fetch())
    }

    #[test]
    fn a_list_that_follows_the_rules_passes() {
        for count in [0, 1, 3, 5, 6, 12, 300] {
            let fake = Fake {
                count,
                ..Fake::default()
            };
            assert!(paging_of(fake).is_ok(), "{count}: {:?}", paging_of(fake));
            assert!(
                fallback_of(fake).is_ok(),
                "{count}: {:?}",
                fallback_of(fake)
            );
        }
        assert_eq!(
            fallback_of(Fake {
                count: 3,
                ..Fake::default()
            }),
            Ok("3 records: limit=251 could not be told from 250".to_string())
        );
    }

    #[test]
    fn each_broken_rule_is_named() {
        let broken = |fake: Fake| paging_of(Fake { count: 12, ..fake }).unwrap_err();
        assert!(
            broken(Fake {
                ignores_limit: true,
                ..Fake::default()
            })
            .contains("limit=5 answered 12")
        );
        assert!(
            broken(Fake {
                descending: true,
                ..Fake::default()
            })
            .contains("ascend")
        );
        assert!(
            broken(Fake {
                repeats_first: true,
                ..Fake::default()
            })
            .contains("came twice")
        );
        let tail = paging_of(Fake {
            count: 3,
            next_on_last_page: true,
            ..Fake::default()
        });
        assert!(tail.unwrap_err().contains("empty page"));
        let large = fallback_of(Fake {
            count: 300,
            honors_large: true,
            ..Fake::default()
        });
        assert!(large.unwrap_err().contains("limit=251 answered 251"));
        let zero = fallback_of(Fake {
            count: 3,
            honors_zero: true,
            ..Fake::default()
        });
        assert!(zero.unwrap_err().contains("limit=0 answered 0"));
    }

    #[test]
    fn ids_ascend_as_numbers_when_they_are_numbers() {
        let ids = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(ascending(&ids(&["9", "10", "11"])), Ok(()));
        assert!(ascending(&ids(&["b", "a"])).is_err());
        assert!(
            ascending(&ids(&["cus_1", "cus_1"]))
                .unwrap_err()
                .contains("twice")
        );
        assert_eq!(ascending(&ids(&["cus_09", "cus_10"])), Ok(()));
    }
}
