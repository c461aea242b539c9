//! `krad gc [--merged] [--older-than D] [--dry-run]` (CollectEnvironments):
//! archives and removes the worktree environments that match, keeping those
//! still in use, and lists what it freed.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use krad_bus::protocol::{CollectAction, CollectedEnvironment, CollectedInfo, KeptBecause};
use krad_bus::request::collect_environments::CollectEnvironments;

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::Exit;
use crate::print;
use crate::render;

/// Arguments of `krad gc`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Selects the worktree environments (never main) that match every selector given — at least \
one is required — then records each one's tip under refs/krad/archive/<name> (uncommitted \
work committed there first, so nothing is lost: `krad archive restore NAME` brings it back) \
and removes its worktree and branch, as `krad close --env NAME --force` would.

  --merged          its work is already in its target: every commit in another branch, or \
merged by content (squash-merged, cherry-picked); no uncommitted files
  --older-than D    created more than D ago: 90s, 30m, 12h, 7d, 2w

Never removed, whatever the selectors, and listed with the reason:
  * an environment with a live terminal (on any host) — close its terminals first;
  * a local environment in which another program has its working directory (its pid and \
command are shown);
  * one whose [worktrees] teardown command fails.

Each line: what was done (removed, would remove, kept), the environment, the disk space it \
took (the app's last measurement), the archive ref, and why. Exit 0 when it ran, even if \
some were kept; 2 without a selector or with a bad duration.

Examples:
  krad gc --merged --dry-run
  krad gc --merged
  krad gc --older-than 7d
  krad gc --merged --older-than 2w --json | jq '.Collected.freed_bytes'")]
pub(crate) struct GcArgs {
    /// Select environments whose work is merged into their target already.
    #[arg(long)]
    pub merged: bool,
    /// Select environments created more than this long ago (90s, 30m, 12h, 7d, 2w).
    #[arg(long, value_name = "D", value_parser = parse_age)]
    pub older_than: Option<u64>,
    /// Change nothing; list what would be done.
    #[arg(long)]
    pub dry_run: bool,
    /// Make the request at most once with this id (safe to retry).
    #[arg(long, value_name = "ID")]
    pub request_id: Option<String>,
}

/// Runs `krad gc`.
pub(crate) fn run(args: GcArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let request = CollectEnvironments {
        merged: args.merged.then_some(true),
        older_than_secs: args.older_than,
        dry_run: args.dry_run.then_some(true),
    };
    let bus = AppConnection::find(connect)?;
    let doing = if args.dry_run {
        "looking"
    } else {
        "archiving and removing"
    };
    let progress = (!json && std::io::stderr().is_terminal()).then(|| Progress::start(doing));
    let reply = bus.send(request, args.request_id.as_deref());
    drop(progress);
    let reply = reply?;
    print::emit(json, &reply, |info| print::lines(report(info)));
    Ok(Exit::Success)
}

/// Parses an age: a whole number and a unit — `s`, `m`, `h`, `d` or `w`.
fn parse_age(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let bad = || {
        format!("{text:?} is not an age: write a number and a unit, like 90s, 30m, 12h, 7d or 2w")
    };
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| bad())?;
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        _ => return Err(bad()),
    };
    number.checked_mul(scale).ok_or_else(bad)
}

/// One line per environment, then the total.
fn report(info: &CollectedInfo) -> Vec<String> {
    if info.environments.is_empty() {
        return vec!["no environment matches; nothing to do".to_owned()];
    }
    let name_width = info
        .environments
        .iter()
        .map(|e| e.name.chars().count())
        .max()
        .unwrap_or(0);
    let mut lines: Vec<String> = info
        .environments
        .iter()
        .map(|e| line(e, name_width))
        .collect();
    let count = |action| {
        info.environments
            .iter()
            .filter(|e| e.action == action)
            .count()
    };
    let kept = count(CollectAction::Kept);
    let total = render::bytes(info.freed_bytes);
    lines.push(if info.dry_run {
        format!(
            "would free {total} from {}, keep {kept} (dry run: nothing changed)",
            render::counted(count(CollectAction::WouldRemove), "environment")
        )
    } else {
        format!(
            "freed {total} from {}, kept {kept}",
            render::counted(count(CollectAction::Removed), "environment")
        )
    });
    lines
}

fn line(e: &CollectedEnvironment, name_width: usize) -> String {
    let action = match (e.action, e.kept) {
        (CollectAction::Removed, _) => "removed",
        (CollectAction::WouldRemove, _) => "would remove",
        (CollectAction::Kept, Some(KeptBecause::Failed)) => "failed",
        (CollectAction::Kept, _) => "kept",
        (CollectAction::Other, _) => "?",
    };
    let size = e.bytes.map_or_else(|| "?".to_owned(), render::bytes);
    let name = match &e.host {
        Some(host) => format!("{} ({host})", e.name),
        None => e.name.clone(),
    };
    let archive = e
        .archive
        .as_deref()
        .map(|a| format!("  {a}"))
        .unwrap_or_default();
    format!(
        "{action:<12}  {name:<name_width$}  {size:>9}{archive}  {}",
        render::one_line(&e.reason)
    )
}

/// A live progress line on stderr while the app works (after the first
/// second): `krad gc: archiving and removing… 12s`.
struct Progress {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    fn start(doing: &'static str) -> Progress {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let thread = std::thread::spawn(move || {
            let started = Instant::now();
            // Quick runs print nothing.
            let mut shown = false;
            while !flag.load(Ordering::Relaxed) {
                std::thread::park_timeout(Duration::from_millis(250));
                let elapsed = started.elapsed();
                if elapsed >= Duration::from_secs(1) && !flag.load(Ordering::Relaxed) {
                    let mut err = std::io::stderr().lock();
                    let _ = write!(err, "\r\x1b[Kkrad gc: {doing}… {}s", elapsed.as_secs());
                    let _ = err.flush();
                    shown = true;
                }
            }
            if shown {
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "\r\x1b[K");
                let _ = err.flush();
            }
        });
        Progress {
            done,
            thread: Some(thread),
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_take_a_number_and_a_unit() {
        assert_eq!(parse_age("90s"), Ok(90));
        assert_eq!(parse_age("30m"), Ok(1800));
        assert_eq!(parse_age("12h"), Ok(43_200));
        assert_eq!(parse_age("7d"), Ok(604_800));
        assert_eq!(parse_age("2w"), Ok(1_209_600));
        for bad in [
            "",
            "7",
            "d",
            "7 days",
            "-1d",
            "1.5h",
            "99999999999999999999w",
        ] {
            assert!(parse_age(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn lines_say_what_was_done_and_the_total() {
        let info = CollectedInfo {
            dry_run: false,
            environments: vec![CollectedEnvironment {
                name: "done".into(),
                host: None,
                action: CollectAction::Removed,
                kept: None,
                reason: "merged: squash-merged".into(),
                archive: Some("refs/krad/archive/done".into()),
                bytes: Some(2048),
                created_at: None,
                terminals: Vec::new(),
                processes: Vec::new(),
            }],
            freed_bytes: 2048,
        };
        assert_eq!(
            report(&info),
            [
                "removed       done    2.0 KiB  refs/krad/archive/done  merged: squash-merged",
                "freed 2.0 KiB from 1 environment, kept 0"
            ]
        );
    }
}
