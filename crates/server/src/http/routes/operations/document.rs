//! `GET /openapi.json`: the OpenAPI 3.1 document of every route (`crate::http::openapi`), and
//! `GET /docs`: the same document rendered for people.

use actix_web::HttpResponse;
use actix_web::http::header::ContentType;

use std::sync::OnceLock;

use utoipa_scalar::Scalar;

use crate::http::openapi::document_json;

/// The document, the same bytes as `docs/openapi.json`.
#[utoipa::path(get, path = "/openapi.json", operation_id = "get_openapi_document", tag = "Operations",
    responses((status = 200, description = "The OpenAPI 3.1 document of Mercer's HTTP API",
        content_type = "application/json", body = Object)))]
pub async fn openapi_json() -> HttpResponse {
    HttpResponse::Ok()
        .content_type(ContentType::json())
        .body(document_json())
}

/// Scalar's API reference page over the document (the page is built by `utoipa-scalar`; the
/// reader's browser loads Scalar's script from its CDN).
#[utoipa::path(get, path = "/docs", operation_id = "get_api_reference_page", tag = "Operations",
    responses((status = 200, description = "The document rendered for people",
        content_type = "text/html", body = String)))]
pub async fn reference_page() -> HttpResponse {
    static PAGE: OnceLock<String> = OnceLock::new();
    let page = PAGE.get_or_init(|| {
        let document: serde_json::Value =
            serde_json::from_str(document_json()).expect("the document is JSON");
        Scalar::new(document).title("Mercer API").to_html()
    });
    HttpResponse::Ok()
        .content_type(ContentType::html())
        .body(page.as_str())
}
