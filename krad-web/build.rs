//! Embeds the page's npm parts (xterm.js, pinned in web/package-lock.json).
//!
//! They come from `web/node_modules`, which `scripts/web-assets` installs
//! (`npm ci`, offline from then on). Without them the build still succeeds —
//! `cargo clippy` and `cargo run` on a fresh machine must work — but the page's
//! terminals show what to run instead, and cargo warns.

use std::path::Path;

const PARTS: &[(&str, &str)] = &[
    ("xterm.js", "@xterm/xterm/lib/xterm.js"),
    ("xterm.css", "@xterm/xterm/css/xterm.css"),
    ("addon-fit.js", "@xterm/addon-fit/lib/addon-fit.js"),
];

const MISSING: &str = "/* krad: the page's npm parts are not installed: run scripts/web-assets \
(needs npm), then rebuild. */\nwindow.KRAD_MISSING_ASSETS = \"run scripts/web-assets (needs npm), \
then rebuild krad\";\n";

fn main() {
    let out = std::env::var("OUT_DIR").unwrap_or_else(|_| ".".into());
    let modules = Path::new("web/node_modules");
    println!("cargo:rerun-if-changed=web/package-lock.json");
    let mut missing = false;
    for (name, from) in PARTS {
        let source = modules.join(from);
        println!("cargo:rerun-if-changed={}", source.display());
        let bytes = match std::fs::read(&source) {
            Ok(bytes) => bytes,
            Err(_) => {
                missing = true;
                if name.ends_with(".js") {
                    MISSING.as_bytes().to_vec()
                } else {
                    Vec::new()
                }
            }
        };
        if let Err(e) = std::fs::write(Path::new(&out).join(name), bytes) {
            println!("cargo:warning=cannot write {name} into OUT_DIR: {e}");
        }
    }
    if missing {
        println!(
            "cargo:warning=krad-web: xterm.js is not installed; the page's terminals will say so. \
             Run scripts/web-assets (needs npm) and rebuild."
        );
    }
}
