//! The server-rendered pages of the authorization flow (sign-in, consent, out-of-band code,
//! errors): minijinja templates compiled into the binary, HTML-escaped by default, plain forms
//! that work without JavaScript. Every page is `no-store` and refuses to be framed
//! (clickjacking the consent button).

use std::sync::OnceLock;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use minijinja::Environment;

const TEMPLATES: &[(&str, &str)] = &[
    ("layout.html", include_str!("templates/layout.html")),
    ("sign_in.html", include_str!("templates/sign_in.html")),
    ("consent.html", include_str!("templates/consent.html")),
    ("code.html", include_str!("templates/code.html")),
    ("error.html", include_str!("templates/error.html")),
    ("signed_out.html", include_str!("templates/signed_out.html")),
    ("signed_in.html", include_str!("templates/signed_in.html")),
    ("setup.html", include_str!("templates/setup.html")),
];

fn env() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| crate::web::pages::environment(TEMPLATES))
}

/// Renders `template` with `ctx` as an HTML response of `status`.
pub fn render(status: StatusCode, template: &str, ctx: minijinja::Value) -> Response {
    let html = env().get_template(template).and_then(|t| t.render(ctx));
    let (status, body) = match html {
        Ok(body) => (status, body),
        Err(e) => {
            tracing::error!(template, error = %e, "rendering a page failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "<!doctype html><title>Error</title><p>This page could not be shown.</p>".into(),
            )
        }
    };
    let mut resp = (status, body).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
        ),
    );
    resp
}

/// An error page for people (a bad authorization request that must not redirect).
pub fn error(status: StatusCode, host: &str, title: &str, message: &str) -> Response {
    render(
        status,
        "error.html",
        minijinja::context! { host, title, message },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_template_renders_and_escapes() {
        let resp = render(
            StatusCode::OK,
            "consent.html",
            minijinja::context! {
                host => "h", app_name => "<script>x</script>", username => "u",
                scopes => vec!["read"], csrf => "c", client_id => "id", redirect_uri => "r",
                scope => "read", state => "s\"", code_challenge => "", code_challenge_method => "",
                website => "",
            },
        );
        assert_eq!(resp.status(), StatusCode::OK);
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .expect("body");
        let body = String::from_utf8_lossy(&body);
        assert!(
            body.contains("&lt;script&gt;x&lt;&#x2f;script&gt;"),
            "{body}"
        );
        assert!(!body.contains("<script>"), "{body}");
        assert!(body.contains("value=\"s&quot;\""), "{body}");
        for (name, _) in TEMPLATES {
            assert!(env().get_template(name).is_ok(), "{name}");
        }
        for name in ["sign_in.html", "code.html", "error.html"] {
            let r = render(StatusCode::OK, name, minijinja::context! { host => "h" });
            assert_eq!(r.status(), StatusCode::OK, "{name}");
        }
    }
}
