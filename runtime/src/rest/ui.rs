//! The web console: static files embedded in the binary, served at `/ui`
//! behind the same authentication as the API. The page talks only to the
//! public REST API and `/metrics`.

use axum::http::HeaderMap;

use super::*;

/// The console's files (`runtime/ui/`), by name.
const ASSETS: &[(&str, &str, &[u8])] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_bytes!("../../ui/index.html"),
    ),
    (
        "console.css",
        "text/css; charset=utf-8",
        include_bytes!("../../ui/console.css"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../ui/app.js"),
    ),
    (
        "api.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../ui/api.js"),
    ),
    (
        "metrics.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../ui/metrics.js"),
    ),
    (
        "chart.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../ui/chart.js"),
    ),
    (
        "dom.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../ui/dom.js"),
    ),
    (
        "views.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../ui/views.js"),
    ),
    (
        "favicon.svg",
        "image/svg+xml",
        include_bytes!("../../ui/favicon.svg"),
    ),
];

/// Only the worker's own origin: no inline script or style, no other host.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; \
                   frame-ancestors 'none'";

/// An entity tag from the content (FNV-1a), the same for the same bytes.
fn etag(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("\"{h:016x}\"")
}

fn asset(name: &str, headers: &HeaderMap) -> Response {
    let Some((_, content_type, bytes)) = ASSETS.iter().find(|(n, _, _)| *n == name) else {
        return ApiError::not_found(format!("no console file {name}")).into_response();
    };
    let tag = etag(bytes);
    // Revalidated on every load (the names carry no version), answered 304
    // while unchanged: a new binary's console is never mixed with an old one.
    let common = [
        (header::CACHE_CONTROL, "no-cache"),
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
    ];
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == tag || t.trim() == "*"));
    if matches {
        return (StatusCode::NOT_MODIFIED, common, [(header::ETAG, tag)]).into_response();
    }
    (
        common,
        [
            (header::CONTENT_TYPE, *content_type),
            (header::ETAG, tag.as_str()),
        ],
        *bytes,
    )
        .into_response()
}

pub(super) async fn ui_index(headers: HeaderMap) -> Response {
    asset("index.html", &headers)
}

pub(super) async fn ui_asset(Path(path): Path<String>, headers: HeaderMap) -> Response {
    if path.is_empty() {
        return asset("index.html", &headers);
    }
    asset(&path, &headers)
}

#[cfg(test)]
mod tests {
    /// Every file of `runtime/ui/` is embedded, and nothing else is listed.
    #[test]
    fn every_console_file_is_embedded() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("ui");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        let mut listed: Vec<String> = super::ASSETS
            .iter()
            .map(|(n, _, _)| n.to_string())
            .collect();
        listed.sort();
        assert_eq!(on_disk, listed, "runtime/ui/ and rest::ui::ASSETS differ");
    }
}
