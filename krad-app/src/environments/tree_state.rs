//! Tree states: an environment's working tree — committed and uncommitted work,
//! untracked files included, ignored files left out — as a tree object, without
//! touching its index or its files; and the merges of snapshots, worked out by
//! `git merge-tree` on objects alone.
//!
//! The working tree is staged into a temporary index (`GIT_INDEX_FILE`) in the
//! environment's git directory: a copy of the environment's own index, or of
//! the one krad kept from the last snapshot when that is newer (so `git add -A`
//! only re-reads files whose stat changed; `read-tree HEAD` when neither can be
//! copied), then `add -A`, `write-tree`; the temporary index is kept for the
//! next snapshot (`krad-snapshot-index`, removed with the worktree). Only
//! objects are added to the store; the environment's own index is only read.
//! A snapshot with uncommitted work gets a commit of its own on top of HEAD
//! (dangling: no ref, no reflog names it), so that git finds merge bases for it;
//! its author, committer and dates are fixed, so the same work makes the same
//! commit and polling adds nothing new.

use std::path::PathBuf;

use krad_bus::protocol::{ApiError, ErrorCode};

use crate::git::Git;

/// An environment's working tree at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TreeState {
    /// Its HEAD's commit.
    pub head: String,
    /// Its HEAD's tree.
    pub head_tree: String,
    /// The working tree, as a tree object.
    pub tree: String,
}

impl TreeState {
    /// Whether there is uncommitted work (the working tree differs from HEAD).
    pub(crate) fn uncommitted(&self) -> bool {
        self.tree != self.head_tree
    }

    /// A commit of the snapshot: HEAD itself when nothing is uncommitted,
    /// otherwise a dangling commit of the tree on top of HEAD.
    pub(crate) async fn commit(&self, git: &Git) -> Result<String, ApiError> {
        if !self.uncommitted() {
            return Ok(self.head.clone());
        }
        let mut git = git.clone();
        for (key, value) in [
            ("GIT_AUTHOR_NAME", "krad"),
            ("GIT_AUTHOR_EMAIL", "krad@localhost"),
            ("GIT_AUTHOR_DATE", FIXED_DATE),
            ("GIT_COMMITTER_NAME", "krad"),
            ("GIT_COMMITTER_EMAIL", "krad@localhost"),
            ("GIT_COMMITTER_DATE", FIXED_DATE),
        ] {
            git = git.with_env(key, value);
        }
        Ok(git
            .text(&[
                "commit-tree",
                self.tree.as_str(),
                "-p",
                self.head.as_str(),
                "-m",
                "krad: snapshot of uncommitted work",
            ])
            .await?)
    }
}

/// The date of every snapshot commit (so the same work is the same commit).
const FIXED_DATE: &str = "1700000000 +0000";

/// The index krad keeps of each environment's working tree (in its git
/// directory, beside its own index): refreshed at every snapshot, so the next
/// one re-reads only the files whose stat changed, also where the
/// environment's own index was never refreshed (a worktree just checked out
/// leaves every entry "racily clean", to be re-hashed on every read).
const KEPT_INDEX: &str = "krad-snapshot-index";

/// Snapshots the environment `git` runs in.
pub(crate) async fn snapshot(git: &Git) -> Result<TreeState, ApiError> {
    let name = format!("krad-index-{}-{}", std::process::id(), unique());
    let asked = git
        .text(&[
            "rev-parse",
            "HEAD",
            "HEAD^{tree}",
            "--path-format=absolute",
            "--git-path",
            "index",
            "--git-path",
            KEPT_INDEX,
            "--git-path",
            name.as_str(),
        ])
        .await;
    let facts = match asked {
        Ok(facts) => facts,
        // Asked only once it failed, so that a snapshot costs no more git.
        Err(_) if git.commit_of("HEAD").await.is_ok_and(|c| c.is_none()) => {
            return Err(ApiError::new(
                ErrorCode::Conflict,
                "no commit yet: commit something first",
            ));
        }
        Err(error) => return Err(error.into()),
    };
    let mut lines = facts.lines().map(PathBuf::from);
    let (Some(head), Some(head_tree), Some(index), Some(kept), Some(temporary)) = (
        lines.next(),
        lines.next(),
        lines.next(),
        lines.next(),
        lines.next(),
    ) else {
        return Err(ApiError::new(
            ErrorCode::Failed,
            format!("git rev-parse answered something unexpected: {facts:?}"),
        ));
    };
    // Start from whichever is newer: the environment's own index (the user
    // staged, committed, changed what is sparse) or the one kept last time.
    let copied = git.copy_newest(&[&index, &kept], &temporary).await;
    let tree = stage(git, &temporary, copied).await;
    if tree.is_ok() && git.rename_file(&temporary, &kept).await {
        // Kept for the next snapshot.
    } else {
        git.remove_file(&temporary).await;
    }
    Ok(TreeState {
        head: head.display().to_string(),
        head_tree: head_tree.display().to_string(),
        tree: tree?,
    })
}

/// Stages the working tree into the temporary index (a copy of an index, or
/// HEAD's tree when there is none) and writes it.
async fn stage(git: &Git, index: &std::path::Path, copied: bool) -> Result<String, ApiError> {
    let git = git.clone().with_env("GIT_INDEX_FILE", index);
    if !copied {
        git.bytes(&["read-tree", "HEAD"]).await?;
    }
    git.bytes(&["add", "-A"]).await?;
    Ok(git.text(&["write-tree"]).await?)
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// What merging two commits (or trees) would give.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Merged {
    /// The merged tree (with conflict markers when there are conflicts).
    pub tree: String,
    /// The files that conflict; empty when the merge is clean.
    pub conflicts: Vec<String>,
}

/// One merge to work out: two commits, and the merge base when it is not the
/// one git would find (a cherry-pick's parent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MergeOf {
    pub ours: String,
    pub theirs: String,
    pub base: Option<String>,
}

impl MergeOf {
    /// `ours` and `theirs`, merged from their merge bases.
    pub(crate) fn new(ours: &str, theirs: &str) -> MergeOf {
        MergeOf {
            ours: ours.to_owned(),
            theirs: theirs.to_owned(),
            base: None,
        }
    }
}

/// Works out one merge with `git merge-tree --write-tree`, touching no worktree.
pub(crate) async fn merge(git: &Git, merge: &MergeOf) -> Result<Merged, ApiError> {
    let base = merge.base.as_ref().map(|b| format!("--merge-base={b}"));
    let mut args = vec![
        "merge-tree",
        "--write-tree",
        "--name-only",
        "--no-messages",
        "-z",
    ];
    args.extend(base.as_deref());
    args.extend([merge.ours.as_str(), merge.theirs.as_str()]);
    let (code, out, err) = git.output(&args, None).await?;
    let mut tokens = out
        .split(|&b| b == 0)
        .map(|t| String::from_utf8_lossy(t).trim_end_matches('\n').to_owned());
    let tree = tokens.next().unwrap_or_default();
    match code {
        Some(0) => Ok(Merged {
            tree,
            conflicts: Vec::new(),
        }),
        Some(1) => Ok(Merged {
            tree,
            conflicts: tokens.take_while(|p| !p.is_empty()).collect(),
        }),
        _ => Err(merge_tree_failed(&String::from_utf8_lossy(&err))),
    }
}

/// Works out many merges in one `git merge-tree --stdin` (one process for all
/// of them); one by one where git is too old for `--stdin`.
pub(crate) async fn merge_all(git: &Git, merges: &[MergeOf]) -> Result<Vec<Merged>, ApiError> {
    if merges.is_empty() {
        return Ok(Vec::new());
    }
    let mut input = String::new();
    for m in merges {
        if let Some(base) = &m.base {
            input.push_str(base);
            input.push_str(" -- ");
        }
        input.push_str(&format!("{} {}\n", m.ours, m.theirs));
    }
    let (code, out, err) = git
        .output(
            &["merge-tree", "--stdin", "--name-only", "--no-messages"],
            Some(input.as_bytes()),
        )
        .await?;
    if code == Some(0)
        && let Some(merged) = parse_stdin_merges(&out, merges.len())
    {
        return Ok(merged);
    }
    let err = String::from_utf8_lossy(&err);
    if code == Some(129) || err.contains("usage:") || err.contains("unknown option") {
        // An older git: one merge at a time.
        let mut merged = Vec::with_capacity(merges.len());
        for m in merges {
            merged.push(merge(git, m).await?);
        }
        return Ok(merged);
    }
    Err(merge_tree_failed(&err))
}

/// `merge-tree --stdin -z` output: per merge, `<1 clean | 0 conflicts>\0<tree>\0`,
/// the conflicting paths each `\0`-ended, then an empty entry.
fn parse_stdin_merges(out: &[u8], count: usize) -> Option<Vec<Merged>> {
    let mut tokens = out
        .split(|&b| b == 0)
        .map(|t| String::from_utf8_lossy(t).into_owned());
    let mut merged = Vec::with_capacity(count);
    for _ in 0..count {
        let status = tokens.next()?;
        let tree = tokens.next()?;
        let mut conflicts = Vec::new();
        loop {
            let path = tokens.next()?;
            if path.is_empty() {
                break;
            }
            conflicts.push(path);
        }
        if status == "1" && !conflicts.is_empty() {
            return None;
        }
        merged.push(Merged { tree, conflicts });
    }
    Some(merged)
}

fn merge_tree_failed(stderr: &str) -> ApiError {
    ApiError::new(
        ErrorCode::Failed,
        format!("git merge-tree failed: {}", stderr.trim()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdin_merges_parse_clean_and_conflicting() {
        let out = b"1\0aaaa\0\x000\0bbbb\0f\0dir/g\0\0";
        let merged = parse_stdin_merges(out, 2).unwrap();
        assert_eq!(merged[0].tree, "aaaa");
        assert!(merged[0].conflicts.is_empty());
        assert_eq!(merged[1].conflicts, ["f", "dir/g"]);
        assert!(parse_stdin_merges(out, 3).is_none(), "too short");
    }
}
