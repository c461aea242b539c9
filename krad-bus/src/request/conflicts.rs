//! `Conflicts`: whether the environments' work merges cleanly, foreseen.

use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::create_worktree::check_name;
use super::{Call, RequestKind, Rights, deadline};
use crate::protocol::{ApiError, ConflictsInfo};

/// The Conflicts request.
///
/// For every pair of environments (main and the live worktrees, or the ones
/// named), and each against its base environment's current tip: whether their
/// work — committed and uncommitted — merges cleanly, and the files that
/// conflict. Computed with `git merge-tree` on snapshots: no worktree, index or
/// ref is touched.
///
/// # Format
///
/// ```json
/// "Conflicts"
/// {"Conflicts":{"environments":["main","fix-login","spike"]}}
/// {"Conflicts":{"environments":[{"name":"main",…},{"name":"fix-login",…,"base":{"environment":"main","tip":"3f2a…","clean":true,"files":[]}}],
///               "pairs":[{"a":"main","b":"fix-login","clean":false,"files":["src/login.rs"]}]}}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Conflicts {
    /// The environments to compare (default: main and every worktree).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environments: Option<Vec<String>>,
}

/// At most this many environments may be named.
pub const MAX_ENVIRONMENTS: usize = 256;

impl Call for Conflicts {
    const KIND: RequestKind = RequestKind::Conflicts;
    const RIGHTS: Rights = Rights::Anyone;
    const AT_MOST_ONCE: bool = false;
    type Answer = ConflictsInfo;

    fn deadline(&self) -> Option<Duration> {
        Some(deadline::LONG)
    }

    fn validate(&self) -> Result<(), ApiError> {
        let Some(names) = &self.environments else {
            return Ok(());
        };
        if names.is_empty() || names.len() > MAX_ENVIRONMENTS {
            return Err(Self::KIND.invalid(
                "environments",
                format!("name 1 to {MAX_ENVIRONMENTS} environments, or leave it out for all"),
            ));
        }
        for name in names {
            check_name(Self::KIND, "environments", name)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ErrorCode;

    #[test]
    fn names_are_checked() {
        let ok = Conflicts {
            environments: Some(vec!["main".into(), "fix-login".into()]),
        };
        assert!(ok.validate().is_ok());
        assert!(Conflicts::default().validate().is_ok());
        for bad in [vec![], vec!["../x".to_owned()]] {
            let e = Conflicts {
                environments: Some(bad),
            }
            .validate()
            .unwrap_err();
            assert_eq!(e.code, ErrorCode::Invalid);
        }
    }
}
