//! The portal's actions: `POST /portal/shops/{shop}/subscriptions/{id}/{action}`, a form with
//! the session's CSRF token. Each reads its form, then runs the domain's portal action (the
//! API's own use case behind an ownership check) in one unit of work: 303 to the
//! subscription's page when it is done; when refused, nothing changed, and the page is shown
//! again with the problem beside its field, 422.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use mercer_domain::DomainError;
use mercer_domain::kernel::ids::SubscriptionId;
use mercer_domain::portal::actions::{AddressForm, BoxForm, PortalAction, act};
use mercer_domain::portal::sessions::csrf_matches;
use serde::Deserialize;

use super::pages::{Refusal, box_key, page_of, read_page};
use super::shared::{Failure, PortalError, Session, render, see_other};
use crate::http::error::ApiError;
use crate::http::extract::{RawBody, TypedPath};
use crate::http::state::{AppState, run_blocking};

/// `…/subscriptions/{id}/{action}`.
#[derive(Deserialize)]
pub struct ActionPath {
    id: SubscriptionId,
    action: String,
}

/// The first value the form posted as `name`, or empty.
fn field(pairs: &[(String, String)], name: &str) -> String {
    pairs
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.clone())
        .unwrap_or_default()
}

/// Every value the form posted as `name` (or `name[]`), in order.
fn fields(pairs: &[(String, String)], name: &str) -> Vec<String> {
    let listed = format!("{name}[]");
    pairs
        .iter()
        .filter(|(key, _)| *key == name || *key == listed)
        .map(|(_, value)| value.clone())
        .collect()
}

/// The action a form posts to `name`, with its fields; None for no such action.
fn action_of(name: &str, pairs: &[(String, String)]) -> Result<Option<PortalAction>, PortalError> {
    let get = |key| field(pairs, key);
    Ok(Some(match name {
        "skip" => PortalAction::Skip,
        "pause" => PortalAction::Pause {
            resume_on: get("resume_on"),
        },
        "resume" => PortalAction::Resume,
        "cancel" => PortalAction::Cancel {
            reason: get("reason"),
            comment: get("comment"),
        },
        "quantity" => PortalAction::Quantity {
            line_item_id: get("line_item_id"),
            quantity: get("quantity"),
        },
        "frequency" => PortalAction::Frequency {
            interval_id: get("interval_id"),
        },
        "address" => PortalAction::Address(AddressForm {
            first_name: get("first_name"),
            last_name: get("last_name"),
            company: get("company"),
            phone: get("phone"),
            street1: get("street1"),
            street2: get("street2"),
            city: get("city"),
            province: get("province"),
            province_code: get("province_code"),
            country_code: get("country_code"),
            zip: get("zip"),
        }),
        "box" => {
            let products = fields(pairs, "box_product_id");
            let quantities = fields(pairs, "choice_quantity");
            if products.len() != quantities.len() {
                return Err(PortalError::new(Failure::BadForm));
            }
            PortalAction::Box(BoxForm {
                line_item_id: get("line_item_id"),
                order_datetime: get("order_datetime"),
                box_size_id: get("box_size_id"),
                time_slot_id: get("time_slot_id"),
                choices: products.into_iter().zip(quantities).collect(),
            })
        }
        _ => return Ok(None),
    }))
}

/// The form an action's refusal shows on, and the fields of that form that show their own
/// problems (any other problem shows above the form).
fn form_of(action: &PortalAction, pairs: &[(String, String)]) -> (String, &'static [&'static str]) {
    match action {
        PortalAction::Quantity { .. } => (
            format!("quantity-{}", field(pairs, "line_item_id").trim()),
            &["quantity"],
        ),
        PortalAction::Box(form) => (
            box_key(form.line_item_id.trim(), form.order_datetime.trim()),
            &["box_size_id", "choice_quantity", "box_product_id"],
        ),
        PortalAction::Pause { .. } => ("pause".to_string(), &["resume_on"]),
        PortalAction::Cancel { .. } => ("cancel".to_string(), &["reason", "comment"]),
        PortalAction::Frequency { .. } => ("frequency".to_string(), &["interval_id"]),
        PortalAction::Address(_) => (
            "address".to_string(),
            &[
                "first_name",
                "last_name",
                "company",
                "phone",
                "street1",
                "street2",
                "city",
                "province",
                "province_code",
                "country_code",
                "zip",
            ],
        ),
        other => (other.name().to_string(), &[]),
    }
}

/// A problem's message as the page shows it: a sentence (the API's start in lower case).
fn sentence(message: String) -> String {
    let mut chars = message.chars();
    match chars.next() {
        Some(first) if first.is_lowercase() => first.to_uppercase().chain(chars).collect(),
        _ => message,
    }
}

/// The refusal a domain error is, when it is one a visitor can fix (422, 409); None for the
/// others, which answer their own page.
fn refusal_of(
    error: DomainError,
    form: String,
    own_fields: &[&str],
    posted: Vec<(String, String)>,
) -> Result<Refusal, DomainError> {
    let mut refusal = Refusal {
        form,
        posted,
        ..Refusal::default()
    };
    match error {
        DomainError::Invalid(problems) => {
            for problem in problems {
                if own_fields.contains(&problem.field.as_str())
                    && !refusal
                        .fields
                        .iter()
                        .any(|(name, _)| *name == problem.field)
                {
                    refusal
                        .fields
                        .push((problem.field, sentence(problem.message)));
                } else {
                    refusal.general.push(sentence(problem.message));
                }
            }
        }
        DomainError::Unprocessable { message, .. } | DomainError::Conflict { message, .. } => {
            refusal.general.push(sentence(message));
        }
        other => return Err(other),
    }
    Ok(refusal)
}

/// `POST /portal/shops/{shop}/subscriptions/{id}/{action}`.
pub async fn take(
    state: web::Data<AppState>,
    request: HttpRequest,
    session: Session,
    path: TypedPath<ActionPath>,
    body: RawBody,
) -> Result<HttpResponse, PortalError> {
    let visitor = session.visitor.clone();
    let framed = |error: PortalError| error.framed_by(Some(&session.visitor.shop));
    let ActionPath { id, action } = path.get().map_err(|e| framed(e.into()))?;
    let bytes = body.bytes().map_err(|e| framed(e.into()))?;
    let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(&bytes)
        .map_err(|_| framed(PortalError::new(Failure::BadForm)))?;
    if pairs
        .iter()
        .any(|(key, value)| key.contains('\0') || value.contains('\0'))
    {
        return Err(framed(PortalError::new(Failure::BadForm)));
    }
    if !csrf_matches(&visitor, &field(&pairs, "csrf")) {
        return Err(framed(PortalError::new(Failure::Csrf)));
    }
    let not_found = || ApiError::from(DomainError::not_found("subscription"));
    let action = action_of(&action, &pairs)
        .map_err(framed)?
        .ok_or_else(|| framed(not_found().into()))?;
    let (form, own_fields) = form_of(&action, &pairs);
    let (store, now, acting) = (state.store.clone(), state.now(), visitor.clone());
    // The outcome is kept apart from the unit of work's: a refusal rolls the work back and
    // comes back here to be shown.
    let outcome = run_blocking(move || {
        Ok(mercer_domain::ports::Database::write(&store, |tx| {
            act(tx, &acting, id, action, now)
        }))
    })
    .await
    .map_err(|e| framed(e.into()))?;
    let error = match outcome {
        Ok(_) => {
            state.webhooks.notify();
            state.jobs.notify();
            let location = format!(
                "/portal/shops/{}/subscriptions/{id}",
                visitor.shop.identifier.as_str()
            );
            return Ok(session.finish(&request, see_other(&location)));
        }
        Err(error) => error,
    };
    let refusal = refusal_of(error, form, own_fields, pairs)
        .map_err(|error| framed(ApiError::from(error).into()))?;
    let view = read_page(&state, &visitor, id).await.map_err(framed)?;
    let page = page_of(view, &visitor, Some(refusal), state.now());
    let answer = render(
        StatusCode::UNPROCESSABLE_ENTITY,
        &page.chrome,
        &visitor.shop,
        &page,
    )?;
    Ok(session.finish(&request, answer))
}

#[cfg(test)]
mod tests {
    use super::sentence;

    #[test]
    fn problems_read_as_sentences() {
        assert_eq!(
            sentence("the quantities chosen add up to 5".to_string()),
            "The quantities chosen add up to 5"
        );
        assert_eq!(sentence("été".to_string()), "Été");
        assert_eq!(sentence("Already one".to_string()), "Already one");
        assert_eq!(sentence("42 is too many".to_string()), "42 is too many");
        assert_eq!(sentence(String::new()), "");
    }
}
