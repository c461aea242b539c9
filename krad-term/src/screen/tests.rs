//! The screen model's tests: text, cursor, scrollback, modes, signals, and the
//! plain-lines path compared with the parser on random output.

use super::*;

fn screen() -> Screen {
    Screen::new(20, 5, 100)
}

#[test]
fn text_and_cursor() {
    let mut s = screen();
    let signals = s.process(b"hello   \r\nworld");
    assert!(signals.is_empty());
    let snap = s.snapshot(10);
    assert_eq!(snap.screen, "hello\nworld");
    assert_eq!(snap.cursor, (1, 5));
    assert_eq!(snap.size, (20, 5));
    assert!(snap.scrollback.is_empty());
    assert!(!snap.truncated);
    assert_eq!(snap.title, "");
    assert!(!snap.bracketed_paste);
}

#[test]
fn blank_rows_inside_are_kept_trailing_ones_trimmed() {
    let mut s = screen();
    s.process(b"a\r\n\r\nb\r\n\r\n");
    assert_eq!(s.snapshot(0).screen, "a\n\nb");
    let mut empty = screen();
    empty.process(b"\x1b[2J");
    assert_eq!(empty.snapshot(0).screen, "");
}

#[test]
fn escape_sequences_are_applied() {
    let mut s = screen();
    s.process(b"\x1b[31mred\x1b[0m\x1b[3;4Hxy\x1b[1;1Habc\x1b[K");
    let snap = s.snapshot(0);
    assert_eq!(snap.screen, "abc\n\n   xy");
    assert_eq!(snap.cursor, (0, 3));
}

#[test]
fn scrollback_oldest_first_and_bounded() {
    let mut s = Screen::new(20, 3, 4);
    for i in 0..10 {
        s.process(format!("line {i}\r\n").as_bytes());
    }
    // Rows 8, 9 and the empty one are on the screen; 0..=7 scrolled off.
    let snap = s.snapshot(100);
    assert_eq!(snap.screen, "line 8\nline 9");
    assert_eq!(snap.scrollback, ["line 4", "line 5", "line 6", "line 7"]);
    assert!(!snap.truncated);
    assert_eq!(s.scrollback_len(), 4);

    let snap = s.snapshot(2);
    assert_eq!(snap.scrollback, ["line 6", "line 7"]);
    assert!(snap.truncated);

    let snap = s.snapshot(0);
    assert!(snap.scrollback.is_empty());
    assert!(snap.truncated);
}

#[test]
fn no_scrollback_when_none_asked() {
    let mut s = Screen::new(20, 2, 0);
    s.process(b"a\r\nb\r\nc\r\nd");
    let snap = s.snapshot(10);
    assert_eq!(snap.screen, "c\nd");
    assert!(snap.scrollback.is_empty());
    assert!(!snap.truncated);
}

#[test]
fn wrapped_lines_scroll_row_by_row() {
    let mut s = Screen::new(4, 2, 10);
    s.process(b"abcdefghij");
    let snap = s.snapshot(10);
    assert_eq!(snap.scrollback, ["abcd"]);
    assert_eq!(snap.screen, "efgh\nij");
}

#[test]
fn alternate_screen_rows_stay_out_of_scrollback() {
    let mut s = Screen::new(20, 2, 10);
    s.process(b"main1\r\nmain2\r\nmain3");
    s.process(b"\x1b[?1049halt1\r\nalt2\r\nalt3\r\nalt4");
    let snap = s.snapshot(10);
    assert_eq!(snap.screen, "alt3\nalt4");
    assert_eq!(snap.scrollback, ["main1"]);
    s.process(b"\x1b[?1049l");
    assert_eq!(s.snapshot(10).screen, "main2\nmain3");
}

#[test]
fn csi_3_j_erases_scrollback_where_it_stands() {
    let mut s = Screen::new(20, 2, 10);
    s.process(b"a\r\nb\r\nc\r\n\x1b[3Jd\r\ne\r\n");
    // a and b scrolled off before the erase, c and d after it.
    assert_eq!(s.snapshot(10).scrollback, ["c", "d"]);
    s.process(b"\x1b[?3J");
    assert!(s.snapshot(10).scrollback.is_empty());
    // Split across calls, with other CSI J forms that must not erase.
    s.process(b"f\r\ng\r\n\x1b[2J\x1b[J\x1b[>3J\x1b[");
    assert_eq!(s.snapshot(10).scrollback, ["e", "f"]);
    s.process(b"3");
    s.process(b"J");
    assert!(s.snapshot(10).scrollback.is_empty());
}

#[test]
fn resize_changes_size_and_pushes_rows_to_scrollback() {
    let mut s = Screen::new(10, 4, 10);
    s.process(b"1\r\n2\r\n3\r\n4");
    s.resize(30, 2);
    let snap = s.snapshot(10);
    assert_eq!(snap.size, (30, 2));
    assert_eq!(snap.screen, "3\n4");
    assert_eq!(snap.scrollback, ["1", "2"]);
    // Zero is taken as one.
    s.resize(0, 0);
    assert_eq!(s.size(), (1, 1));
}

#[test]
fn title_from_osc_0_and_2() {
    let mut s = screen();
    let signals = s.process(b"\x1b]0;first\x07");
    assert_eq!(signals.title.as_deref(), Some("first"));
    assert_eq!(signals.bells, 0);
    assert_eq!(s.snapshot(0).title, "first");

    let signals = s.process(b"\x1b]2;second\x1b\\");
    assert_eq!(signals.title.as_deref(), Some("second"));
    assert_eq!(s.title(), "second");

    // Setting the same title again is no change; OSC 1 (icon) is not the title.
    let signals = s.process(b"\x1b]2;second\x07\x1b]1;icon\x07");
    assert!(signals.is_empty(), "{signals:?}");
    assert_eq!(s.title(), "second");
}

#[test]
fn title_split_across_calls() {
    let mut s = screen();
    assert!(s.process(b"\x1b]2;hel").is_empty());
    let signals = s.process(b"lo\x07");
    assert_eq!(signals.title.as_deref(), Some("hello"));
}

#[test]
fn bell_outside_osc_only() {
    let mut s = screen();
    let signals = s.process(b"a\x07b\x07");
    assert_eq!(signals.bells, 2);
    assert_eq!(s.snapshot(0).screen, "ab");

    let signals = s.process(b"\x1b]2;t\x07\x1b]9;hi\x07\x1b]777;notify;x;y\x07");
    assert_eq!(signals.bells, 0);
    assert_eq!(signals.notifications.len(), 2);
    assert_eq!(signals.title.as_deref(), Some("t"));
}

#[test]
fn osc_9_notifications() {
    let mut s = screen();
    let signals = s.process(b"\x1b]9;Build done\x07");
    assert_eq!(
        signals.notifications,
        [Notification {
            title: None,
            body: "Build done".into()
        }]
    );
    let signals = s.process(b"\x1b]9;with ST; and ; semicolons\x1b\\");
    assert_eq!(
        signals.notifications,
        [Notification {
            title: None,
            body: "with ST; and ; semicolons".into()
        }]
    );
    // ConEmu progress reports are not notifications.
    let signals = s.process(b"\x1b]9;4;1;50\x07\x1b]9;4;0\x1b\\");
    assert!(signals.is_empty(), "{signals:?}");
    // Nothing of it reaches the screen.
    assert_eq!(s.snapshot(0).screen, "");
}

#[test]
fn osc_777_notifications() {
    let mut s = screen();
    let signals = s.process(b"\x1b]777;notify;Claude;Needs input\x07");
    assert_eq!(
        signals.notifications,
        [Notification {
            title: Some("Claude".into()),
            body: "Needs input".into()
        }]
    );
    let signals = s.process(b"\x1b]777;notify;T;a;b\x1b\\\x1b]777;other;x\x07");
    assert_eq!(
        signals.notifications,
        [Notification {
            title: Some("T".into()),
            body: "a;b".into()
        }]
    );
    let events = signals.into_events();
    assert_eq!(
        events,
        [TerminalEvent::Notification {
            title: Some("T".into()),
            body: "a;b".into()
        }]
    );
}

#[test]
fn osc_7501_agent_states() {
    let mut s = screen();
    let signals = s.process(
        b"\x1b]7501;state=working\x07x\x1b]7501;state=blocked:exec:kind=permission\x1b\\\x1b]7501;other\x07",
    );
    assert_eq!(
        signals.agent_states,
        ["working", "blocked:exec:kind=permission"]
    );
    assert_eq!(
        signals.into_events(),
        [
            TerminalEvent::AgentState("working".into()),
            TerminalEvent::AgentState("blocked:exec:kind=permission".into())
        ]
    );
    assert_eq!(s.snapshot(0).screen, "x");
}

#[test]
fn signals_into_events_and_merge() {
    let mut a = Signals {
        bells: 2,
        notifications: vec![Notification {
            title: None,
            body: "n1".into(),
        }],
        title: Some("t1".into()),
        agent_states: Vec::new(),
    };
    a.merge(Signals {
        bells: 1,
        notifications: vec![Notification {
            title: None,
            body: "n2".into(),
        }],
        title: None,
        agent_states: Vec::new(),
    });
    assert_eq!(a.bells, 3);
    assert_eq!(
        a.into_events(),
        [
            TerminalEvent::Bell,
            TerminalEvent::Notification {
                title: None,
                body: "n1".into()
            },
            TerminalEvent::Notification {
                title: None,
                body: "n2".into()
            },
            TerminalEvent::Title("t1".into()),
        ]
    );
}

#[test]
fn bracketed_paste_on_and_off() {
    let mut s = screen();
    assert!(!s.bracketed_paste());
    s.process(b"\x1b[?2004h");
    assert!(s.bracketed_paste());
    assert!(s.snapshot(0).bracketed_paste);
    s.process(b"\x1b[?2004l");
    assert!(!s.bracketed_paste());
}

#[test]
fn unterminated_osc_is_bounded() {
    let mut s = screen();
    s.process(b"\x1b]9;");
    let chunk = vec![b'a'; 10_000];
    for _ in 0..50 {
        assert!(s.process(&chunk).is_empty());
    }
    let signals = s.process(b"\x07after");
    assert_eq!(signals.notifications.len(), 1);
    let body = &signals.notifications[0].body;
    // "9;" counts towards the limit.
    assert_eq!(body.len(), MAX_OSC_BYTES - 2);
    assert!(body.bytes().all(|b| b == b'a'));
    assert_eq!(s.snapshot(0).screen, "after");
}

#[test]
fn can_aborts_sequences() {
    let mut s = screen();
    s.process(b"\x1b[3\x18J\x1b]2;x\x18y");
    // The CAN ended the CSI (so `J` is text) and the OSC.
    assert_eq!(s.snapshot(0).screen, "Jy");
}

#[test]
fn invalid_utf8_does_not_panic() {
    let mut s = screen();
    s.process(b"\xff\xfe\x1b]2;\xff\x07\x9b3J");
    // A title that is not UTF-8 is taken as empty.
    assert_eq!(s.title(), "");
}
#[test]
fn wide_characters_once_with_their_combining_marks() {
    let mut s = Screen::new(10, 3, 10);
    s.process("日本語 e\u{301}x\r\n".as_bytes());
    // Three wide characters take six columns: the seventh is the space.
    s.process("🦀🦀🦀🦀🦀🦀".as_bytes());
    let snap = s.snapshot(10);
    assert_eq!(snap.screen, "日本語 e\u{301}x\n🦀🦀🦀🦀🦀\n🦀");
    assert_eq!(snap.cursor, (2, 2));
}

#[test]
fn scrollback_text_after_12000_lines() {
    let mut s = Screen::new(80, 24, 10_000);
    let mut out = Vec::new();
    for i in 0..12_000 {
        out.extend_from_slice(format!("\x1b[1;3{}mline {i}\x1b[0m\r\n", i % 8).as_bytes());
    }
    for chunk in out.chunks(16 * 1024) {
        s.process(chunk);
    }
    let snap = s.snapshot(10_000);
    assert_eq!(snap.scrollback.len(), 10_000);
    assert!(!snap.truncated);
    // 12,000 lines and the empty one at the cursor: 23 on the screen.
    assert_eq!(snap.scrollback[0], "line 1977");
    assert_eq!(snap.scrollback[9_999], "line 11976");
    assert!(snap.screen.starts_with("line 11977\n"));
    assert!(snap.screen.ends_with("line 11999"));
}

#[test]
fn erasing_the_screen_keeps_it_out_of_the_scrollback() {
    let mut s = Screen::new(20, 3, 10);
    s.process(b"a\r\nb\r\nc\r\nd\x1b[H\x1b[2Jx");
    let snap = s.snapshot(10);
    assert_eq!(snap.scrollback, ["a"]);
    assert_eq!(snap.screen, "x");
}

#[test]
fn redraw_keeps_colours_attributes_cursor_and_modes() {
    let mut s = Screen::new(30, 4, 10);
    s.process(
        b"plain \x1b[1;31mbold red\x1b[0m \x1b[38;5;200mindexed\x1b[0m\r\n\
          \x1b[4;48;2;1;2;3munder rgb\x1b[0m\x1b[?1h\x1b[?2004h\x1b[3;5H",
    );
    let mut parser = vt100::Parser::new(4.try_into().unwrap(), 30.try_into().unwrap(), 0);
    parser.process(&s.redraw());
    let screen = parser.screen();
    assert_eq!(screen.contents(), s.snapshot(0).screen);
    assert_eq!(screen.cursor_position(), (2, 4));
    assert_eq!(screen.cursor_position(), s.snapshot(0).cursor);
    let plain = screen.cell(0, 0).unwrap();
    assert!(!plain.bold());
    assert_eq!(plain.fgcolor(), vt100::Color::Default);
    let red = screen.cell(0, 6).unwrap();
    assert!(red.bold());
    assert_eq!(red.fgcolor(), vt100::Color::Idx(1));
    assert_eq!(
        screen.cell(0, 15).unwrap().fgcolor(),
        vt100::Color::Idx(200)
    );
    let under = screen.cell(1, 0).unwrap();
    assert!(under.underline());
    assert_eq!(under.bgcolor(), vt100::Color::Rgb(1, 2, 3));
    assert!(screen.application_cursor());
    assert!(screen.bracketed_paste());
}

/// A small random number generator (xorshift), seeded: the same cases each run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// Output in the shapes a terminal sees: runs of plain lines with colours,
/// and now and then what the plain-lines path must not skip (other
/// controls, scrolling regions, the alternate screen, character sets,
/// wrapping off, erases, titles, UTF-8, synchronized updates, bare LF/CR).
fn random_output(rng: &mut Rng, cols: usize, lines: usize, sgr_every: usize) -> Vec<u8> {
    const SGRS: [&str; 9] = [
        "\x1b[0m",
        "\x1b[m",
        "\x1b[1;32m",
        "\x1b[2m",
        "\x1b[31m",
        "\x1b[7m",
        "\x1b[38;5;208m",
        "\x1b[48;2;10;20;30m",
        "\x1b[0;4m",
    ];
    const OTHERS: [&str; 18] = [
        "\t",
        "\x07",
        "\n",
        "\r",
        "\x1b[2J",
        "\x1b[3J",
        "\x1b[2;4r",
        "\x1b[r",
        "\x1b[?1049h",
        "\x1b[?1049l",
        "\x1b(0",
        "\x1b(B",
        "\x1b[?7l",
        "\x1b[?7h",
        "\x1b[H",
        "\x1b]0;title\x07",
        "\u{e9}\u{4e2d}",
        "\x1b[?2026h",
    ];
    let mut out = String::new();
    for _ in 0..lines {
        if rng.below(120) == 0 {
            out.push_str(OTHERS[rng.below(OTHERS.len())]);
        }
        if rng.below(30) == 0 {
            // Back to the state plain lines can skip the parser in.
            out.push_str("\x1b[?2026l\x1b[r\x1b[?1049l\x1b(B\x1b[?7h");
        }
        let len = match rng.below(10) {
            0 => 0,
            1 => cols * (1 + rng.below(3)),
            _ => rng.below(cols * 2),
        };
        for _ in 0..len {
            if rng.below(sgr_every) == 0 {
                out.push_str(SGRS[rng.below(SGRS.len())]);
            }
            out.push(if rng.below(5) == 0 {
                ' '
            } else {
                (b'a' + rng.below(26) as u8) as char
            });
        }
        if rng.below(25) != 0 {
            out.push_str("\r\n");
        }
    }
    out.into_bytes()
}

#[test]
fn plain_lines_skipping_the_parser_leave_what_the_parser_would() {
    let mut skips = 0;
    for (seed, (cols, rows, kept)) in [(20, 5, 50), (80, 24, 1000), (7, 3, 8), (120, 40, 10_000)]
        .into_iter()
        .enumerate()
    {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (seed as u64 + 1));
        let mut fast = Screen::new(cols, rows, kept);
        let mut parsed = Screen::new(cols, rows, kept);
        parsed.plain_path = false;
        for round in 0..30 {
            // Now and then few colours: attributes carry across many lines.
            let sgr_every = if round % 2 == 0 { 12 } else { 2000 };
            let output = random_output(&mut rng, usize::from(cols), 1000, sgr_every);
            let mut rest = &output[..];
            while !rest.is_empty() {
                // Chunks as a PTY gives them (up to 4 KiB), or larger.
                let most = if round % 3 == 0 { 4096 } else { 20_000 };
                let n = (1 + rng.below(most)).min(rest.len());
                let (chunk, after) = rest.split_at(n);
                rest = after;
                let deferred = rng.below(2) == 0;
                let signals = if deferred {
                    fast.process_deferred(chunk)
                } else {
                    fast.flush();
                    fast.process(chunk)
                };
                assert_eq!(signals, parsed.process(chunk));
                if rng.below(4) != 0 {
                    continue;
                }
                fast.flush();
                let case = format!("{cols}x{rows}, {kept} kept, round {round}");
                assert_eq!(fast.snapshot(kept), parsed.snapshot(kept), "{case}");
            }
            fast.flush();
            let case = format!("{cols}x{rows}, {kept} kept, round {round}");
            assert_eq!(fast.snapshot(kept), parsed.snapshot(kept), "{case}");
            assert_eq!(fast.redraw(), parsed.redraw(), "{case}");
        }
        skips += fast.plain_skips;
    }
    assert!(skips > 100, "the plain-lines path was taken {skips} times");
}
