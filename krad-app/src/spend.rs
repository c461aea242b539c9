//! Spend: what each agent's model calls used, from the files its CLI writes — Claude
//! Code's transcript, Codex's rollout file, named by the agent's hooks
//! (Report's `transcript`) — read every [`crate::sampling::PERIOD`] by one task, off the
//! request path, each from where the last read stopped, and priced
//! ([`crate::prices`]). Written into the records without a new rev
//! ([`crate::store::Store::set_spend`]), as the CPU and memory samples are.
//!
//! * Claude Code writes an `assistant` line per content block of a message,
//!   each with the message's `usage`: a message counts once, by its id, with
//!   the last usage seen for it.
//! * Codex writes `event_msg` lines of type `token_count` whose
//!   `total_token_usage` is the session's so far (its `input_tokens` include
//!   the `cached_input_tokens`); what grew since the last one is the model's
//!   of the last `turn_context`.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use krad_bus::protocol::{Dollars, Tokens};
use serde::Deserialize;

use crate::prices::{Counts, Prices};
use std::sync::Weak;

use crate::budget::Budgets;
use crate::store::Store;

/// The config's `[prices]`: a model's name to its price.
pub(crate) type PriceList = std::collections::BTreeMap<String, crate::prices::Price>;

/// At most this much of a file is read at once (the rest at the next period).
const MAX_READ: u64 = 16 << 20;

/// One file of an agent's model calls, read so far.
#[derive(Debug, Default)]
pub(crate) struct Meter {
    path: PathBuf,
    /// Bytes read and taken (up to the last whole line).
    offset: u64,
    /// Claude Code: each message's model and usage, by message id.
    messages: HashMap<String, (String, Counts)>,
    /// Codex: the session's totals at the last `token_count`, and the model
    /// of the last `turn_context`.
    codex_total: Counts,
    codex_model: Option<String>,
    /// Codex: what each model used.
    by_model: HashMap<String, Counts>,
    /// The model of the last call.
    last_model: Option<String>,
}

/// The parts of a line krad reads; every other field is ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Line {
    #[serde(rename = "type")]
    kind: String,
    /// Claude Code's `assistant` lines.
    message: Option<ClaudeMessage>,
    /// Codex's `turn_context` and `event_msg` lines.
    payload: Option<CodexPayload>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ClaudeMessage {
    id: Option<String>,
    model: Option<String>,
    usage: Option<ClaudeUsage>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ClaudeUsage {
    input_tokens: u64,
    output_tokens: u64,
    cache_creation_input_tokens: u64,
    cache_read_input_tokens: u64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct CodexPayload {
    #[serde(rename = "type")]
    kind: Option<String>,
    model: Option<String>,
    info: Option<CodexInfo>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct CodexInfo {
    total_token_usage: Option<CodexUsage>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct CodexUsage {
    input_tokens: u64,
    cached_input_tokens: u64,
    cache_write_input_tokens: u64,
    output_tokens: u64,
}

impl Meter {
    /// A meter of `path`, nothing read yet.
    pub(crate) fn new(path: PathBuf) -> Meter {
        Meter {
            path,
            ..Meter::default()
        }
    }

    /// Reads what was added to the file since the last call; whether any of
    /// it counted. A file now shorter than what was read was replaced: it is
    /// read again from its start.
    pub(crate) fn read_new(&mut self) -> bool {
        let Ok(mut file) = std::fs::File::open(&self.path) else {
            return false;
        };
        let Ok(meta) = file.metadata() else {
            return false;
        };
        if !meta.is_file() || meta.len() == self.offset {
            return false;
        }
        if meta.len() < self.offset {
            *self = Meter::new(std::mem::take(&mut self.path));
        }
        if file.seek(SeekFrom::Start(self.offset)).is_err() {
            return false;
        }
        let mut bytes = Vec::new();
        if file.take(MAX_READ).read_to_end(&mut bytes).is_err() {
            return false;
        }
        // Only whole lines: a line being written is read at the next call.
        let Some(end) = bytes.iter().rposition(|&b| b == b'\n') else {
            return false;
        };
        self.offset += end as u64 + 1;
        let mut counted = false;
        for line in bytes[..end].split(|&b| b == b'\n') {
            counted |= self.take_line(line);
        }
        counted
    }

    /// Takes one line; whether it counted.
    fn take_line(&mut self, line: &[u8]) -> bool {
        // Cheap filters first: most lines are neither.
        let has = |needle: &[u8]| line.windows(needle.len()).any(|w| w == needle);
        if !has(b"usage") && !has(b"turn_context") {
            return false;
        }
        let Ok(line) = serde_json::from_slice::<Line>(line) else {
            return false;
        };
        match line.kind.as_str() {
            "assistant" => self.take_claude(line.message.unwrap_or_default()),
            "turn_context" => {
                let model = line.payload.and_then(|p| p.model);
                if model.is_some() {
                    self.codex_model = model;
                }
                false
            }
            "event_msg" => self.take_codex(line.payload.unwrap_or_default()),
            _ => false,
        }
    }

    fn take_claude(&mut self, message: ClaudeMessage) -> bool {
        let (Some(id), Some(usage)) = (message.id, message.usage) else {
            return false;
        };
        let model = message.model.unwrap_or_default();
        let counts = Counts {
            input: usage.input_tokens,
            output: usage.output_tokens,
            cache_write: usage.cache_creation_input_tokens,
            cache_read: usage.cache_read_input_tokens,
        };
        if !model.is_empty() {
            self.last_model = Some(model.clone());
        }
        let new = (model, counts);
        let changed = self.messages.get(&id) != Some(&new);
        self.messages.insert(id, new);
        changed
    }

    fn take_codex(&mut self, payload: CodexPayload) -> bool {
        if payload.kind.as_deref() != Some("token_count") {
            return false;
        }
        let Some(total) = payload.info.and_then(|i| i.total_token_usage) else {
            return false;
        };
        let total = Counts {
            input: total.input_tokens.saturating_sub(total.cached_input_tokens),
            output: total.output_tokens,
            cache_write: total.cache_write_input_tokens,
            cache_read: total.cached_input_tokens,
        };
        let grown = total.since(self.codex_total);
        self.codex_total = total;
        if grown == Counts::default() {
            return false;
        }
        let model = self.codex_model.clone().unwrap_or_default();
        if !model.is_empty() {
            self.last_model = Some(model.clone());
        }
        let used = self.by_model.entry(model).or_default();
        *used = used.plus(grown);
        true
    }

    /// What each model used, per this file.
    fn by_model(&self) -> HashMap<String, Counts> {
        let mut sums = self.by_model.clone();
        for (model, counts) in self.messages.values() {
            let sum = sums.entry(model.clone()).or_default();
            *sum = sum.plus(*counts);
        }
        sums
    }
}

/// The tokens of a terminal's meters, priced: the sums of every model's, and
/// their cost when every model used has a price.
pub(crate) fn priced(meters: &[Meter], prices: &Prices) -> Tokens {
    let mut by_model: HashMap<String, Counts> = HashMap::new();
    for meter in meters {
        for (model, counts) in meter.by_model() {
            let sum = by_model.entry(model).or_default();
            *sum = sum.plus(counts);
        }
    }
    let mut total = Counts::default();
    let mut cost = Some(Dollars(0));
    let mut unpriced: Vec<&str> = Vec::new();
    for (model, counts) in &by_model {
        total = total.plus(*counts);
        match prices.of(model) {
            Some(price) => {
                cost = cost.map(|c| Dollars(c.0 + price.cost(*counts).0));
            }
            None => {
                unpriced.push(if model.is_empty() { "(unnamed)" } else { model });
                cost = None;
            }
        }
    }
    unpriced.sort_unstable();
    Tokens {
        input: total.input,
        output: total.output,
        cache_write: total.cache_write,
        cache_read: total.cache_read,
        model: meters.iter().rev().find_map(|m| m.last_model.clone()),
        cost_usd: cost,
        cost_unknown: (!unpriced.is_empty()).then(|| {
            format!(
                "no price for {}: add [prices.\"{}\"] to the config (docs/agents.md, \"What agents cost\")",
                unpriced.join(", "),
                unpriced[0]
            )
        }),
    }
}

/// Each terminal's meters, one per file its hooks named.
type Meters = HashMap<u64, Vec<Meter>>;

/// The spend reader between two samples: its meters and the prices.
pub(crate) struct Reader {
    meters: Meters,
    prices: Prices,
}

impl Reader {
    /// A reader pricing with the config's `[prices]`.
    pub(crate) fn new(prices: &PriceList) -> Reader {
        Reader {
            meters: Meters::new(),
            prices: Prices::with(prices),
        }
    }

    /// Reads the terminals' files once (off the runtime's workers) and
    /// writes what changed into their records; `None` once the app's core is
    /// gone.
    pub(crate) async fn sample(
        &mut self,
        store: &Weak<Store>,
        budgets: &Weak<Budgets>,
    ) -> Option<()> {
        let targets = store.upgrade()?.spend_targets();
        if targets.is_empty() {
            self.meters.clear();
            return Some(());
        }
        let mut meters = std::mem::take(&mut self.meters);
        let prices = self.prices.clone();
        let (back, tokens) = tokio::task::spawn_blocking(move || {
            let tokens = read_all(&mut meters, &targets, &prices);
            (meters, tokens)
        })
        .await
        .ok()?;
        self.meters = back;
        let changed: Vec<u64> = tokens.iter().map(|(id, _)| *id).collect();
        store.upgrade()?.set_spend(tokens);
        budgets.upgrade()?.check(&changed).await;
        Some(())
    }
}

/// Reads each target's files (id and paths): the tokens of those that changed.
fn read_all(
    meters: &mut Meters,
    targets: &[(u64, Vec<PathBuf>)],
    prices: &Prices,
) -> Vec<(u64, Tokens)> {
    meters.retain(|id, _| targets.iter().any(|(t, _)| t == id));
    let mut changed = Vec::new();
    for (id, paths) in targets {
        let mine = meters.entry(*id).or_default();
        for path in paths {
            if !mine.iter().any(|m| m.path == *path) {
                mine.push(Meter::new(path.clone()));
            }
        }
        let mut counted = false;
        for meter in mine.iter_mut() {
            counted |= meter.read_new();
        }
        if counted {
            changed.push((*id, priced(mine, prices)));
        }
    }
    changed
}

/// Whether `path` may be a CLI's file of model calls: absolute, `.jsonl`.
pub(crate) fn acceptable(path: &Path) -> bool {
    path.is_absolute() && path.extension().is_some_and(|e| e == "jsonl")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::io::Write;

    use super::*;

    fn append(path: &Path, text: &str) {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        file.write_all(text.as_bytes()).unwrap();
    }

    #[test]
    fn a_claude_message_counts_once_whatever_lines_carry_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let line = |id: &str, output: u64| {
            format!(
                r#"{{"type":"assistant","message":{{"id":"{id}","model":"claude-sonnet-4-5","usage":{{"input_tokens":10,"output_tokens":{output},"cache_creation_input_tokens":2,"cache_read_input_tokens":3,"new_field":{{}}}}}},"unknown":1}}"#
            ) + "\n"
        };
        append(&path, &line("m1", 1));
        append(&path, &line("m1", 7));
        append(
            &path,
            "{\"type\":\"user\",\"message\":{\"content\":\"hi\"}}\n",
        );
        let mut meter = Meter::new(path.clone());
        assert!(meter.read_new());
        assert!(!meter.read_new(), "nothing new");
        // Half a line waits for its end.
        let second = line("m2", 5);
        append(&path, &second[..20]);
        assert!(!meter.read_new());
        append(&path, &second[20..]);
        assert!(meter.read_new());
        let tokens = priced(&[meter], &Prices::with(&BTreeMap::new()));
        assert_eq!(
            (
                tokens.input,
                tokens.output,
                tokens.cache_write,
                tokens.cache_read
            ),
            (20, 12, 4, 6)
        );
        assert_eq!(tokens.model.as_deref(), Some("claude-sonnet-4-5"));
        // 20 × 3 + 12 × 15 + 4 × 3.75 + 6 × 0.30 millionths.
        assert_eq!(tokens.cost_usd, Some(Dollars(257)));
        assert_eq!(tokens.cost_unknown, None);
    }

    #[test]
    fn codex_totals_grow_per_model_and_an_unknown_model_has_no_cost() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rollout.jsonl");
        let count = |input: u64, cached: u64, output: u64| {
            format!(
                r#"{{"type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{{"input_tokens":{input},"cached_input_tokens":{cached},"output_tokens":{output},"total_tokens":0}}}}}}}}"#
            ) + "\n"
        };
        append(
            &path,
            r#"{"type":"turn_context","payload":{"model":"gpt-5.1-codex"}}"#,
        );
        append(&path, "\n");
        append(&path, &count(100, 40, 10));
        append(&path, &count(100, 40, 10));
        append(
            &path,
            r#"{"type":"turn_context","payload":{"model":"mystery-1"}}"#,
        );
        append(&path, "\n");
        append(&path, &count(250, 90, 30));
        let mut meter = Meter::new(path);
        assert!(meter.read_new());
        let tokens = priced(&[meter], &Prices::with(&BTreeMap::new()));
        assert_eq!(
            (tokens.input, tokens.output, tokens.cache_read),
            (160, 30, 90)
        );
        assert_eq!(tokens.model.as_deref(), Some("mystery-1"));
        assert_eq!(tokens.cost_usd, None);
        assert!(
            tokens
                .cost_unknown
                .as_deref()
                .unwrap()
                .contains("mystery-1"),
            "{tokens:?}"
        );
    }

    #[test]
    fn a_file_replaced_by_a_shorter_one_is_read_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let line = r#"{"type":"assistant","message":{"id":"a","model":"m","usage":{"input_tokens":1000,"output_tokens":1}}}"#;
        append(
            &path,
            &format!("{line}\n{}\n", line.replace("\"a\"", "\"b\"")),
        );
        let mut meter = Meter::new(path.clone());
        assert!(meter.read_new());
        std::fs::write(&path, format!("{}\n", line.replace("1000", "5"))).unwrap();
        assert!(meter.read_new());
        let tokens = priced(&[meter], &Prices::with(&BTreeMap::new()));
        assert_eq!(tokens.input, 5);
    }
}
