//! Whether a terminal's program waits for input: the terminal's foreground
//! process blocked reading the terminal (a shell at its prompt, `read`, a
//! script's `input()`), read from `/proc`. For the programs that tell no
//! state of their own (no hooks, no quiet time): it tells `idle` from
//! `working` for them. Linux on x86-64 and AArch64; anything `/proc` does
//! not say (another architecture, a process gone, one it may not read) is
//! unknown. Owns nothing; imports nothing of the app.

/// The system calls a process waiting for its terminal sits in: `read` (its
/// number), and the polls (`poll`, `select`, `pselect6`, `ppoll`), which
/// are taken as waiting on standard input.
#[cfg(target_arch = "x86_64")]
const CALLS: Option<(i64, &[i64])> = Some((0, &[7, 23, 270, 271]));
#[cfg(target_arch = "aarch64")]
const CALLS: Option<(i64, &[i64])> = Some((63, &[72, 73]));
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const CALLS: Option<(i64, &[i64])> = None;

/// Whether the foreground process of the terminal that process `pid` runs
/// in waits to read that terminal; `None` when `/proc` does not say.
pub(crate) fn waits_for_input(pid: u32) -> Option<bool> {
    let (read, polls) = CALLS?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let foreground = foreground_group(&stat)?;
    let call = std::fs::read_to_string(format!("/proc/{foreground}/syscall")).ok()?;
    let mut words = call.split_whitespace();
    // `running` when it runs, `-1 …` when it sleeps outside a system call.
    let Some(number) = words.next().and_then(|w| w.parse::<i64>().ok()) else {
        return Some(false);
    };
    let fd = if number == read {
        let first = words.next()?;
        u64::from_str_radix(first.trim_start_matches("0x"), 16).ok()?
    } else if polls.contains(&number) {
        0
    } else {
        return Some(false);
    };
    let file = std::fs::read_link(format!("/proc/{foreground}/fd/{fd}")).ok()?;
    Some(file.starts_with("/dev/pts/") || file.starts_with("/dev/tty"))
}

/// The foreground process group of the terminal, from a `/proc/<pid>/stat`
/// line: the sixth field after the command (whose name may hold spaces and
/// parentheses, so it is found from the last `)`).
fn foreground_group(stat: &str) -> Option<i32> {
    let (_, after) = stat.rsplit_once(')')?;
    let tpgid: i32 = after.split_whitespace().nth(5)?.parse().ok()?;
    (tpgid > 0).then_some(tpgid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_foreground_group_is_read_past_an_odd_command_name() {
        let stat = "4242 (a (b) c) S 1 4242 4242 34816 4250 4194560 0 0";
        assert_eq!(foreground_group(stat), Some(4250));
        assert_eq!(foreground_group("1 (init) S 0 1 1 0 -1 4194560"), None);
        assert_eq!(foreground_group("garbage"), None);
    }

    #[test]
    fn a_process_that_is_gone_is_unknown() {
        assert_eq!(waits_for_input(u32::MAX), None);
    }
}
