//! What an agent's model calls used and cost: the tokens its CLI recorded
//! (Claude Code's transcript, Codex's rollout file) and their price.

use serde::{Deserialize, Serialize};

/// Tokens an agent's model calls used, from the agent's own files, and what
/// they cost at the config's prices.
///
/// # Format
///
/// ```json
/// {"input":2030,"output":83,"cache_write":403,"cache_read":603,
///  "model":"claude-sonnet-4-5","cost_usd":0.0123,"cost_unknown":null}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    /// Input tokens not read from the prompt cache (nor written to it).
    pub input: u64,
    /// Output tokens (reasoning included).
    pub output: u64,
    /// Input tokens written to the prompt cache (Anthropic's
    /// `cache_creation_input_tokens`; 0 for OpenAI, which does not bill them).
    pub cache_write: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read: u64,
    /// The model of the last call.
    pub model: Option<String>,
    /// What they cost in US dollars, at the config's prices; null when a
    /// model used has no price (`cost_unknown` says which).
    pub cost_usd: Option<Dollars>,
    /// Why `cost_usd` is null.
    pub cost_unknown: Option<String>,
}

impl Tokens {
    /// The sum of several agents' tokens (`None` for none): the cost is null
    /// when one of them has none, `cost_unknown` says how many, and `model`
    /// is absent.
    pub fn sum<'a>(all: impl IntoIterator<Item = &'a Tokens>) -> Option<Tokens> {
        let mut total: Option<Tokens> = None;
        let mut unpriced = 0;
        for tokens in all {
            let sum = total.get_or_insert_with(|| Tokens {
                cost_usd: Some(Dollars(0)),
                ..Tokens::default()
            });
            sum.input += tokens.input;
            sum.output += tokens.output;
            sum.cache_write += tokens.cache_write;
            sum.cache_read += tokens.cache_read;
            match tokens.cost_usd {
                Some(cost) => {
                    sum.cost_usd = sum.cost_usd.map(|c| Dollars(c.0 + cost.0));
                }
                None => unpriced += 1,
            }
        }
        if let Some(sum) = total.as_mut()
            && unpriced > 0
        {
            sum.cost_usd = None;
            sum.cost_unknown = Some(format!(
                "{unpriced} of its agents used a model without a price"
            ));
        }
        total
    }
}

/// An amount in US dollars, kept as millionths (so records compare exactly);
/// a plain JSON number on the wire (`0.0123`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dollars(pub u64);

impl Dollars {
    /// The amount as a float.
    pub fn value(self) -> f64 {
        self.0 as f64 / 1e6
    }

    /// `value` rounded to a millionth; negative and non-finite values are 0.
    pub fn of(value: f64) -> Dollars {
        if value.is_finite() && value > 0.0 {
            Dollars((value * 1e6).round().min(u64::MAX as f64) as u64)
        } else {
            Dollars(0)
        }
    }
}

impl std::fmt::Display for Dollars {
    /// `$0.0123`: cents for a dollar and more, four decimals below.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0 >= 1_000_000 {
            write!(f, "${:.2}", self.value())
        } else {
            write!(f, "${:.4}", self.value())
        }
    }
}

impl Serialize for Dollars {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(self.value())
    }
}

impl<'de> Deserialize<'de> for Dollars {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        f64::deserialize(deserializer).map(Dollars::of)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dollars_go_on_the_wire_as_numbers_and_come_back_the_same() {
        let amount = Dollars(12_345);
        let wire = serde_json::to_string(&amount).unwrap();
        assert_eq!(wire, "0.012345");
        assert_eq!(serde_json::from_str::<Dollars>(&wire).unwrap(), amount);
        assert_eq!(amount.to_string(), "$0.0123");
        assert_eq!(Dollars(2_500_000).to_string(), "$2.50");
        assert_eq!(Dollars::of(-1.0), Dollars(0));
    }

    #[test]
    fn a_sum_has_a_cost_only_when_every_part_has_one() {
        let priced = |input, cost: Option<u64>| Tokens {
            input,
            cost_usd: cost.map(Dollars),
            ..Tokens::default()
        };
        let both = Tokens::sum(&[priced(1, Some(10)), priced(2, Some(5))]).unwrap();
        assert_eq!((both.input, both.cost_usd), (3, Some(Dollars(15))));
        let one_unknown = Tokens::sum(&[priced(1, Some(10)), priced(2, None)]).unwrap();
        assert_eq!(one_unknown.cost_usd, None);
        assert!(one_unknown.cost_unknown.unwrap().starts_with("1 of"));
        assert_eq!(Tokens::sum(&[]), None);
    }
}
