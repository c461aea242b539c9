//! Checks the page's vendored npm parts (xterm.js and its fit add-on, in
//! `vendor/`) against `vendor/MANIFEST` — each file's sha256 — before
//! `src/assets.rs` embeds them: a build never ships a file other than the
//! pinned one, and needs no npm. `scripts/web-assets --refresh` takes them
//! anew from npm and rewrites the manifest.

use std::fmt::Write as _;
use std::path::Path;

use sha2::{Digest, Sha256};

/// The files `src/assets.rs` embeds; each must be in the manifest.
const EMBEDDED: &[&str] = &["xterm.js", "xterm.css", "addon-fit.js"];

fn main() {
    let vendor = Path::new("vendor");
    let manifest = vendor.join("MANIFEST");
    println!("cargo:rerun-if-changed={}", manifest.display());
    let text = match std::fs::read_to_string(&manifest) {
        Ok(text) => text,
        Err(e) => fail(&format!("cannot read {}: {e}", manifest.display())),
    };
    let mut listed = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [file, package, version, sha256] = fields[..] else {
            fail(&format!(
                "{}: `{line}` is not `file package version sha256`",
                manifest.display()
            ))
        };
        let path = vendor.join(file);
        println!("cargo:rerun-if-changed={}", path.display());
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) => fail(&format!(
                "cannot read {} ({package} {version}): {e}; restore it with `git checkout -- \
                 krad-web/vendor` or take it anew with `scripts/web-assets --refresh`",
                path.display()
            )),
        };
        let found = hex(&Sha256::digest(&bytes));
        if found != sha256 {
            fail(&format!(
                "{} is not the pinned {package} {version}: its sha256 is {found}, {} says \
                 {sha256}; restore it with `git checkout -- krad-web/vendor`, or take the pins \
                 anew with `scripts/web-assets --refresh`",
                path.display(),
                manifest.display()
            ));
        }
        listed.push(file.to_owned());
    }
    for file in EMBEDDED {
        if !listed.iter().any(|l| l == file) {
            fail(&format!("{} does not list {file}", manifest.display()));
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

/// Stops the build with `message`.
fn fail(message: &str) -> ! {
    eprintln!("krad-web: {message}");
    std::process::exit(1)
}
