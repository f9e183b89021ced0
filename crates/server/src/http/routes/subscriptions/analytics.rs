//! The shop's subscription analytics under `/subscriptions/v1/shops/{shop}/analytics` (reads
//! `read_subscriptions`).

use actix_web::{HttpResponse, web};
use mercer_domain::subscriptions::analytics::{AnalyticsAnswer, AnalyticsQuery, shop_analytics};

use crate::http::error::ApiError;
use crate::http::extract::{Authorized, scopes};
use crate::http::state::AppState;

/// Gets the shop's subscription analytics.
///
/// The figures of the days `from` to `to` (both included, in the shop's time zone), amounts in
/// cents of the shop's currency: subscriptions active at the start and at the end, created,
/// cancelled (by reason code; null for none given) and paused in the period, `churn_rate`
/// (`cancelled ÷ active_start`, rounded half up to 4 decimals, null when `active_start` is 0),
/// MRR at the start and at the end (each active subscription's order total after discounts,
/// shipping included, scaled to 30 days by its rule's average period and rounded half up to
/// the cent; subscriptions charged in another currency are left out), and the orders the
/// scheduler placed and that failed, with the revenue of the placed ones. A period spans at
/// most 3,660 days; a date missing, not `YYYY-MM-DD`, or a `to` before `from` is a 422 on its
/// parameter.
#[utoipa::path(get, path = "/subscriptions/v1/shops/{shop}/analytics", operation_id = "get_subscription_analytics", summary = "Get subscription analytics", tag = "Subscriptions",
    params(("shop" = String, Path, description = "The shop's identifier"), AnalyticsQuery),
    security(("api_token" = ["read_subscriptions"]), ("oauth2" = ["read_subscriptions"])),
    responses((status = 200, body = AnalyticsAnswer)))]
pub async fn get(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptions>,
    query: web::Query<AnalyticsQuery>,
) -> Result<HttpResponse, ApiError> {
    let period = query.into_inner().validate()?;
    let shop = request.access.shop;
    let report = state
        .read(move |tx| shop_analytics(tx, &shop, period))
        .await?;
    Ok(HttpResponse::Ok().json(AnalyticsAnswer {
        analytics: report.analytics,
    }))
}
