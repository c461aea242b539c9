//! Following the escape sequences in a terminal's output, as far as the screen
//! needs beyond the parser: to bound OSC sequences, to read the bodies of the
//! OSC sequences the parser does not handle (notifications, announced states),
//! and to see `CSI 3 J`. It follows the same state changes as the parser (vte)
//! for these.

pub(super) const BEL: u8 = 0x07;
pub(super) const CAN: u8 = 0x18;
pub(super) const SUB: u8 = 0x1a;
pub(super) const ESC: u8 = 0x1b;

/// Where the output stands in escape sequences, as far as the screen needs to know
/// beyond the parser: to bound OSC sequences and to see `CSI 3 J`. It follows the
/// same state changes as the parser (vte) for these.
#[derive(Debug, Clone, Copy)]
pub(super) enum Scan {
    Ground,
    Escape { intermediate: bool },
    Csi(CsiScan),
    Osc { len: usize },
}

impl Scan {
    pub(super) fn escape() -> Self {
        Scan::Escape {
            intermediate: false,
        }
    }
}

/// The state after byte `b` of an escape sequence (`intermediate`: whether one
/// was seen), or `None` when it stays the same.
#[inline]
pub(super) fn after_escape_byte(b: u8, intermediate: bool) -> Option<Scan> {
    Some(match b {
        ESC => Scan::escape(),
        CAN | SUB => Scan::Ground,
        0x20..=0x2f => Scan::Escape { intermediate: true },
        b'[' if !intermediate => Scan::Csi(CsiScan::default()),
        b']' if !intermediate => Scan::Osc { len: 0 },
        // Other controls are executed without leaving the sequence.
        0x00..=0x1f | 0x7f => return None,
        _ => Scan::Ground,
    })
}

/// A CSI sequence being read: enough to tell `CSI 3 J` / `CSI ? 3 J` apart.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct CsiScan {
    /// The first parameter's value.
    first: u32,
    /// Whether the first parameter ended (`;` or `:` seen).
    past_first: bool,
    /// A private marker (`<`, `=`, `>`, `?`) at the start.
    private: Option<u8>,
    /// Whether any parameter byte was seen.
    any: bool,
    /// Whether an intermediate byte was seen.
    intermediate: bool,
    /// Whether the parser will ignore the sequence.
    invalid: bool,
}

impl CsiScan {
    /// Reads byte `b` of the sequence; returns the state after it when the
    /// sequence ended (final byte) or was cut off (ESC, CAN, SUB).
    #[inline]
    pub(super) fn byte(&mut self, b: u8) -> Option<Scan> {
        match b {
            ESC => return Some(Scan::escape()),
            CAN | SUB => return Some(Scan::Ground),
            0x00..=0x1f | 0x7f => {}
            0x30..=0x3f => self.param_byte(b),
            0x20..=0x2f => self.intermediate = true,
            0x40..=0x7e => return Some(Scan::Ground),
            _ => {}
        }
        None
    }

    fn param_byte(&mut self, b: u8) {
        if self.intermediate {
            self.invalid = true;
        }
        match b {
            b'0'..=b'9' if !self.past_first => {
                self.first = self
                    .first
                    .saturating_mul(10)
                    .saturating_add(u32::from(b - b'0'));
            }
            b';' | b':' => self.past_first = true,
            0x3c..=0x3f if !self.any => self.private = Some(b),
            0x3c..=0x3f => self.invalid = true,
            _ => {}
        }
        self.any = true;
    }

    /// Whether the sequence, ended by `J`, is `CSI 2 J` (erase the screen),
    /// which the parser answers by pushing the screen into its history.
    pub(super) fn erases_screen(&self) -> bool {
        !self.invalid && !self.intermediate && self.private.is_none() && self.first == 2
    }

    /// Whether it is a DEC private mode sequence (`CSI ? …`), which sets or
    /// resets modes such as the alternate screen.
    pub(super) fn private_mode(&self) -> bool {
        !self.invalid && !self.intermediate && self.private == Some(b'?')
    }

    pub(super) fn erases_scrollback(&self) -> bool {
        !self.invalid
            && !self.intermediate
            && matches!(self.private, None | Some(b'?'))
            && self.first == 3
    }
}
