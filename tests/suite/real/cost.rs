//! What each agent costs, from its own files: the real Claude Code and Codex
//! against the model double, which says distinct token figures for every
//! main request (and others for side requests): the record, `krad ls` and
//! `krad top` show exactly the sums of the main ones, priced.

use serde_json::{Value, json};

use super::{Cli, LONG, RealApp, SentUsage, Turn};

/// The model Claude Code is told to use (each pin has its own default).
const CLAUDE_MODEL: &str = "claude-double-1";

/// Prices of [`CLAUDE_MODEL`] in the config, and the same in the test.
const CLAUDE_PRICES: &str =
    "[prices.claude-double-1]\ninput = 2.0\noutput = 10.0\ncache_write = 2.5\ncache_read = 0.2\n";
const PRICES: (f64, f64, f64, f64) = (2.0, 10.0, 2.5, 0.2);

/// Spawn's fields for `profile`, Claude Code on [`CLAUDE_MODEL`].
fn spawn_fields(profile: &str, prompt: &str) -> Value {
    let mut fields = json!({"profile": profile, "prompt": prompt});
    if profile == "claude" {
        fields["env"] = json!({"ANTHROPIC_MODEL": CLAUDE_MODEL});
    }
    fields
}

/// Two turns, the first with a tool call: three main requests.
fn three_requests(bed: &RealApp, profile: &str, tool: Turn) -> u64 {
    bed.double.script(vec![tool, Turn::reply("first done")]);
    let id = bed.spawn(spawn_fields(profile, "count"));
    bed.app.until(id, LONG, |r| {
        r["state"] == "idle" && r["message"] == "first done"
    });
    bed.double.script(vec![Turn::reply("second done")]);
    bed.app
        .request(json!({"Send": {"target": id, "text": "again", "enter": true}}));
    bed.app.until(id, LONG, |r| {
        r["state"] == "idle" && r["message"] == "second done"
    });
    assert_eq!(bed.double.requests().len(), 3);
    id
}

/// The sum of what the double said main requests 1 to `n` used, as krad
/// counts it: OpenAI's input without its cached part.
fn sent(openai: bool, n: u64) -> (u64, u64, u64, u64) {
    (1..=n)
        .map(|i| SentUsage::of(openai, i))
        .fold((0, 0, 0, 0), |s, u| {
            let input = if openai {
                u.input - u.cache_read
            } else {
                u.input
            };
            (
                s.0 + input,
                s.1 + u.output,
                s.2 + u.cache_write,
                s.3 + u.cache_read,
            )
        })
}

/// The cost in millionths of a dollar of these tokens at these prices
/// (dollars per million tokens), as the docs define it.
fn micros(tokens: (u64, u64, u64, u64), prices: (f64, f64, f64, f64)) -> u64 {
    let part = |n: u64, p: f64| n as f64 * p;
    (part(tokens.0, prices.0)
        + part(tokens.1, prices.1)
        + part(tokens.2, prices.2)
        + part(tokens.3, prices.3))
    .round() as u64
}

/// Waits until the record's tokens are those sent; returns them.
fn until_tokens(bed: &RealApp, id: u64, want: (u64, u64, u64, u64)) -> Value {
    let record = bed.app.until(id, LONG, |r| {
        let t = &r["tokens"];
        (
            t["input"].as_u64(),
            t["output"].as_u64(),
            t["cache_write"].as_u64(),
            t["cache_read"].as_u64(),
        ) == (Some(want.0), Some(want.1), Some(want.2), Some(want.3))
    });
    record["tokens"].clone()
}

fn cost_micros(tokens: &Value) -> u64 {
    (tokens["cost_usd"].as_f64().unwrap() * 1e6).round() as u64
}

#[test]
fn claude_code_s_tokens_are_what_the_model_said_priced_from_the_config() {
    let prices = PRICES;
    let bed = RealApp::start_with_config(Cli::Claude, CLAUDE_PRICES);
    let id = three_requests(
        &bed,
        "claude",
        Turn::tool("Bash", json!({"command": "true", "description": "a step"})),
    );
    let want = sent(false, 3);
    let tokens = until_tokens(&bed, id, want);
    assert_eq!(tokens["model"], CLAUDE_MODEL, "{tokens}");
    assert_eq!(cost_micros(&tokens), micros(want, prices), "{tokens}");
    assert!(tokens["cost_unknown"].is_null());
    let ls = bed.app.krad_ok(&["ls"]);
    let cost = format!("${:.4}", micros(want, prices) as f64 / 1e6);
    assert!(ls.contains("COST") && ls.contains(&cost), "{ls}");
    let top = bed.app.krad_ok(&["top", "--once", "--sort", "cost"]);
    let row = top.lines().find(|l| l.starts_with(&format!("{id} ")));
    assert!(row.is_some_and(|r| r.contains(&cost)), "{top}");
}

#[test]
fn codex_s_tokens_are_what_the_model_said_priced_from_the_built_in_table() {
    let bed = RealApp::start(Cli::Codex);
    let id = three_requests(
        &bed,
        "codex",
        Turn::tool("exec_command", json!({"cmd": "true"})),
    );
    let want = sent(true, 3);
    let tokens = until_tokens(&bed, id, want);
    assert_eq!(tokens["model"], super::CODEX_MODEL, "{tokens}");
    // gpt-5.1-codex in the built-in table: 1.25, 10, 0, 0.125.
    assert_eq!(
        cost_micros(&tokens),
        micros(want, (1.25, 10.0, 0.0, 0.125)),
        "{tokens}"
    );
}

#[test]
fn a_model_without_a_price_shows_its_tokens_and_why_it_has_no_cost() {
    let bed = RealApp::start(Cli::Claude);
    bed.double.script(vec![Turn::reply("priceless")]);
    let id = bed.spawn(spawn_fields("claude", "count"));
    let tokens = until_tokens(&bed, id, sent(false, 1));
    assert!(tokens["cost_usd"].is_null(), "{tokens}");
    let why = tokens["cost_unknown"].as_str().unwrap_or_default();
    assert!(
        why.contains(CLAUDE_MODEL) && why.contains("[prices"),
        "{tokens}"
    );
    let ls = bed.app.krad_ok(&["ls"]);
    assert!(ls.lines().nth(1).is_some_and(|l| l.contains(" ? ")), "{ls}");
}

#[test]
fn claude_code_reaching_its_max_cost_is_interrupted_and_asks_until_the_limit_is_raised() {
    let prices = PRICES;
    let bed = RealApp::start_with_config(Cli::Claude, CLAUDE_PRICES);
    // The first call alone costs more than the limit; the turn goes on
    // with a slow second call, which the interrupt cuts short — or, when the
    // app sees the cost before Claude Code asks for it (a loaded machine
    // runs the tool slowly), the interrupt stops the turn before it.
    let first = micros(sent(false, 1), prices);
    let limit = first - 500;
    bed.double.script(vec![
        Turn::tool("Bash", json!({"command": "true", "description": "a step"})),
        Turn::Slow {
            text: "this reply is never finished".into(),
            secs: 60,
        },
    ]);
    let mut fields = spawn_fields("claude", "spend");
    fields["max_cost_usd"] = json!(limit as f64 / 1e6);
    let id = bed.spawn(fields);
    let record = bed.app.until(id, LONG, |r| r["state_source"] == "budget");
    let dollars = |m: u64| format!("${:.4}", m as f64 / 1e6);
    assert_eq!(record["state"], "asking", "{record}");
    assert_eq!(
        record["message"],
        format!("budget reached: {} of {}", dollars(first), dollars(limit)),
        "{record}"
    );
    assert_eq!(cost_micros(&record["tokens"]), first, "{record}");
    // The interrupt keys stopped the turn: Claude Code says so.
    bed.until_screen(id, "Interrupted");
    // Its hooks' reports do not take it out of `asking`.
    let ls = bed.app.krad_ok(&["ls"]);
    assert!(ls.contains("budget reached"), "{ls}");
    // Raising the limit lets it go on.
    let raised = bed
        .app
        .krad(&["budget", &id.to_string(), "--max-cost", "1"]);
    assert_eq!(crate::support::exit_code(&raised), 0, "{raised:?}");
    let record = bed.app.record(id);
    assert_eq!(record["state"], "idle", "{record}");
    assert_eq!(record["message"], "budget raised to $1.00", "{record}");
    assert_eq!(record["max_cost_usd"], 1.0, "{record}");
    // The next request gets the next reply, whether or not the slow call was
    // ever asked for.
    bed.double.rescript(vec![Turn::reply("going on")]);
    bed.app
        .request(json!({"Send": {"target": id, "text": "go on", "enter": true}}));
    bed.app.until(id, LONG, |r| {
        r["state"] == "idle" && r["message"] == "going on"
    });
}
