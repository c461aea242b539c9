//! Changes: everything an environment did since the commit it was created from —
//! commits, staged, unstaged and untracked files — without touching its index or
//! its files.
//!
//! The working tree is snapshotted into a tree object through a temporary index
//! (see [`super::snapshot`]). The environment's own index and files are never
//! written; only objects are added to the store.

use std::collections::BTreeMap;

use krad_bus::protocol::{ApiError, ChangesInfo, ErrorCode, FileChange, FileStatus, MAX_RESPONSE};

use super::{Environments, MAIN, not_found_environment, present_git};
use crate::git::Git;
use crate::records::Phase;

/// Room kept in the answer line for everything but the patch.
const PATCH_ROOM: usize = MAX_RESPONSE - 1024 * 1024;

impl Environments {
    /// Changes of the environment `name`: main's uncommitted work (against
    /// its HEAD), or what a worktree did since the commit it was created
    /// from. One being created is `unavailable`, one whose directory is gone
    /// a `conflict`.
    pub(crate) async fn changes(
        &self,
        name: &str,
        with_patch: bool,
    ) -> Result<ChangesInfo, ApiError> {
        let (git, base) = if name == MAIN {
            let git = Git::new(&self.settings.root);
            let head = git
                .commit_of("HEAD")
                .await?
                .ok_or_else(|| ApiError::new(ErrorCode::Conflict, "main has no commit yet"))?;
            (git, head)
        } else {
            let record = self
                .store
                .environment(name)
                .ok_or_else(|| not_found_environment(name))?;
            if record.phase == Phase::Creating {
                return Err(ApiError::new(
                    ErrorCode::Unavailable,
                    format!(
                        "environment {name:?} is being created (git worktree add runs): \
                         ask again in a moment"
                    ),
                ));
            }
            (present_git(self, &record)?, record.base)
        };
        changes(name, &git, &base, with_patch).await
    }
}

/// The changes of the environment `git` runs in, since `base`.
pub(crate) async fn changes(
    environment: &str,
    git: &Git,
    base: &str,
    with_patch: bool,
) -> Result<ChangesInfo, ApiError> {
    let snapshot = super::tree_state::snapshot(git).await?;
    let (head, tree) = (snapshot.head, snapshot.tree);
    let numstat = git
        .bytes(&["diff", "--numstat", "-z", "-M", base, tree.as_str()])
        .await?;
    let name_status = git
        .bytes(&["diff", "--name-status", "-z", "-M", base, tree.as_str()])
        .await?;
    let files = merge(parse_name_status(&name_status), parse_numstat(&numstat));
    let (patch, truncated) = if with_patch {
        let bytes = git
            .bytes(&[
                "diff",
                "-M",
                "--no-color",
                "--no-ext-diff",
                base,
                tree.as_str(),
            ])
            .await?;
        let (text, cut) = cut(String::from_utf8_lossy(&bytes).into_owned(), PATCH_ROOM);
        (Some(text), cut)
    } else {
        (None, false)
    };
    Ok(ChangesInfo {
        environment: environment.to_owned(),
        base: base.to_owned(),
        head,
        files,
        patch,
        truncated,
    })
}

/// `--name-status -z`: status, then one path (two for renames and copies).
fn parse_name_status(out: &[u8]) -> Vec<(FileStatus, Option<String>, String)> {
    let mut tokens = out
        .split(|&b| b == 0)
        .map(|t| String::from_utf8_lossy(t).into_owned());
    let mut files = Vec::new();
    while let Some(status) = tokens.next() {
        if status.is_empty() {
            continue;
        }
        let kind = status.as_bytes()[0];
        let (state, from) = match kind {
            b'R' | b'C' => (FileStatus::Renamed, tokens.next()),
            b'A' => (FileStatus::Added, None),
            b'D' => (FileStatus::Deleted, None),
            _ => (FileStatus::Modified, None),
        };
        let Some(path) = tokens.next() else { break };
        let state = if kind == b'C' {
            FileStatus::Added
        } else {
            state
        };
        files.push((state, from, path));
    }
    files
}

/// `--numstat -z`: `added\tremoved\tpath\0`, or `added\tremoved\t\0from\0to\0`
/// for a rename; `-\t-\t` for a binary file. Keyed by the path now.
fn parse_numstat(out: &[u8]) -> BTreeMap<String, (Option<u64>, Option<u64>)> {
    let mut tokens = out
        .split(|&b| b == 0)
        .map(|t| String::from_utf8_lossy(t).into_owned());
    let mut counts = BTreeMap::new();
    while let Some(token) = tokens.next() {
        if token.is_empty() {
            continue;
        }
        let mut parts = token.splitn(3, '\t');
        let added = parts.next().and_then(|a| a.parse().ok());
        let removed = parts.next().and_then(|r| r.parse().ok());
        let path = match parts.next() {
            Some(path) if !path.is_empty() => path.to_owned(),
            _ => {
                let _from = tokens.next();
                match tokens.next() {
                    Some(to) => to,
                    None => break,
                }
            }
        };
        counts.insert(path, (added, removed));
    }
    counts
}

fn merge(
    statuses: Vec<(FileStatus, Option<String>, String)>,
    counts: BTreeMap<String, (Option<u64>, Option<u64>)>,
) -> Vec<FileChange> {
    let mut files: Vec<FileChange> = statuses
        .into_iter()
        .map(|(status, from, path)| {
            let (added, removed) = counts.get(&path).copied().unwrap_or((Some(0), Some(0)));
            FileChange {
                binary: added.is_none() && removed.is_none(),
                added: added.unwrap_or(0),
                removed: removed.unwrap_or(0),
                path,
                from,
                status,
            }
        })
        .collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files
}

/// Cuts text to at most `max` bytes on a char boundary.
pub(crate) fn cut(mut text: String, max: usize) -> (String, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    (text, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_renames_binaries_and_plain_files() {
        let ns = b"M\0src/a.rs\0R087\0old.txt\0new.txt\0A\0img.png\0D\0gone\0";
        let num = b"3\t1\tsrc/a.rs\0" as &[u8];
        let num = [
            num,
            b"1\t1\t\0old.txt\0new.txt\0-\t-\timg.png\0" as &[u8],
            b"0\t4\tgone\0",
        ]
        .concat();
        let files = merge(parse_name_status(ns), parse_numstat(&num));
        let by = |p: &str| files.iter().find(|f| f.path == p).unwrap().clone();
        assert_eq!((by("src/a.rs").added, by("src/a.rs").removed), (3, 1));
        assert_eq!(by("new.txt").status, FileStatus::Renamed);
        assert_eq!(by("new.txt").from.as_deref(), Some("old.txt"));
        assert!(by("img.png").binary);
        assert_eq!(by("gone").status, FileStatus::Deleted);
        assert_eq!(by("gone").removed, 4);
    }

    #[test]
    fn cuts_on_a_char_boundary() {
        assert_eq!(cut("héllo".into(), 2), ("h".into(), true));
        assert_eq!(cut("ok".into(), 10), ("ok".into(), false));
    }
}
