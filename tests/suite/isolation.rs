//! The suite keeps to itself: every app it starts has a HOME and a git identity
//! of its own, and no test names a fixed port. (`scripts/test` runs the whole
//! suite with an empty HOME of its own and its own git identity on top.)

use std::path::Path;

use crate::support::App;

/// The environment of a running process, as `NAME=value` strings.
fn environ(pid: u32) -> Vec<String> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    raw.split(|b| *b == 0)
        .filter(|v| !v.is_empty())
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect()
}

#[test]
fn apps_and_their_terminals_get_a_home_and_git_identity_of_their_own() {
    let app = App::start();
    let env = environ(app.pid);
    let get = |name: &str| {
        env.iter()
            .find_map(|v| v.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("{name} not set for the app"))
            .to_owned()
    };
    let home = get("HOME");
    assert!(
        Path::new(&home).starts_with(app.dir.path()),
        "the app's HOME {home} is not the test's own"
    );
    assert!(Path::new(&get("GIT_CONFIG_GLOBAL")).starts_with(app.dir.path()));
    assert!(Path::new(&get("XDG_CONFIG_HOME")).starts_with(app.dir.path()));
    // Its terminals inherit it: a shell's history lands there, not in yours.
    let id = app.spawn_sh("echo \"home=$HOME\"; git config user.email; sleep 30");
    let screen = app.until_screen(id, "krad.invalid");
    assert!(screen.contains(&format!("home={home}")), "{screen}");
}

#[test]
fn no_test_names_a_fixed_port() {
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/suite");
    let mut found = Vec::new();
    let sources = crate::support::files_under(&suite);
    assert!(sources.len() > 10, "the suite's files: {sources:?}");
    for path in sources
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
    {
        let text = std::fs::read_to_string(path).unwrap();
        for (n, line) in text.lines().enumerate() {
            for address in ["127.0.0.1:", "localhost:"] {
                let Some(at) = line.find(address) else {
                    continue;
                };
                let port: String = line[at + address.len()..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                if !port.is_empty() && port != "0" && port != "1" {
                    found.push(format!("{}:{}: {line}", path.display(), n + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "fixed ports (bind port 0 instead): {found:#?}"
    );
}
