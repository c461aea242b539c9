//! The extensions (MCP servers) the config names: the manager that starts them
//! on first use and calls their tools (crate `krad-ext`), made from the
//! `[extensions.NAME]` tables.

use std::path::Path;

use crate::config::Settings;
use krad_ext::{ExtensionManager, Limits, ServerSpec};

/// The manager for the `[extensions.NAME]` tables of the config; a relative
/// `cwd` is taken from the repository, a missing one is the repository.
pub(crate) fn manager(settings: &Settings) -> ExtensionManager {
    let specs = settings
        .config
        .extensions
        .iter()
        .map(|(name, config)| {
            let spec = ServerSpec {
                command: config.command.clone(),
                args: config.args.clone(),
                env: config.env.clone(),
                cwd: resolve(&settings.root, config.cwd.as_deref()),
            };
            (name.clone(), spec)
        })
        .collect();
    ExtensionManager::new(specs, Limits::default())
}

fn resolve(root: &Path, cwd: Option<&Path>) -> std::path::PathBuf {
    match cwd {
        Some(dir) if dir.is_absolute() => dir.to_path_buf(),
        Some(dir) => root.join(dir),
        None => root.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cwd_is_taken_from_the_repository() {
        let root = Path::new("/repo");
        assert_eq!(resolve(root, None), Path::new("/repo"));
        assert_eq!(
            resolve(root, Some(Path::new("tools"))),
            Path::new("/repo/tools")
        );
        assert_eq!(resolve(root, Some(Path::new("/srv"))), Path::new("/srv"));
    }
}
