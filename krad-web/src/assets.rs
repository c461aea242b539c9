//! The page's files, embedded in the binary: krad's own (`krad-web/web/`) and
//! the pinned npm parts (xterm.js and its fit add-on), vendored in
//! `krad-web/vendor/` with their licenses, and checked against the sha256 of
//! `vendor/MANIFEST` by build.rs.

/// Each file: its path on the page, its type, its bytes.
const FILES: &[(&str, &str, &[u8])] = &[
    (
        "/",
        "text/html; charset=utf-8",
        include_bytes!("../web/index.html"),
    ),
    (
        "/assets/app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../web/app.js"),
    ),
    (
        "/assets/style.css",
        "text/css; charset=utf-8",
        include_bytes!("../web/style.css"),
    ),
    (
        "/assets/xterm.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../vendor/xterm.js"),
    ),
    (
        "/assets/addon-fit.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../vendor/addon-fit.js"),
    ),
    (
        "/assets/xterm.css",
        "text/css; charset=utf-8",
        include_bytes!("../vendor/xterm.css"),
    ),
];

/// The file served at `path`.
pub(crate) fn find(path: &str) -> Option<(&'static str, &'static [u8])> {
    FILES
        .iter()
        .find(|(at, _, _)| *at == path)
        .map(|(_, kind, body)| (*kind, *body))
}
