//! `krad watch`: a live table of the agents, redrawn from the SubscribeAgents
//! stream at every change (and every second on a terminal, so SINCE keeps time).
//! Rows of agents that need the user (asking) are marked `!`, and on a terminal
//! the bell rings when one starts asking.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, SystemTime};

use krad_bus::protocol::{AgentRecord, AgentState, StreamMessage};

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::Exit;
use crate::print;
use crate::render::{self, Agent, Column};

use super::subscribe;

/// Arguments of `krad watch`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
On a terminal the table is redrawn in place (width from $COLUMNS, or 100) under a line \
counting the agents per state; piped, a table is printed after every message, tables \
separated by a blank line. Agents that need you (asking: a permission, a login, a \
question) are marked ! and, on a terminal, ring the bell when they start asking \
(--no-bell to keep quiet). Ends when the app stops. With --json, prints the stream as \
JSON lines like `krad subscribe`.

Examples:
  krad watch
  krad watch --env feat-x
  krad watch --json")]
pub(crate) struct WatchArgs {
    /// Only the agents of this environment.
    #[arg(long = "env", value_name = "NAME")]
    pub environment: Option<String>,
    /// Do not ring the bell when an agent starts asking.
    #[arg(long)]
    pub no_bell: bool,
}

/// The table's columns; MESSAGE takes the width that is left.
const COLUMNS: [Column; 7] = [
    Column::new("!", 1, 1),
    Column::new("ID", 2, 8),
    Column::new("NAME", 4, 24),
    Column::new("STATE", 5, 8),
    Column::new("SOURCE", 6, 7),
    Column::new("SINCE", 5, 5),
    Column::new("MESSAGE", 0, usize::MAX),
];

/// The order states are counted in the header.
const STATES: [&str; 5] = ["starting", "working", "asking", "idle", "exited"];

/// How often a terminal's table is redrawn without news, so SINCE keeps time.
const TICK: Duration = Duration::from_secs(1);

/// Follows the stream and redraws the table until the app stops.
pub(crate) fn run(args: WatchArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let bus = AppConnection::find(connect)?;
    if json {
        return subscribe::print_stream(&bus, args.environment, None);
    }
    let stream = subscribe::open(&bus, args.environment.clone(), None)?;
    let (sender, messages) = mpsc::channel();
    std::thread::spawn(move || {
        for message in stream {
            if sender.send(message).is_err() {
                break;
            }
        }
    });
    let live = std::io::stdout().is_terminal();
    let mut board = Board::default();
    let mut drawn = false;
    let ring = live && !args.no_bell;
    loop {
        let mut newly_asking = false;
        let message = if live {
            match messages.recv_timeout(TICK) {
                Ok(message) => Some(message),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            }
        } else {
            match messages.recv() {
                Ok(message) => Some(message),
                Err(_) => break,
            }
        };
        match message {
            Some(line) => match subscribe::read(line)?.message {
                Some(StreamMessage::ShuttingDown) => {
                    print::line("the app stopped");
                    return Ok(Exit::Success);
                }
                Some(message) => newly_asking = board.apply(message),
                // A message this CLI does not know changes nothing.
                None => {}
            },
            // A tick before the first message: nothing to show yet.
            None if !drawn => continue,
            None => {}
        }
        let now = SystemTime::now();
        let width = render::terminal_width();
        let frame = if live {
            format!(
                "\x1b[H\x1b[2J{}\n{}",
                render::truncate(&board.header(args.environment.as_deref()), width),
                board.table(now, width).join("\n")
            )
        } else if drawn {
            format!("\n{}", board.table(now, width).join("\n"))
        } else {
            board.table(now, width).join("\n")
        };
        print::line(&frame);
        if ring && newly_asking {
            print::bell();
        }
        drawn = true;
    }
    print::line("the app closed the stream");
    Ok(Exit::Success)
}

/// What the stream has said so far: the agents by terminal, and the latest rev.
#[derive(Debug, Default)]
struct Board {
    agents: BTreeMap<u64, AgentRecord>,
    rev: Option<u64>,
}

impl Board {
    /// Applies one stream message: a fresh Snapshot replaces everything, a
    /// resumed one and Agent upsert, Removed deletes, Heartbeat only moves the rev,
    /// Sampled sets CPU, memory and tokens.
    /// Says whether an agent started asking.
    fn apply(&mut self, message: StreamMessage) -> bool {
        let asking_before: Vec<u64> = self.asking().collect();
        self.apply_message(message);
        self.asking().any(|t| !asking_before.contains(&t))
    }

    /// The agents that need the user.
    fn asking(&self) -> impl Iterator<Item = u64> + '_ {
        self.agents
            .iter()
            .filter(|(_, a)| a.state == AgentState::Asking)
            .map(|(t, _)| *t)
    }

    fn apply_message(&mut self, message: StreamMessage) {
        match message {
            StreamMessage::Snapshot(snapshot) => {
                if snapshot.fresh {
                    self.agents.clear();
                }
                for agent in snapshot.agents {
                    self.upsert(agent);
                }
                for removed in snapshot.removed {
                    self.remove(removed.terminal, removed.rev);
                }
                self.saw_rev(snapshot.rev);
            }
            StreamMessage::Agent(agent) => self.upsert(*agent),
            StreamMessage::Removed(removed) => self.remove(removed.terminal, removed.rev),
            StreamMessage::Heartbeat(heartbeat) => self.saw_rev(heartbeat.rev),
            // CPU, memory and cost sampled anew: not a change, no rev.
            StreamMessage::Sampled(sampled) => {
                for one in sampled.agents {
                    if let Some(agent) = self.agents.get_mut(&one.terminal) {
                        agent.usage = one.usage;
                        agent.tokens = one.tokens;
                    }
                }
            }
            StreamMessage::ShuttingDown => {}
        }
    }

    fn upsert(&mut self, agent: AgentRecord) {
        self.saw_rev(agent.rev);
        self.agents.insert(agent.terminal, agent);
    }

    fn remove(&mut self, terminal: u64, rev: u64) {
        self.agents.remove(&terminal);
        self.saw_rev(rev);
    }

    fn saw_rev(&mut self, rev: u64) {
        self.rev = Some(self.rev.map_or(rev, |seen| seen.max(rev)));
    }

    /// `krad watch: 3 agents — 1 working, 2 idle (rev 57) — Ctrl-C to quit`.
    fn header(&self, environment: Option<&str>) -> String {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for agent in self.agents.values() {
            *counts.entry(Agent(agent).state()).or_default() += 1;
        }
        let mut parts: Vec<String> = STATES
            .iter()
            .filter_map(|state| counts.remove(state).map(|n| format!("{n} {state}")))
            .collect();
        parts.extend(
            counts
                .iter()
                .map(|(state, n)| format!("{n} {}", render::one_line(state))),
        );
        let total = match self.agents.len() {
            1 => "1 agent".to_owned(),
            n => format!("{n} agents"),
        };
        let mut header = match environment {
            Some(environment) => format!("krad watch {}: {total}", render::one_line(environment)),
            None => format!("krad watch: {total}"),
        };
        if !parts.is_empty() {
            header.push_str(&format!(" — {}", parts.join(", ")));
        }
        if let Some(rev) = self.rev {
            header.push_str(&format!(" (rev {rev})"));
        }
        header.push_str(" — Ctrl-C to quit");
        header
    }

    /// The table, fitted to `width`; `no agents` when there are none.
    fn table(&self, now: SystemTime, width: usize) -> Vec<String> {
        if self.agents.is_empty() {
            return vec!["no agents".to_owned()];
        }
        let rows: Vec<Vec<String>> = self
            .agents
            .values()
            .map(|record| {
                let mark = if record.state == AgentState::Asking {
                    "!"
                } else {
                    ""
                };
                let mut row = vec![mark.to_owned()];
                row.extend(Agent(record).row(now, false));
                row
            })
            .collect();
        render::table(&COLUMNS, &rows, width)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn agent(terminal: u64, state: &str, rev: u64) -> Value {
        let record = render::test_record(json!({"terminal":terminal,
            "name":format!("a{terminal}"),"state":state,"state_source":"hook",
            "state_since":"2020-01-01T00:00:00Z","rev":rev}));
        serde_json::to_value(record).unwrap()
    }

    /// Reads a line as `krad watch` does, and applies it if it is a message.
    fn apply(board: &mut Board, line: Value) -> bool {
        let line = subscribe::read(Ok(krad_bus::client::Line::from_value(line))).unwrap();
        line.message.is_some_and(|message| board.apply(message))
    }

    #[test]
    fn the_board_follows_the_stream() {
        let mut board = Board::default();
        apply(
            &mut board,
            json!({"Snapshot":{"rev":10,"fresh":true,
            "agents":[agent(1,"working",9), agent(2,"idle",10)]}}),
        );
        assert_eq!(board.agents.len(), 2);
        assert!(!apply(&mut board, json!({"Agent": agent(1, "idle", 11)})));
        assert!(apply(&mut board, json!({"Agent": agent(3, "asking", 12)})));
        assert!(!apply(&mut board, json!({"Agent": agent(3, "asking", 12)})));
        apply(&mut board, json!({"Removed":{"terminal":2,"rev":13}}));
        apply(&mut board, json!({"Heartbeat":{"rev":13}}));
        assert_eq!(board.agents.keys().copied().collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(board.rev, Some(13));
        assert_eq!(
            board.header(None),
            "krad watch: 2 agents — 1 asking, 1 idle (rev 13) — Ctrl-C to quit"
        );
        let lines = board.table(SystemTime::now(), 60);
        assert_eq!(lines.len(), 3);
        assert!(
            lines[2].starts_with('!'),
            "the asking row is marked: {lines:#?}"
        );
        assert!(!lines[1].starts_with('!'));
        assert!(lines.iter().all(|l| l.chars().count() <= 60), "{lines:#?}");

        // A resumed snapshot upserts and removes; a fresh one replaces.
        apply(
            &mut board,
            json!({"Snapshot":{"rev":20,"fresh":false,
            "agents":[agent(4,"working",19)],"removed":[{"terminal":1,"rev":20}]}}),
        );
        assert_eq!(board.agents.keys().copied().collect::<Vec<_>>(), vec![3, 4]);
        apply(
            &mut board,
            json!({"Snapshot":{"rev":21,"fresh":true,"agents":[]}}),
        );
        assert!(board.agents.is_empty());
        assert_eq!(board.table(SystemTime::now(), 60), vec!["no agents"]);
    }

    #[test]
    fn odd_messages_change_nothing() {
        let mut board = Board::default();
        for message in [
            json!(null),
            json!("Ok"),
            json!({"Agent":{}}),
            json!({"Snapshot":3}),
        ] {
            apply(&mut board, message);
        }
        assert!(board.agents.is_empty());
        assert_eq!(
            board.header(Some("x")),
            "krad watch x: 0 agents — Ctrl-C to quit"
        );
    }

    #[test]
    fn a_newer_apps_state_counts_as_a_question_mark() {
        let mut board = Board::default();
        let mut newer = agent(7, "sleeping", 3);
        newer["state_source"] = json!("telepathy");
        newer["mood"] = json!("calm");
        apply(&mut board, json!({ "Agent": newer }));
        assert_eq!(
            board.header(None),
            "krad watch: 1 agent — 1 ? (rev 3) — Ctrl-C to quit"
        );
        let lines = board.table(SystemTime::now(), 80);
        let cells: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(cells[..4], ["7", "a7", "?", "?"], "{lines:#?}");
    }

    #[test]
    fn an_error_instead_of_the_stream_is_a_failure() {
        let refused = json!({"Error":{"code":"forbidden","message":"not yours"}});
        let failure = subscribe::read(Ok(krad_bus::client::Line::from_value(refused))).unwrap_err();
        assert_eq!(failure.exit, Exit::Denied);
    }
}
