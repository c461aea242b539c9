//! Merged by content: a branch whose commits no other branch has may still be
//! in its target already — squash-merged (one commit with the same change) or
//! cherry-picked (commits with the same patches). Recognised by `git patch-id
//! --stable` against the target's commits since the merge-base, or, failing
//! that, by tree equality: merging it into the target would change nothing.

use crate::git::Git;

/// Why `tip`'s work is already in `target` by content, or `None` when it is
/// not (or git cannot tell: then it counts as unmerged).
pub(crate) async fn merged_by_content(root: &Git, tip: &str, target: &str) -> Option<String> {
    let base = root.text(&["merge-base", target, tip]).await.ok()?;
    let range = format!("{base}..{tip}");
    let theirs = format!("{base}..{target}");
    let target_ids = patch_ids(root, &["log", "-p", "--no-merges", theirs.as_str()]).await?;
    let ours = patch_ids(root, &["log", "-p", "--no-merges", range.as_str()]).await?;
    if !ours.is_empty() && ours.iter().all(|id| target_ids.contains(id)) {
        let commits = match ours.len() {
            1 => "its commit is".to_string(),
            n => format!("its {n} commits are"),
        };
        return Some(format!(
            "{commits} in {target} by patch-id (cherry-picked or rebased)"
        ));
    }
    let whole = patch_ids(root, &["diff", "--binary", base.as_str(), tip]).await?;
    if let Some(id) = whole.first()
        && target_ids.contains(id)
    {
        return Some(format!(
            "its changes are in {target} as one commit by patch-id (squash-merged)"
        ));
    }
    let (code, out, _) = root
        .output(&["merge-tree", "--write-tree", target, tip], None)
        .await
        .ok()?;
    let merged = String::from_utf8_lossy(&out).lines().next()?.to_owned();
    let target_tree = root
        .text(&["rev-parse", &format!("{target}^{{tree}}")])
        .await
        .ok()?;
    if code == Some(0) && merged == target_tree {
        return Some(format!(
            "its changes are already in {target} (merging it would change no file)"
        ));
    }
    None
}

/// The stable patch-ids of what a git command prints as patches.
async fn patch_ids(root: &Git, args: &[&str]) -> Option<Vec<String>> {
    let patches = root.bytes(args).await.ok()?;
    if patches.is_empty() {
        return Some(Vec::new());
    }
    let (code, out, _) = root
        .output(&["patch-id", "--stable"], Some(&patches))
        .await
        .ok()?;
    (code == Some(0)).then(|| {
        String::from_utf8_lossy(&out)
            .lines()
            .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
            .collect()
    })
}
