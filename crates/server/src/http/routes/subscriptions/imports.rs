//! Subscription import and export as CSV: `POST …/imports` creates the subscriptions of every
//! valid row (each through Create Subscription) and reports the others; `GET …/imports` and
//! `GET …/imports/{import_id}` show how far the shop's imports have gone; `GET
//! …/exports/subscriptions` streams the same columns, a page of subscriptions at a time.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use futures_core::Stream;
use mercer_domain::access::shop::Shop;
use mercer_domain::kernel::ids::{ImportId, SubscriptionId};
use mercer_domain::subscriptions::imports::{
    ImportProgress, ImportReport, MAX_IMPORT_BYTES, export_header, export_page, get_import,
    import_subscriptions, list_imports,
};
use mercer_domain::subscriptions::resources::{Actor, ActorType};
use mercer_store::Store;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::customers::wake;
use crate::http::error::ApiError;
use crate::http::extract::{Authorized, TypedPath, scopes};
use crate::http::state::{AppState, run_blocking};

/// Subscriptions read from the database per page of an export.
const EXPORT_PAGE: i64 = 250;

/// The answer of Import Subscriptions: what the import did, under `import`.
#[derive(Serialize, ToSchema)]
pub struct ImportAnswer {
    import: ImportReport,
}

/// `…/imports/{import_id}`. An id that is not a number is the import's 404, answered after the
/// credentials are checked.
#[derive(Deserialize)]
pub struct ImportPath {
    import_id: ImportId,
}

/// The answer of Get Import: the import's progress, under `import`.
#[derive(Serialize, ToSchema)]
pub struct ImportProgressAnswer {
    import: ImportProgress,
}

/// The answer of List Imports: the shop's newest imports, newest first.
#[derive(Serialize, ToSchema)]
pub struct ImportListAnswer {
    imports: Vec<ImportProgress>,
}

fn is_csv(request: &HttpRequest) -> bool {
    request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("text/csv"))
}

fn not_csv() -> ApiError {
    ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "request.unsupported_media_type",
        "content_type",
        "the request body must be sent as Content-Type: text/csv",
    )
}

/// The body, at most [`MAX_IMPORT_BYTES`] (413 past it, before reading when `Content-Length`
/// says so).
async fn read_csv_body(
    request: &HttpRequest,
    mut payload: web::Payload,
) -> Result<Vec<u8>, ApiError> {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<usize>().ok());
    if declared.is_some_and(|length| length > MAX_IMPORT_BYTES) {
        return Err(ApiError::payload_too_large(MAX_IMPORT_BYTES));
    }
    let mut body = Vec::with_capacity(declared.unwrap_or(0));
    while let Some(chunk) = std::future::poll_fn(|cx| Pin::new(&mut payload).poll_next(cx)).await {
        let chunk = chunk.map_err(|error| ApiError::unreadable_body(&error))?;
        if body.len() + chunk.len() > MAX_IMPORT_BYTES {
            return Err(ApiError::payload_too_large(MAX_IMPORT_BYTES));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Imports subscriptions from CSV.
///
/// Every valid row of the CSV body becomes a subscription, created exactly as Create
/// Subscription creates one, each row a unit of work of its own (a row that fails leaves no
/// trace); every invalid row is reported with its line (the header is line 1), its column and
/// why. Rows are keyed by `external_id`: importing the same file again creates nothing twice
/// (`skipped_existing`). The body is at most 32 MiB. The answer comes when every row is done;
/// meanwhile List Imports and Get Import show how far the import (its `id`) has gone. The
/// columns are documented under "Import and export" in the subscriptions guide.
#[utoipa::path(post, path = "/subscriptions/v1/shops/{shop}/imports", operation_id = "import_subscriptions", summary = "Import subscriptions from CSV", tag = "Subscriptions",
    request_body(content = String, content_type = "text/csv",
        description = "A header row naming the columns, then one subscription per row"),
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["write_subscriptions"]), ("oauth2" = ["write_subscriptions"])),
    responses((status = 200, body = ImportAnswer, description = "The import is done: what it created, skipped and could not import")))]
pub async fn import(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    http: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    if !is_csv(&http) {
        return Err(not_csv());
    }
    let body = read_csv_body(&http, payload).await?;
    let (store, shop, clock) = (
        state.store.clone(),
        request.access.shop.clone(),
        state.clock,
    );
    let actor = Actor {
        kind: ActorType::Api,
        id: request.access.token.id.0,
        name: request.access.token.name.clone(),
    };
    // On the blocking pool: a large file takes minutes, and no async thread waits for it.
    let import =
        run_blocking(move || import_subscriptions(&store, &shop, &body, &actor, &clock)).await?;
    if import.created > 0 {
        wake(&state);
    }
    Ok(HttpResponse::Ok().json(ImportAnswer { import }))
}

/// Lists the shop's imports.
///
/// The shop's 50 newest imports, newest first, each with how far it has gone: `rows` (the
/// file's data rows), `rows_done` (= `created` + `skipped_existing` + `failed_rows`), its
/// `status` (`running`, `done`, or `stopped` by a storage failure) and times. A running
/// import's figures move after every 100 rows.
#[utoipa::path(get, path = "/subscriptions/v1/shops/{shop}/imports", operation_id = "list_imports", summary = "List subscription imports", tag = "Subscriptions",
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["read_subscriptions"]), ("oauth2" = ["read_subscriptions"])),
    responses((status = 200, body = ImportListAnswer, description = "The shop's newest imports, newest first")))]
pub async fn list(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptions>,
) -> Result<HttpResponse, ApiError> {
    let shop = request.access.shop;
    let imports = state.read(move |tx| list_imports(tx, &shop)).await?;
    Ok(HttpResponse::Ok().json(ImportListAnswer { imports }))
}

/// Gets an import.
///
/// One of the shop's imports with how far it has gone (as in List Imports); 404 for an unknown
/// id or another shop's.
#[utoipa::path(get, path = "/subscriptions/v1/shops/{shop}/imports/{import_id}", operation_id = "get_import", summary = "Get a subscription import", tag = "Subscriptions",
    params(("shop" = String, Path, description = "The shop's identifier"),
        ("import_id" = i64, Path, description = "The import's id (the `id` of its answer)")),
    security(("api_token" = ["read_subscriptions"]), ("oauth2" = ["read_subscriptions"])),
    responses((status = 200, body = ImportProgressAnswer, description = "The import and how far it has gone")))]
pub async fn get(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptions>,
    path: TypedPath<ImportPath>,
) -> Result<HttpResponse, ApiError> {
    let id = path.get()?.import_id;
    let shop = request.access.shop;
    let import = state.read(move |tx| get_import(tx, &shop, id)).await?;
    Ok(HttpResponse::Ok().json(ImportProgressAnswer { import }))
}

type Page = Pin<Box<dyn Future<Output = Result<(Vec<u8>, Option<SubscriptionId>), ApiError>>>>;

fn read_page(store: &Store, shop: &Shop, after: Option<SubscriptionId>) -> Page {
    let (store, shop) = (store.clone(), shop.clone());
    Box::pin(run_blocking(move || {
        mercer_domain::ports::Database::read(&store, |tx| {
            export_page(tx, &shop, after, EXPORT_PAGE)
        })
    }))
}

/// The pages after the first, read one at a time as the client takes them.
struct ExportPages {
    store: Store,
    shop: Shop,
    /// The id to continue after; `None` once the last page is sent.
    after: Option<SubscriptionId>,
    pending: Option<Page>,
}

impl Stream for ExportPages {
    type Item = Result<web::Bytes, actix_web::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let Some(after) = this.after else {
            return Poll::Ready(None);
        };
        let pending = this
            .pending
            .get_or_insert_with(|| read_page(&this.store, &this.shop, Some(after)));
        match pending.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(result) => {
                this.pending = None;
                Poll::Ready(Some(match result {
                    Ok((bytes, next)) => {
                        this.after = next;
                        Ok(web::Bytes::from(bytes))
                    }
                    Err(error) => {
                        // The answer has begun: the client sees it break off.
                        this.after = None;
                        tracing::warn!(shop = this.shop.id.0, "export broke off: {error}");
                        Err(error.into())
                    }
                }))
            }
        }
    }
}

/// Exports subscriptions as CSV.
///
/// Every subscription of the shop, one row each in ascending id, in the columns the import
/// reads (so an export imports into another shop). The answer is streamed as it is read.
#[utoipa::path(get, path = "/subscriptions/v1/shops/{shop}/exports/subscriptions", operation_id = "export_subscriptions", summary = "Export subscriptions as CSV", tag = "Subscriptions",
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["read_subscriptions"]), ("oauth2" = ["read_subscriptions"])),
    responses((status = 200, content_type = "text/csv", body = String,
        description = "A header row, then one row per subscription in ascending id")))]
pub async fn export(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptions>,
) -> Result<HttpResponse, ApiError> {
    let (store, shop) = (state.store.clone(), request.access.shop.clone());
    // The first page is read before answering, so that its failure is an error answer.
    let (first, after) = read_page(&store, &shop, None).await?;
    let mut head = export_header();
    head.extend_from_slice(&first);
    let head = web::Bytes::from(head);
    let rest = ExportPages {
        store,
        shop,
        after,
        pending: None,
    };
    let body = Chain {
        head: Some(head),
        rest,
    };
    Ok(HttpResponse::Ok()
        .content_type("text/csv; charset=utf-8")
        .streaming(body))
}

/// The header and first page, then the rest.
struct Chain {
    head: Option<web::Bytes>,
    rest: ExportPages,
}

impl Stream for Chain {
    type Item = Result<web::Bytes, actix_web::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        match this.head.take() {
            Some(head) => Poll::Ready(Some(Ok(head))),
            None => Pin::new(&mut this.rest).poll_next(cx),
        }
    }
}
