//! Review comments: lines of an environment's diff with what the user wrote
//! about them, sent to the environment's agent as **one** message (Send,
//! `when: idle`) and kept with the environment, so the next review shows what
//! was asked and at which head (`<git dir>/krad/ui/reviews.json`, 0600).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// More comments than this in one review are refused (one message ≤ 32 KiB).
const MAX_COMMENTS: usize = 200;

/// One comment on one line of a diff.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Comment {
    /// The file.
    pub path: String,
    /// The line in the new file (or the old one, for a removed line).
    pub line: u32,
    /// The line's text as the diff showed it, so the agent sees what is meant.
    #[serde(default)]
    pub code: String,
    /// What the user wrote.
    pub text: String,
}

/// A review as the page sends it.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Draft {
    /// The environment reviewed.
    pub environment: String,
    /// The agent that gets the comments.
    pub target: u64,
    /// The head commit the diff was made at (Changes' `head`).
    #[serde(default)]
    pub head: String,
    /// The comments.
    pub comments: Vec<Comment>,
}

/// A review sent, as kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Review {
    /// The agent it went to.
    pub target: u64,
    /// The head the comments were made at.
    pub head: String,
    /// Seconds since the epoch when it was sent.
    pub sent_at: u64,
    /// The comments.
    pub comments: Vec<Comment>,
}

/// The reviews of every environment, on disk.
#[derive(Debug)]
pub(crate) struct Reviews {
    path: PathBuf,
    lock: Mutex<()>,
}

impl Draft {
    /// What is wrong with it, for the page to show.
    pub(crate) fn problem(&self) -> Option<String> {
        if self.comments.is_empty() {
            return Some("write a comment on a line first".into());
        }
        if self.comments.len() > MAX_COMMENTS {
            return Some(format!("at most {MAX_COMMENTS} comments in one review"));
        }
        self.comments
            .iter()
            .any(|c| c.text.trim().is_empty())
            .then(|| "a comment is empty".into())
    }

    /// The one message the agent gets.
    pub(crate) fn message(&self) -> String {
        let mut text = format!(
            "Review comments on {} ({} comment{}). Please address each one:\n",
            self.environment,
            self.comments.len(),
            if self.comments.len() == 1 { "" } else { "s" }
        );
        for (n, comment) in self.comments.iter().enumerate() {
            text.push_str(&format!("\n{}. {}:{}\n", n + 1, comment.path, comment.line));
            if !comment.code.trim().is_empty() {
                text.push_str(&format!("   > {}\n", comment.code.trim_end()));
            }
            for line in comment.text.trim().lines() {
                text.push_str(&format!("   {line}\n"));
            }
        }
        text
    }
}

impl Reviews {
    /// The reviews kept under `state_dir`.
    pub(crate) fn new(state_dir: &Path) -> Reviews {
        Reviews {
            path: state_dir.join("ui").join("reviews.json"),
            lock: Mutex::new(()),
        }
    }

    /// The reviews sent on `environment`, oldest first.
    pub(crate) fn of(&self, environment: &str) -> Vec<Review> {
        let _held = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.read().remove(environment).unwrap_or_default()
    }

    /// Keeps a review that was sent.
    pub(crate) fn keep(&self, draft: &Draft) -> std::io::Result<Review> {
        let _held = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let mut all = self.read();
        let review = Review {
            target: draft.target,
            head: draft.head.clone(),
            sent_at: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or_default(),
            comments: draft.comments.clone(),
        };
        all.entry(draft.environment.clone())
            .or_default()
            .push(review.clone());
        self.write(&all)?;
        Ok(review)
    }

    fn read(&self) -> BTreeMap<String, Vec<Review>> {
        fs::read(&self.path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    /// Temp file, fsync, rename: a crash leaves the old file or the new one.
    fn write(&self, all: &BTreeMap<String, Vec<Review>>) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(all).map_err(std::io::Error::other)?;
        krad_bus::private_file::write(&self.path, &bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft() -> Draft {
        Draft {
            environment: "fix".into(),
            target: 3,
            head: "abc".into(),
            comments: vec![
                Comment {
                    path: "src/a.rs".into(),
                    line: 4,
                    code: "let x = 1;".into(),
                    text: "name it".into(),
                },
                Comment {
                    path: "b.txt".into(),
                    line: 1,
                    code: String::new(),
                    text: "why?".into(),
                },
            ],
        }
    }

    #[test]
    fn all_comments_make_one_message() {
        let message = draft().message();
        assert!(message.contains("2 comments"), "{message}");
        assert!(message.contains("1. src/a.rs:4\n   > let x = 1;\n   name it"));
        assert!(message.contains("2. b.txt:1\n   why?"));
    }

    #[test]
    fn reviews_are_kept_per_environment() {
        let dir = tempfile::tempdir().unwrap();
        let reviews = Reviews::new(dir.path());
        reviews.keep(&draft()).unwrap();
        let kept = Reviews::new(dir.path()).of("fix");
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].comments, draft().comments);
        assert!(Reviews::new(dir.path()).of("other").is_empty());
    }
}
