//! A repository's identity on this machine: its git common directory,
//! canonicalized, so that the repository reached from a worktree, from a
//! subdirectory or through a symlink is the same one. Found by reading the
//! `.git` entries themselves (no `git` process: every CLI call asks), as git
//! lays them out: a `.git` directory, or a `.git` file naming the worktree's
//! git directory, whose `commondir` names the shared one.
//!
//! Knows nothing of apps, locks or the bus.

use std::path::{Path, PathBuf};

/// The folder of krad's files in a repository's git common directory (the
/// app's store, its lock, its discovery file).
pub(crate) fn krad_dir(common_dir: &Path) -> PathBuf {
    common_dir.join("krad")
}

/// The canonical git common directory of the repository `dir` is in, or
/// `None` when `dir` is in none (or cannot be read).
pub(crate) fn common_dir_of(dir: &Path) -> Option<PathBuf> {
    let dir = dir.canonicalize().ok()?;
    for at in dir.ancestors() {
        let dot_git = at.join(".git");
        let Ok(meta) = std::fs::metadata(&dot_git) else {
            continue;
        };
        let git_dir = if meta.is_dir() {
            dot_git
        } else {
            linked_git_dir(&dot_git, at)?
        };
        return common_of_git_dir(&git_dir);
    }
    None
}

/// The git directory a `.git` file (`gitdir: PATH`) names, relative to the
/// folder holding the file.
fn linked_git_dir(file: &Path, folder: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(file).ok()?;
    let named = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
    Some(folder.join(named))
}

/// The shared git directory of `git_dir`: its `commondir` (a linked
/// worktree's), else itself; canonicalized.
fn common_of_git_dir(git_dir: &Path) -> Option<PathBuf> {
    let common = match std::fs::read_to_string(git_dir.join("commondir")) {
        Ok(text) => git_dir.join(text.trim_end_matches(['\n', '\r'])),
        Err(_) => git_dir.to_path_buf(),
    };
    common.canonicalize().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t.invalid")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t.invalid")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// The common directory as git itself says, canonicalized.
    fn gits_answer(dir: &Path) -> PathBuf {
        PathBuf::from(git(
            dir,
            &["rev-parse", "--path-format=absolute", "--git-common-dir"],
        ))
        .canonicalize()
        .unwrap()
    }

    #[test]
    fn a_subdirectory_a_worktree_and_a_symlink_reach_the_same_repository() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(repo.join("src/deep")).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        git(&repo, &["commit", "-q", "--allow-empty", "-m", "first"]);
        let worktree = tmp.path().join("wt");
        git(
            &repo,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                "side",
                worktree.to_str().unwrap(),
            ],
        );
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&repo, &link).unwrap();

        let expected = gits_answer(&repo);
        assert_eq!(common_dir_of(&repo), Some(expected.clone()));
        assert_eq!(
            common_dir_of(&repo.join("src/deep")),
            Some(expected.clone())
        );
        assert_eq!(common_dir_of(&worktree), Some(expected.clone()));
        assert_eq!(gits_answer(&worktree), expected);
        assert_eq!(common_dir_of(&link.join("src")), Some(expected));
    }

    #[test]
    fn a_folder_outside_any_repository_has_none() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(common_dir_of(tmp.path()), None);
        assert_eq!(common_dir_of(&tmp.path().join("missing")), None);
    }
}
