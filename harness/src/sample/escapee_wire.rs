//! The sample process's messages to its guard over a pipe (`sample::guard` reads them,
//! `sample::subreaper` writes the escapee lists): the format, its encoders and the guard's
//! allocation-free reader. Its own module so that neither side imports the other.

/// The most live escapees a guard keeps (pids with their start times, 16 bytes each: 16 KiB
/// on the guard's stack). A thousand processes that left a target's process group is already
/// far past any server this project targets (Apache's and nginx's workers stay in the group);
/// past it, the rest are not handed to the guard, and the sample says so on stderr once.
pub const MAX_ESCAPEES: usize = 1024;

/// One message from the sample process to its guard. On the pipe: `d` (disarm), `+PID START\n`
/// (list an escapee with its kernel start time), `-PID\n` (it is gone). Each is written whole
/// in one `write` under `PIPE_BUF`, so messages from two threads never interleave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Msg {
    Disarm,
    Add(libc::pid_t, u64),
    Remove(libc::pid_t),
}

/// `+PID START\n`: lists an escapee.
pub(crate) fn encode_add(pid: u32, start: u64) -> String {
    format!("+{pid} {start}\n")
}

/// `-PID\n`: the escapee is gone.
pub(crate) fn encode_remove(pid: u32) -> String {
    format!("-{pid}\n")
}

/// The guard's reader of [`Msg`]s, fed a byte at a time (no allocation: it runs in the forked
/// guard). A malformed message is dropped whole at its newline; a stray byte outside a
/// message is ignored.
#[derive(Debug, Default)]
pub(crate) struct Wire {
    /// `0` between messages, else `+` or `-`.
    op: u8,
    /// Which number is being read (0: the pid, 1: the start time).
    field: u8,
    digits: [u8; 2],
    nums: [u64; 2],
    bad: bool,
}

impl Wire {
    pub(crate) fn feed(&mut self, b: u8) -> Option<Msg> {
        if self.op == 0 {
            match b {
                b'd' => return Some(Msg::Disarm),
                b'+' | b'-' => {
                    *self = Wire {
                        op: b,
                        ..Wire::default()
                    }
                }
                _ => {}
            }
            return None;
        }
        let f = usize::from(self.field);
        match b {
            b'0'..=b'9' => {
                self.nums[f] = self.nums[f]
                    .saturating_mul(10)
                    .saturating_add(u64::from(b - b'0'));
                self.digits[f] = self.digits[f].saturating_add(1);
            }
            b' ' if self.op == b'+' && self.field == 0 => self.field = 1,
            b'\n' => {
                let w = std::mem::take(self);
                let pid = libc::pid_t::try_from(w.nums[0]).ok().filter(|&p| p > 0)?;
                if w.bad || w.digits[0] == 0 || w.digits[0] > 10 {
                    return None;
                }
                return match w.op {
                    b'+' if w.field == 1 && (1..=20).contains(&w.digits[1]) => {
                        Some(Msg::Add(pid, w.nums[1]))
                    }
                    b'-' if w.field == 0 => Some(Msg::Remove(pid)),
                    _ => None,
                };
            }
            _ => self.bad = true,
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_reads_whole_messages_and_drops_malformed_ones() {
        let mut w = Wire::default();
        let mut got = Vec::new();
        // Split anywhere (the guard reads what the pipe holds); garbage between messages and
        // inside them is dropped at the newline.
        let text = b"+12 345\n-12\nx+7 8\n+0 1\n+5\n-5 6\n+1x 2\n+99999999999 1\n+3 4\nd";
        for chunk in text.chunks(3) {
            for &b in chunk {
                got.extend(w.feed(b));
            }
        }
        assert_eq!(
            got,
            [
                Msg::Add(12, 345),
                Msg::Remove(12),
                Msg::Add(7, 8),
                Msg::Add(3, 4),
                Msg::Disarm
            ]
        );
        assert_eq!(encode_add(12, 345).as_bytes(), b"+12 345\n");
        assert_eq!(encode_remove(12).as_bytes(), b"-12\n");
    }
}
