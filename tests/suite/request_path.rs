//! A Spawn's path from socket to answer, measured, is the list
//! docs/ARCHITECTURE.md gives: `scripts/request-path --check` starts the
//! suite's `krad` on a throwaway repository, attaches gdb with a counting
//! breakpoint on every function of the app's crates, sends one Spawn, and
//! compares the files whose functions ran under the bus's connection with the
//! document's list.

use std::path::Path;
use std::process::Command;

use crate::support::KRAD;

#[test]
fn a_spawn_runs_in_the_files_architecture_md_lists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new(root.join("scripts/request-path"))
        .args(["--binary", KRAD, "--check", "docs/ARCHITECTURE.md"])
        .current_dir(&root)
        .output()
        .expect("scripts/request-path runs (python3)");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
