//! `GET /openapi.json`: the OpenAPI 3.1 document of every route (`crate::http::openapi`).

use actix_web::HttpResponse;
use actix_web::http::header::ContentType;

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
