//! `krad budget`: sets what a terminal's (or a variant group's) model calls
//! may cost, raising a limit that stopped an agent (Budget).

use clap::ArgGroup;
use krad_bus::protocol::Dollars;
use krad_bus::request::budget::Budget;

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::Exit;
use crate::print;
use crate::render::Agent;

/// Arguments of `krad budget`.
#[derive(Debug, clap::Args)]
#[command(
    group(ArgGroup::new("who").required(true).args(["target", "group"])),
    group(ArgGroup::new("limit").required(true).args(["max_cost", "none"])),
    after_help = "\
An agent whose model calls reach its limit (or whose group's reach the group's) is \
interrupted and shown `asking`, \"budget reached: $X of $Y\", until the limit is raised past \
what it cost, or you send to it (it then goes on past the limit). The cost is that of \
`krad ls`'s COST column; an agent whose model has no price is never stopped. Leads and the \
user may set budgets, not a plain agent.

Examples:
  krad budget 4 --max-cost 2.50
  krad budget --group variants-1 --max-cost 10
  krad budget 4 --none --json"
)]
pub(crate) struct BudgetArgs {
    /// The terminal id, or the agent's name.
    #[arg(value_name = "TARGET", value_parser = super::parse_target)]
    pub target: Option<super::Target>,
    /// A variant group instead (RunVariants).
    #[arg(long, value_name = "GROUP")]
    pub group: Option<String>,
    /// The new limit, in US dollars.
    #[arg(long, value_name = "USD", value_parser = dollars)]
    pub max_cost: Option<Dollars>,
    /// Take the limit away.
    #[arg(long)]
    pub none: bool,
}

/// `2.50` → dollars; a negative or non-number amount is an error.
pub(crate) fn dollars(text: &str) -> Result<Dollars, String> {
    match text.trim_start_matches('$').parse::<f64>() {
        Ok(value) if value.is_finite() && value >= 0.0 => Ok(Dollars::of(value)),
        _ => Err(format!("{text:?} is not an amount in dollars (e.g. 2.50)")),
    }
}

/// Sends Budget and prints each concerned agent's limit and state.
pub(crate) fn run(args: BudgetArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let app = AppConnection::find(connect)?;
    let request = Budget {
        target: args.target.map(|t| t.resolve(&app)).transpose()?,
        group: args.group,
        max_cost_usd: args.max_cost,
    };
    let reply = app.send(request, None)?;
    print::emit(json, &reply, |agents| {
        for record in agents {
            let limit = record
                .max_cost_usd
                .map_or_else(|| "no limit".to_owned(), |l| format!("limit {l}"));
            print::line(&format!(
                "terminal {}: {limit}, cost {} — {}",
                record.terminal,
                Agent(record).cost_cell(),
                record.state
            ));
        }
    });
    Ok(Exit::Success)
}
