//! What model tokens cost: `[prices]` in the config over the built-in table
//! ([`DEFAULTS`]), and the cost of a model's tokens at those prices.
//!
//! ```toml
//! [prices.claude-sonnet-4-5]   # US dollars per million tokens
//! input = 3.0
//! output = 15.0
//! cache_write = 3.75
//! cache_read = 0.30
//! ```
//!
//! A model's price is the entry of its exact name, or of its name without a
//! date suffix (`claude-sonnet-4-5-20250929` → `claude-sonnet-4-5`); nothing
//! else is guessed, so a model of another tier never takes a wrong price.

use std::collections::BTreeMap;

use krad_bus::protocol::Dollars;
use serde::{Deserialize, Deserializer};

/// Millionths of a dollar per million tokens (so sums are exact).
pub(crate) type Rate = u64;

/// One model's prices.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Input tokens not in the cache, dollars per million.
    #[serde(deserialize_with = "rate")]
    pub input: Rate,
    /// Output tokens, dollars per million.
    #[serde(deserialize_with = "rate")]
    pub output: Rate,
    /// Tokens written to the prompt cache, dollars per million (0 when the
    /// provider does not bill them).
    #[serde(default, deserialize_with = "rate")]
    pub cache_write: Rate,
    /// Tokens read from the prompt cache, dollars per million.
    #[serde(default, deserialize_with = "rate")]
    pub cache_read: Rate,
}

/// Dollars per million tokens, as the config writes them, to a [`Rate`].
fn rate<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Rate, D::Error> {
    let dollars = f64::deserialize(deserializer)?;
    if !dollars.is_finite() || !(0.0..=1e6).contains(&dollars) {
        return Err(serde::de::Error::custom(
            "a price is dollars per million tokens, from 0 to 1000000",
        ));
    }
    Ok((dollars * 1e6).round() as Rate)
}

/// Tokens of one model, as a price applies to them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Input tokens not in the cache.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Tokens written to the prompt cache.
    pub cache_write: u64,
    /// Tokens read from the prompt cache.
    pub cache_read: u64,
}

impl Counts {
    /// Both added.
    pub fn plus(self, other: Counts) -> Counts {
        Counts {
            input: self.input + other.input,
            output: self.output + other.output,
            cache_write: self.cache_write + other.cache_write,
            cache_read: self.cache_read + other.cache_read,
        }
    }

    /// What grew from `earlier` to `self` (nothing where it shrank).
    pub fn since(self, earlier: Counts) -> Counts {
        Counts {
            input: self.input.saturating_sub(earlier.input),
            output: self.output.saturating_sub(earlier.output),
            cache_write: self.cache_write.saturating_sub(earlier.cache_write),
            cache_read: self.cache_read.saturating_sub(earlier.cache_read),
        }
    }
}

impl Price {
    /// What `counts` cost at this price.
    pub fn cost(&self, counts: Counts) -> Dollars {
        let micro_millions = u128::from(counts.input) * u128::from(self.input)
            + u128::from(counts.output) * u128::from(self.output)
            + u128::from(counts.cache_write) * u128::from(self.cache_write)
            + u128::from(counts.cache_read) * u128::from(self.cache_read);
        // Millionths of a dollar per million tokens × tokens / 1e6 =
        // millionths of a dollar, rounded.
        Dollars(u64::try_from((micro_millions + 500_000) / 1_000_000).unwrap_or(u64::MAX))
    }
}

/// Built-in prices, dollars per million tokens: input, output, cache write
/// (Anthropic's 5-minute cache), cache read — as of 2025-11, from
/// anthropic.com/pricing (Claude API) and platform.openai.com/docs/pricing
/// (standard tier). Prices change: `[prices]` in the config overrides them.
pub(crate) const DEFAULTS: &[(&str, f64, f64, f64, f64)] = &[
    ("claude-opus-4-5", 5.0, 25.0, 6.25, 0.50),
    ("claude-opus-4-1", 15.0, 75.0, 18.75, 1.50),
    ("claude-opus-4", 15.0, 75.0, 18.75, 1.50),
    ("claude-sonnet-4-5", 3.0, 15.0, 3.75, 0.30),
    ("claude-sonnet-4", 3.0, 15.0, 3.75, 0.30),
    ("claude-haiku-4-5", 1.0, 5.0, 1.25, 0.10),
    ("claude-3-5-haiku", 0.80, 4.0, 1.0, 0.08),
    ("gpt-5", 1.25, 10.0, 0.0, 0.125),
    ("gpt-5-codex", 1.25, 10.0, 0.0, 0.125),
    ("gpt-5.1", 1.25, 10.0, 0.0, 0.125),
    ("gpt-5.1-codex", 1.25, 10.0, 0.0, 0.125),
    ("gpt-5-mini", 0.25, 2.0, 0.0, 0.025),
    ("gpt-5.1-codex-mini", 0.25, 2.0, 0.0, 0.025),
    ("gpt-5-nano", 0.05, 0.40, 0.0, 0.005),
];

/// The prices in force: the built-in table with the config's entries over it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Prices(BTreeMap<String, Price>);

impl Prices {
    /// [`DEFAULTS`], then `config`'s entries (replacing a default of the same name).
    pub(crate) fn with(config: &BTreeMap<String, Price>) -> Prices {
        let per_million = |dollars: f64| (dollars * 1e6).round() as Rate;
        let mut table: BTreeMap<String, Price> = DEFAULTS
            .iter()
            .map(|&(model, input, output, cache_write, cache_read)| {
                let price = Price {
                    input: per_million(input),
                    output: per_million(output),
                    cache_write: per_million(cache_write),
                    cache_read: per_million(cache_read),
                };
                (model.to_owned(), price)
            })
            .collect();
        table.extend(config.iter().map(|(k, v)| (k.clone(), *v)));
        Prices(table)
    }

    /// The price of `model`: its exact name's, or its name's without a date
    /// suffix (`-20250929`, `-2025-09-29`).
    pub(crate) fn of(&self, model: &str) -> Option<&Price> {
        if let Some(price) = self.0.get(model) {
            return Some(price);
        }
        let (base, suffix) = model.split_at(model.len() - date_suffix_len(model)?);
        debug_assert!(suffix.starts_with('-'));
        self.0.get(base)
    }
}

/// The length of a model name's date suffix, its dash included: `-YYYYMMDD`
/// or `-YYYY-MM-DD`.
fn date_suffix_len(model: &str) -> Option<usize> {
    let bytes = model.as_bytes();
    let digits = |s: &[u8]| s.iter().all(u8::is_ascii_digit);
    let n = bytes.len();
    if n > 9 && bytes[n - 9] == b'-' && digits(&bytes[n - 8..]) {
        return Some(9);
    }
    let dashed = n > 11
        && bytes[n - 11] == b'-'
        && digits(&bytes[n - 10..n - 6])
        && bytes[n - 6] == b'-'
        && digits(&bytes[n - 5..n - 3])
        && bytes[n - 3] == b'-'
        && digits(&bytes[n - 2..]);
    dashed.then_some(11)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dated_model_takes_its_base_price_and_no_other_tier_does() {
        let prices = Prices::with(&BTreeMap::new());
        let sonnet = prices.of("claude-sonnet-4-5").copied();
        assert!(sonnet.is_some());
        assert_eq!(prices.of("claude-sonnet-4-5-20250929").copied(), sonnet);
        assert_eq!(prices.of("gpt-5-2025-08-07"), prices.of("gpt-5"));
        assert_eq!(prices.of("gpt-5-pro"), None, "never another tier's price");
        assert_eq!(prices.of("claude-sonnet-4-5-x"), None);
    }

    #[test]
    fn a_cost_is_each_kind_of_token_at_its_price_rounded_to_a_millionth() {
        let config: BTreeMap<String, Price> = toml::from_str(
            "[m]\ninput = 3.0\noutput = 15.0\ncache_write = 3.75\ncache_read = 0.30\n",
        )
        .unwrap();
        let prices = Prices::with(&config);
        let counts = Counts {
            input: 1_000_000,
            output: 2000,
            cache_write: 1000,
            cache_read: 10,
        };
        // 3 + 0.03 + 0.00375 + 0.000003
        assert_eq!(prices.of("m").unwrap().cost(counts), Dollars(3_033_753));
        let wrong: Result<BTreeMap<String, Price>, _> =
            toml::from_str("[m]\ninput = -1.0\noutput = 1.0\n");
        assert!(wrong.is_err());
    }
}
