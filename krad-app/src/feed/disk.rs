//! What the feed keeps on disk, so that the history outlives the terminal and
//! the app: under its folder, `titles.json` (renamed workspaces and tabs) and
//! `conversations/` (0700) with one meta file (`<terminal>.json`) and one
//! JSON-lines file of items (`<terminal>.jsonl`) per conversation, 0600 each.

use std::collections::{BTreeMap, VecDeque};
use std::io::BufRead;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::events::Item;
use krad_bus::private_file;

/// Which items of a conversation to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Span {
    /// From index `from`, at most `limit`.
    From { from: usize, limit: usize },
    /// The last ones, at most this many.
    Last(usize),
}

/// What a conversation is, besides its items.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Meta {
    /// `c<terminal>`.
    pub conversation: String,
    /// The terminal.
    pub terminal: u64,
    /// Its environment.
    pub workspace: String,
    /// Its profile.
    pub profile: String,
    /// What the phone shows.
    pub title: String,
    /// When it started.
    pub started_at: String,
    /// When its terminal was closed.
    pub ended_at: Option<String>,
    /// Its last turn.
    pub turn: u64,
    /// Items so far.
    pub items: u64,
    /// The agent's own session id, when it reported one (to resume it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

/// `c<terminal>` → the terminal.
pub(crate) fn conversation_terminal(id: &str) -> Option<u64> {
    id.strip_prefix('c')?.parse().ok()
}

/// The titles the phone gave workspaces and tabs.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct Titles {
    pub workspaces: BTreeMap<String, String>,
    pub tabs: BTreeMap<u64, String>,
}

/// The feed's folder.
#[derive(Debug)]
pub(super) struct Disk {
    dir: PathBuf,
}

impl Disk {
    /// The feed's folder `dir`, with its conversations folder made (0700).
    pub(super) fn open(dir: &Path) -> std::io::Result<Disk> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir.join("conversations"))?;
        Ok(Disk {
            dir: dir.to_path_buf(),
        })
    }

    /// The titles kept, or none.
    pub(super) fn titles(&self) -> Titles {
        std::fs::read(self.dir.join("titles.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Keeps the titles.
    pub(super) fn save_titles(&self, titles: &Titles) {
        if let Ok(bytes) = serde_json::to_vec(titles)
            && let Err(e) = private_file::write(&self.dir.join("titles.json"), &bytes)
        {
            tracing::warn!("cannot keep the durable titles: {e}");
        }
    }

    fn conversation(&self, terminal: u64, extension: &str) -> PathBuf {
        self.dir
            .join("conversations")
            .join(format!("{terminal}.{extension}"))
    }

    /// A conversation's meta, as kept.
    pub(super) fn meta(&self, terminal: u64) -> Option<Meta> {
        let bytes = std::fs::read(self.conversation(terminal, "json")).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Keeps a conversation's meta.
    pub(super) fn save_meta(&self, meta: &Meta) {
        let path = self.conversation(meta.terminal, "json");
        match serde_json::to_vec(meta) {
            Ok(bytes) => {
                if let Err(e) = private_file::write(&path, &bytes) {
                    tracing::warn!(terminal = meta.terminal, "cannot keep a conversation: {e}");
                }
            }
            Err(e) => tracing::warn!("cannot encode a conversation: {e}"),
        }
    }

    /// Adds an item to a conversation's file.
    pub(super) fn append_item(&self, terminal: u64, item: &Item) {
        if let Err(e) = private_file::append_json_line(&self.conversation(terminal, "jsonl"), item)
        {
            tracing::warn!(terminal, "cannot keep a conversation item: {e}");
        }
    }

    /// The items of a conversation that `span` says.
    pub(super) fn items(&self, terminal: u64, span: Span) -> Vec<Item> {
        let Ok(file) = std::fs::File::open(self.conversation(terminal, "jsonl")) else {
            return Vec::new();
        };
        let lines = std::io::BufReader::new(file)
            .lines()
            .map_while(Result::ok)
            .filter_map(|line| serde_json::from_str::<Item>(&line).ok());
        match span {
            Span::Last(limit) => {
                let mut last: VecDeque<Item> = VecDeque::new();
                for item in lines {
                    last.push_back(item);
                    if last.len() > limit {
                        last.pop_front();
                    }
                }
                last.into()
            }
            Span::From { from, limit } => lines.skip(from).take(limit).collect(),
        }
    }

    /// The terminals of every conversation kept, newest first.
    pub(super) fn terminals(&self) -> Vec<u64> {
        let mut terminals: Vec<u64> = std::fs::read_dir(self.dir.join("conversations"))
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter_map(|e| {
                        e.file_name()
                            .to_str()?
                            .strip_suffix(".json")?
                            .parse::<u64>()
                            .ok()
                    })
                    .collect()
            })
            .unwrap_or_default();
        terminals.sort_unstable_by(|a, b| b.cmp(a));
        terminals
    }
}
