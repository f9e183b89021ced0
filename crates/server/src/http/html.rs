//! HTML answers: the sign-in and consent page and the operator console. No one may frame them
//! (clickjacking), cache them (they show a shop's data), or send their address elsewhere.

use actix_web::HttpResponse;
use actix_web::http::{StatusCode, header};

/// What the consent page may load: its inline style, nothing else. Its form may post anywhere,
/// because approving sends the browser back to the app.
pub const CONSENT_POLICY: &str =
    "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'";

/// What a console page may load: its inline style; forms go to the console only.
pub const CONSOLE_POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; \
form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// An HTML page with the framing headers, under the content security `policy`.
pub fn page(status: StatusCode, policy: &str, html: String) -> HttpResponse {
    HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((header::X_FRAME_OPTIONS, "DENY"))
        .insert_header((header::CONTENT_SECURITY_POLICY, policy))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header(("Referrer-Policy", "no-referrer"))
        .body(html)
}
