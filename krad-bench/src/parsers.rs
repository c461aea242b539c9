//! Screen models side by side: the terminal parsers krad could keep a terminal's
//! screen and scrollback with, fed the same output in process, for throughput and
//! for the memory one terminal costs with a full scrollback.
//!
//! Memory is measured in a process of its own per candidate (the harness runs
//! itself with the hidden `parser-memory` command): the growth of its resident set
//! while it holds a few terminals fed the whole output, divided by their number.
//! Freed memory stays in the allocator, so measuring candidates one after another
//! in one process would count each on the previous one's leftovers.

use std::num::NonZeroU16;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::Context;

use crate::util::rss_kib;

/// The screen size every candidate is measured at.
pub(crate) const COLS: u16 = 120;
pub(crate) const ROWS: u16 = 40;
/// Scrollback lines kept, for the candidates that keep any.
pub(crate) const SCROLLBACK: usize = 10_000;
/// Bytes fed at once (what krad reads from a terminal at once).
const CHUNK: usize = 16 * 1024;
/// Terminals held at once when measuring memory.
const HELD: usize = 4;

/// A screen model measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Candidate {
    /// vt100 0.18 keeping the scrollback itself.
    Vt100,
    /// vt100 0.18 without scrollback (the parser's floor).
    Vt100Bare,
    /// krad's screen model (`krad_term::screen::Screen`) as built: its scrollback
    /// of trimmed text lines.
    Krad,
    /// asciinema's avt 0.19 keeping the scrollback.
    Avt,
    /// Alacritty's terminal (alacritty_terminal 0.26) keeping the scrollback.
    Alacritty,
}

impl Candidate {
    /// Every candidate, in the order shown.
    pub(crate) const ALL: [Candidate; 5] = [
        Candidate::Vt100,
        Candidate::Vt100Bare,
        Candidate::Krad,
        Candidate::Avt,
        Candidate::Alacritty,
    ];

    /// Its name in the table.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Candidate::Vt100 => "vt100 0.18, its own scrollback",
            Candidate::Vt100Bare => "vt100 0.18, no scrollback",
            Candidate::Krad => "krad-term `Screen` (alacritty_terminal + krad's text scrollback)",
            Candidate::Avt => "avt 0.19, its own scrollback",
            Candidate::Alacritty => "alacritty_terminal 0.26, its own scrollback",
        }
    }

    /// A fresh terminal of this model.
    fn model(self) -> anyhow::Result<Model> {
        let (rows, cols) = (nonzero(ROWS), nonzero(COLS));
        Ok(match self {
            Candidate::Vt100 => Model::Vt100(Box::new(vt100::Parser::new(rows, cols, SCROLLBACK))),
            Candidate::Vt100Bare => Model::Vt100(Box::new(vt100::Parser::new(rows, cols, 0))),
            Candidate::Krad => Model::Krad(Box::new(krad_term::screen::Screen::new(
                COLS, ROWS, SCROLLBACK,
            ))),
            Candidate::Avt => Model::Avt(
                avt::Terminal::with_scrollback(COLS.into(), ROWS.into(), Some(SCROLLBACK))
                    .map(Box::new)
                    .map_err(|size| anyhow::anyhow!("avt: {size:?}"))?,
            ),
            Candidate::Alacritty => {
                let config = alacritty_terminal::term::Config {
                    scrolling_history: SCROLLBACK,
                    ..Default::default()
                };
                Model::Alacritty(Box::new((
                    alacritty_terminal::Term::new(
                        config,
                        &Size,
                        alacritty_terminal::event::VoidListener,
                    ),
                    alacritty_terminal::vte::ansi::Processor::new(),
                )))
            }
        })
    }
}

/// A terminal of one of the models.
enum Model {
    Vt100(Box<vt100::Parser>),
    Krad(Box<krad_term::screen::Screen>),
    Avt(Box<avt::Terminal>),
    Alacritty(
        Box<(
            alacritty_terminal::Term<alacritty_terminal::event::VoidListener>,
            alacritty_terminal::vte::ansi::Processor,
        )>,
    ),
}

impl Model {
    fn feed(&mut self, bytes: &[u8]) {
        match self {
            Model::Vt100(parser) => parser.process(bytes),
            Model::Krad(screen) => {
                std::hint::black_box(screen.process(bytes));
            }
            // avt takes text: the caller decodes UTF-8 (the output here is ASCII).
            Model::Avt(terminal) => terminal.feed(String::from_utf8_lossy(bytes).as_ref()),
            Model::Alacritty(state) => {
                let (term, processor) = &mut **state;
                processor.advance(term, bytes);
            }
        }
    }

    /// Something of the screen, so the work is not optimized away.
    fn touch(&self) -> usize {
        match self {
            Model::Vt100(parser) => usize::from(parser.screen().cursor_position().0),
            Model::Krad(screen) => screen.scrollback_len(),
            Model::Avt(terminal) => terminal.cursor().row,
            Model::Alacritty(state) => state.0.grid().cursor.point.column.0,
        }
    }
}

/// Alacritty's size: the screen's lines and columns.
struct Size;

impl alacritty_terminal::grid::Dimensions for Size {
    fn total_lines(&self) -> usize {
        ROWS.into()
    }
    fn screen_lines(&self) -> usize {
        ROWS.into()
    }
    fn columns(&self) -> usize {
        COLS.into()
    }
}

/// Seconds `candidate` takes to parse `bytes`, fed in 16 KiB chunks.
pub(crate) fn parse_secs(candidate: Candidate, bytes: &[u8]) -> anyhow::Result<f64> {
    let started = Instant::now();
    let mut model = candidate.model()?;
    for chunk in bytes.chunks(CHUNK) {
        model.feed(chunk);
    }
    std::hint::black_box(model.touch());
    Ok(started.elapsed().as_secs_f64())
}

/// KiB one terminal of `candidate` holds once fed `output` (measured in a child
/// process: see the module's doc).
pub(crate) fn memory_kib(candidate: Candidate, output: &Path) -> anyhow::Result<f64> {
    let exe = std::env::current_exe()?;
    let name = clap::ValueEnum::to_possible_value(&candidate)
        .context("a candidate without a name")?
        .get_name()
        .to_owned();
    let out = Command::new(exe)
        .args(["parser-memory", "--candidate", &name, "--output"])
        .arg(output)
        .output()?;
    anyhow::ensure!(out.status.success(), "parser-memory {name}: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .parse()
        .with_context(|| format!("parser-memory {name} printed {text:?}"))
}

/// The `parser-memory` command: prints the KiB each of a few terminals of
/// `candidate`, fed the whole of `output`, adds to this process.
pub(crate) fn print_memory(candidate: Candidate, output: &Path) -> anyhow::Result<()> {
    let bytes = std::fs::read(output)?;
    let pid = std::process::id();
    let before = rss_kib(pid);
    let mut held = Vec::with_capacity(HELD);
    for _ in 0..HELD {
        let mut model = candidate.model()?;
        for chunk in bytes.chunks(CHUNK) {
            model.feed(chunk);
        }
        held.push(model);
    }
    let after = rss_kib(pid);
    std::hint::black_box(held.iter().map(Model::touch).sum::<usize>());
    println!("{:.0}", after.saturating_sub(before) as f64 / HELD as f64);
    Ok(())
}

fn nonzero(n: u16) -> NonZeroU16 {
    NonZeroU16::new(n).unwrap_or(NonZeroU16::MIN)
}
