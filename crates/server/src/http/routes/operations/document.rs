//! `GET /openapi.json`: the OpenAPI 3.1 document of every route (`crate::http::openapi`), and
//! `GET /docs`: the same document rendered for people by Swagger UI, whose script and style are
//! built into the binary: the page loads nothing from anywhere else.

use std::sync::{Arc, OnceLock};

use actix_web::http::header::{self, ContentType};
use actix_web::{HttpRequest, HttpResponse};
use base64::Engine;
use sha2::{Digest, Sha256};

use crate::http::openapi::document_json;

/// Gets the OpenAPI document.
///
/// The same bytes as `docs/openapi.json`.
#[utoipa::path(get, path = "/openapi.json", operation_id = "get_openapi_document", summary = "Get the OpenAPI document", tag = "Operations",
    responses((status = 200, description = "The OpenAPI 3.1 document of Mercer's HTTP API",
        content_type = "application/json", body = Object)))]
pub async fn openapi_json() -> HttpResponse {
    HttpResponse::Ok()
        .content_type(ContentType::json())
        .body(document_json())
}

/// Shows the API reference page.
///
/// Swagger UI's reference page over the document. Its script and style are built into the binary:
/// the page loads nothing from elsewhere.
#[utoipa::path(get, path = "/docs", operation_id = "get_api_reference_page", summary = "Show the API reference page", tag = "Operations",
    responses((status = 200, description = "The document rendered for people",
        content_type = "text/html", body = String),
        (status = 304, description = "The page the client holds (its `If-None-Match`) is current")))]
pub async fn reference_page(request: HttpRequest) -> HttpResponse {
    let page = ReferencePage::get();
    let unchanged = request
        .headers()
        .get_all(header::IF_NONE_MATCH)
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|tag| matches!(tag.trim(), "*") || tag.trim() == page.etag);
    let mut answer = if unchanged {
        HttpResponse::NotModified()
    } else {
        HttpResponse::Ok()
    };
    answer
        .insert_header((header::ETAG, page.etag.as_str()))
        // The page holds no shop's data; the browser asks again each time (`If-None-Match`).
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .insert_header((header::X_FRAME_OPTIONS, "DENY"))
        .insert_header((header::CONTENT_SECURITY_POLICY, page.policy.as_str()))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header(("Referrer-Policy", "no-referrer"));
    if unchanged {
        answer.finish()
    } else {
        answer
            .content_type(ContentType::html())
            .body(page.html.as_str())
    }
}

/// Starts Swagger UI on the document the page holds. Deep links (`#/Tag/operation`) work; the
/// validator badge, which would call a server elsewhere, is off.
const START: &str = "window.ui = SwaggerUIBundle({
  spec: JSON.parse(document.getElementById('openapi-document').textContent),
  dom_id: '#swagger-ui',
  deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis],
  layout: 'BaseLayout',
  validatorUrl: null,
});";

/// The page, built once: Swagger UI's style and script inline, the document as a JSON data
/// block, and the content security policy that lets exactly those inline blocks apply (by their
/// SHA-256) and nothing else load.
struct ReferencePage {
    html: String,
    policy: String,
    etag: String,
}

impl ReferencePage {
    fn get() -> &'static ReferencePage {
        static PAGE: OnceLock<ReferencePage> = OnceLock::new();
        PAGE.get_or_init(ReferencePage::build)
    }

    fn build() -> ReferencePage {
        let style = swagger_file("swagger-ui.css");
        let script = swagger_file("swagger-ui-bundle.js");
        let document: serde_json::Value =
            serde_json::from_str(document_json()).expect("the document is JSON");
        // `<` escaped (JSON's `\u003c`), so no text of the document can end the block early.
        let data = document.to_string().replace('<', "\\u003c");
        let html = format!(
            "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <title>Mercer API</title><link rel=\"icon\" href=\"data:,\">\
             <style>{style}</style></head><body>\
             <div id=\"swagger-ui\"></div>\
             <script type=\"application/json\" id=\"openapi-document\">{data}</script>\
             <script>{script}</script><script>{START}</script></body></html>\n"
        );
        let policy = format!(
            "default-src 'none'; script-src {} {}; style-src {}; img-src 'self' data:; \
             connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
            hash_source(&script),
            hash_source(START),
            hash_source(&style),
        );
        let digest = Sha256::digest(html.as_bytes());
        let etag = format!("\"{}\"", hex(&digest[..16]));
        ReferencePage { html, policy, etag }
    }
}

/// A file of Swagger UI, from the copy built into the binary.
fn swagger_file(name: &str) -> String {
    let config = Arc::new(utoipa_swagger_ui::Config::from("/openapi.json"));
    let file = utoipa_swagger_ui::serve(name, config)
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("Swagger UI's {name} is built into the binary"));
    String::from_utf8(file.bytes.into_owned())
        .unwrap_or_else(|_| panic!("Swagger UI's {name} is UTF-8"))
}

/// `'sha256-…'`: a content security policy source that allows the inline block `text`.
fn hash_source(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    format!(
        "'sha256-{}'",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_holds_swagger_ui_and_the_document_and_its_policy_allows_exactly_its_blocks() {
        let page = ReferencePage::build();
        assert!(page.html.contains("SwaggerUIBundle"));
        assert!(
            page.html
                .contains("\"operationId\":\"get_api_reference_page\"")
        );
        // Each inline block as the browser parses it: from its tag to the first closing tag.
        let mut blocks = 0;
        let mut rest = page.html.as_str();
        while let Some((start, open, close)) = [("<script>", "</script>"), ("<style>", "</style>")]
            .into_iter()
            .filter_map(|(open, close)| rest.find(open).map(|start| (start, open, close)))
            .min()
        {
            let body = &rest[start + open.len()..];
            let end = body.find(close).expect("the block ends");
            assert!(
                page.policy.contains(&hash_source(&body[..end])),
                "{open} number {blocks}"
            );
            blocks += 1;
            rest = &body[end + close.len()..];
        }
        assert_eq!(blocks, 3, "Swagger UI's script and style, and the start");
        // Nothing but those blocks and this server: no inline code of another, no other host.
        assert!(!page.policy.contains("unsafe"), "{}", page.policy);
        assert!(!page.policy.contains("http"), "{}", page.policy);
        assert!(!page.html.contains("src=\"http"), "a script from elsewhere");
        assert!(!page.html.contains("href=\"http"), "a style from elsewhere");
    }
}
