//! Link options of the `krad` binary.
//!
//! On Linux it is linked as a position-dependent executable (`-no-pie`). As a
//! PIE, every start had the dynamic loader apply ~10,600 relative relocations,
//! writing to each of the ~76 pages of `.data.rel.ro` and the GOT: 76 of the
//! ~200 page faults of `krad api`, each a copy of a page, and their teardown at
//! exit (docs/PERFORMANCE.md, "Issue 16, third pass"). Linked at a fixed
//! address those pages stay the file's, untouched until read. The shared
//! libraries, the stack and the heap are still placed at random; the binary's
//! own code and data no longer are.
//!
//! A static build (`scripts/build-release`: `crt-static` with the `static`
//! relocation model) is position-dependent already; there `-no-pie` is left
//! to rustc, which would otherwise link a static PIE that the flag breaks.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let features = std::env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    let static_crt = features.split(',').any(|f| f == "crt-static");
    if os == "linux" && !static_crt {
        println!("cargo::rustc-link-arg-bin=krad=-no-pie");
    }
}
