//! Pure parsers for the /proc files this crate reads: text in, numbers out, no I/O.
//!
//! Formats follow the kernel's `Documentation/filesystems/proc.rst`,
//! `Documentation/scheduler/sched-stats.rst` and `Documentation/accounting/psi.rst`.

use crate::Error;

/// `/proc/<pid>/task/<tid>/schedstat`: three numbers on one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Schedstat {
    /// Time spent on the CPU, ns (the scheduler's `sum_exec_runtime`: exact, not tick-sampled).
    pub cpu_ns: u64,
    /// Time spent runnable but waiting on a run queue, ns.
    pub run_delay_ns: u64,
    /// Number of timeslices run on this CPU.
    pub timeslices: u64,
}

/// Parses a `schedstat` line: `<cpu ns> <run-queue delay ns> <timeslices>`.
pub fn schedstat(text: &str, what: &str) -> Result<Schedstat, Error> {
    let mut it = text.split_ascii_whitespace();
    let mut next = |field: &str| -> Result<u64, Error> {
        let tok = it
            .next()
            .ok_or_else(|| Error::parse(what, format!("missing {field}")))?;
        tok.parse()
            .map_err(|_| Error::parse(what, format!("{field} {tok:?} is not a number")))
    };
    Ok(Schedstat {
        cpu_ns: next("cpu ns")?,
        run_delay_ns: next("run delay ns")?,
        timeslices: next("timeslices")?,
    })
}

/// The fields of `/proc/<pid>/stat` (or `.../task/<tid>/stat`) this crate uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    /// Field 2 without its parentheses: the thread name, at most 15 bytes, may hold spaces and `)`.
    pub comm: String,
    /// Field 3, one letter (`R`, `S`, `D`, `Z`, ...).
    pub state: char,
    /// Field 4.
    pub ppid: u32,
    /// Field 5: the process group.
    pub pgrp: u32,
    /// Field 14, clock ticks. For a process: all its threads, including threads that have exited.
    pub utime_ticks: u64,
    /// Field 15, clock ticks; as `utime_ticks`.
    pub stime_ticks: u64,
    /// Fields 16 + 17 (cutime + cstime), clock ticks: the CPU of the children this process
    /// has reaped (and of what they reaped in turn).
    pub reaped_children_ticks: u64,
    /// Field 20.
    pub num_threads: u64,
    /// Field 22, clock ticks after boot: with the pid, it tells a reused pid from the old one.
    pub starttime_ticks: u64,
}

/// Parses a `stat` line. The name sits in parentheses and may itself contain `)` or spaces, so
/// the fields after it are found from the *last* `)`.
pub fn stat(text: &str, what: &str) -> Result<Stat, Error> {
    let open = text
        .find('(')
        .ok_or_else(|| Error::parse(what, "no '(' before the name"))?;
    let close = text
        .rfind(')')
        .ok_or_else(|| Error::parse(what, "no ')' after the name"))?;
    if close < open {
        return Err(Error::parse(what, "')' before '('"));
    }
    let comm = text[open + 1..close].to_string();
    // Fields from 3 on; index 0 here is field 3.
    let rest: Vec<&str> = text[close + 1..].split_ascii_whitespace().collect();
    let field = |n: usize| -> Result<&str, Error> {
        rest.get(n - 3)
            .copied()
            .ok_or_else(|| Error::parse(what, format!("missing field {n}")))
    };
    let num = |n: usize| -> Result<u64, Error> {
        let tok = field(n)?;
        tok.parse()
            .map_err(|_| Error::parse(what, format!("field {n} {tok:?} is not a number")))
    };
    let state = field(3)?
        .chars()
        .next()
        .ok_or_else(|| Error::parse(what, "empty state"))?;
    let ppid = u32::try_from(num(4)?).map_err(|_| Error::parse(what, "ppid out of range"))?;
    let pgrp = u32::try_from(num(5)?).map_err(|_| Error::parse(what, "pgrp out of range"))?;
    Ok(Stat {
        comm,
        state,
        ppid,
        pgrp,
        utime_ticks: num(14)?,
        stime_ticks: num(15)?,
        reaped_children_ticks: num(16)?.saturating_add(num(17)?),
        num_threads: num(20)?,
        starttime_ticks: num(22)?,
    })
}

/// Voluntary and involuntary context switches from a `status` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CtxSwitches {
    /// `voluntary_ctxt_switches`: the task blocked (I/O, a lock, epoll, sleep).
    pub voluntary: u64,
    /// `nonvoluntary_ctxt_switches`: the task was preempted (its timeslice ran out or a
    /// higher-priority task woke): a sign of CPU contention.
    pub nonvoluntary: u64,
}

impl std::ops::Add for CtxSwitches {
    type Output = Self;
    fn add(self, other: Self) -> Self {
        Self {
            voluntary: self.voluntary + other.voluntary,
            nonvoluntary: self.nonvoluntary + other.nonvoluntary,
        }
    }
}

impl CtxSwitches {
    /// Field-wise difference, saturating at zero.
    pub fn saturating_sub(self, earlier: Self) -> Self {
        Self {
            voluntary: self.voluntary.saturating_sub(earlier.voluntary),
            nonvoluntary: self.nonvoluntary.saturating_sub(earlier.nonvoluntary),
        }
    }
}

/// The value in KiB of one `kB` line of a `status` file (`VmRSS`, `VmHWM`, ...); `None` when
/// the line is absent (a kernel thread, or a zombie, has no memory lines).
pub fn status_kib(text: &str, what: &str, key: &str) -> Result<Option<u64>, Error> {
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix(key).and_then(|r| r.strip_prefix(':')) {
            let value = rest.trim().trim_end_matches("kB").trim();
            return parse_num(value, what, key).map(Some);
        }
    }
    Ok(None)
}

/// Parses the two context-switch lines of a `status` file (other lines are ignored).
pub fn status_ctx_switches(text: &str, what: &str) -> Result<CtxSwitches, Error> {
    let mut vol = None;
    let mut nonvol = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("voluntary_ctxt_switches:") {
            vol = Some(parse_num(v.trim(), what, "voluntary_ctxt_switches")?);
        } else if let Some(v) = line.strip_prefix("nonvoluntary_ctxt_switches:") {
            nonvol = Some(parse_num(v.trim(), what, "nonvoluntary_ctxt_switches")?);
        }
    }
    Ok(CtxSwitches {
        voluntary: vol.ok_or_else(|| Error::parse(what, "no voluntary_ctxt_switches line"))?,
        nonvoluntary: nonvol
            .ok_or_else(|| Error::parse(what, "no nonvoluntary_ctxt_switches line"))?,
    })
}

/// `/proc/<pid>/io`: per process, counting all its threads including exited ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Io {
    /// Bytes passed to read-like syscalls (page cache hits included).
    pub rchar: u64,
    /// Bytes passed to write-like syscalls.
    pub wchar: u64,
    /// Read-like syscalls.
    pub syscr: u64,
    /// Write-like syscalls.
    pub syscw: u64,
    /// Bytes the process caused to be fetched from storage.
    pub read_bytes: u64,
    /// Bytes the process caused to be sent to storage (dirtied page cache, at dirtying time).
    pub write_bytes: u64,
    /// Dirtied bytes that were never written because the file was truncated or deleted.
    pub cancelled_write_bytes: u64,
}

impl std::ops::Add for Io {
    type Output = Self;
    fn add(self, o: Self) -> Self {
        Self {
            rchar: self.rchar + o.rchar,
            wchar: self.wchar + o.wchar,
            syscr: self.syscr + o.syscr,
            syscw: self.syscw + o.syscw,
            read_bytes: self.read_bytes + o.read_bytes,
            write_bytes: self.write_bytes + o.write_bytes,
            cancelled_write_bytes: self.cancelled_write_bytes + o.cancelled_write_bytes,
        }
    }
}

impl Io {
    /// Every field with its name in the kernel's file, in the file's order.
    pub fn fields(&self) -> [(&'static str, u64); 7] {
        [
            ("rchar", self.rchar),
            ("wchar", self.wchar),
            ("syscr", self.syscr),
            ("syscw", self.syscw),
            ("read_bytes", self.read_bytes),
            ("write_bytes", self.write_bytes),
            ("cancelled_write_bytes", self.cancelled_write_bytes),
        ]
    }

    /// Field-wise difference, saturating at zero.
    pub fn saturating_sub(self, e: Self) -> Self {
        Self {
            rchar: self.rchar.saturating_sub(e.rchar),
            wchar: self.wchar.saturating_sub(e.wchar),
            syscr: self.syscr.saturating_sub(e.syscr),
            syscw: self.syscw.saturating_sub(e.syscw),
            read_bytes: self.read_bytes.saturating_sub(e.read_bytes),
            write_bytes: self.write_bytes.saturating_sub(e.write_bytes),
            cancelled_write_bytes: self
                .cancelled_write_bytes
                .saturating_sub(e.cancelled_write_bytes),
        }
    }
}

/// Parses `/proc/<pid>/io` (`name: value` lines; all seven must be present).
pub fn io(text: &str, what: &str) -> Result<Io, Error> {
    let mut out = Io::default();
    let mut seen = 0u8;
    for line in text.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let slot = match name.trim() {
            "rchar" => &mut out.rchar,
            "wchar" => &mut out.wchar,
            "syscr" => &mut out.syscr,
            "syscw" => &mut out.syscw,
            "read_bytes" => &mut out.read_bytes,
            "write_bytes" => &mut out.write_bytes,
            "cancelled_write_bytes" => &mut out.cancelled_write_bytes,
            _ => continue,
        };
        *slot = parse_num(value.trim(), what, name.trim())?;
        seen += 1;
    }
    if seen < 7 {
        return Err(Error::parse(
            what,
            format!("{seen} of the 7 io fields present"),
        ));
    }
    Ok(out)
}

/// One PSI resource: cumulative stall totals in µs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pressure {
    /// `some total=`: time at least one runnable task was stalled on the resource, µs.
    pub some_total_us: u64,
    /// `full total=`: time all non-idle tasks were stalled at once, µs. Kernels before 5.13
    /// have no `full` line for cpu; `None` then.
    pub full_total_us: Option<u64>,
}

/// Parses `/proc/pressure/{cpu,io,memory}`.
pub fn pressure(text: &str, what: &str) -> Result<Pressure, Error> {
    let mut some = None;
    let mut full = None;
    for line in text.lines() {
        let mut words = line.split_ascii_whitespace();
        let kind = words.next();
        let total = words.find_map(|w| w.strip_prefix("total="));
        let Some(total) = total else { continue };
        let v = parse_num(total, what, "total")?;
        match kind {
            Some("some") => some = Some(v),
            Some("full") => full = Some(v),
            _ => {}
        }
    }
    Ok(Pressure {
        some_total_us: some.ok_or_else(|| Error::parse(what, "no 'some ... total=' line"))?,
        full_total_us: full,
    })
}

/// The aggregate `cpu` line of `/proc/stat`, in clock ticks. Fields a kernel does not print
/// (old kernels stop after `iowait`, `irq`, `softirq` or `steal`) are `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    /// Time in user mode.
    pub user: u64,
    /// Time in user mode at low priority.
    pub nice: u64,
    /// Time in kernel mode.
    pub system: u64,
    /// Idle time.
    pub idle: u64,
    /// Idle while I/O was outstanding (not reliable per the kernel docs; kept for reports).
    pub iowait: Option<u64>,
    /// Servicing hard interrupts.
    pub irq: Option<u64>,
    /// Servicing soft interrupts.
    pub softirq: Option<u64>,
    /// Time the hypervisor ran something else while the VM's vCPU wanted to run.
    pub steal: Option<u64>,
    /// Running a guest (already inside `user`).
    pub guest: Option<u64>,
    /// Running a niced guest (already inside `nice`).
    pub guest_nice: Option<u64>,
}

impl CpuTimes {
    /// Busy time: user + nice + system + irq + softirq + steal (iowait is idle time, not
    /// load; guest time is already inside user and nice).
    pub fn busy(&self) -> u64 {
        self.user
            + self.nice
            + self.system
            + self.irq.unwrap_or(0)
            + self.softirq.unwrap_or(0)
            + self.steal.unwrap_or(0)
    }

    /// Sum of the fields that count real time (guest fields are already inside user/nice).
    pub fn total(&self) -> u64 {
        self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait.unwrap_or(0)
            + self.irq.unwrap_or(0)
            + self.softirq.unwrap_or(0)
            + self.steal.unwrap_or(0)
    }
}

/// Parses the first (`cpu `) line of `/proc/stat`.
pub fn proc_stat_cpu(text: &str, what: &str) -> Result<CpuTimes, Error> {
    let line = text
        .lines()
        .find(|l| l.starts_with("cpu "))
        .ok_or_else(|| Error::parse(what, "no aggregate 'cpu ' line"))?;
    let nums = line
        .split_ascii_whitespace()
        .skip(1)
        .map(|t| parse_num(t, what, "cpu"))
        .collect::<Result<Vec<u64>, Error>>()?;
    if nums.len() < 4 {
        return Err(Error::parse(
            what,
            format!("cpu line has {} fields, need 4", nums.len()),
        ));
    }
    let opt = |i: usize| nums.get(i).copied();
    Ok(CpuTimes {
        user: nums[0],
        nice: nums[1],
        system: nums[2],
        idle: nums[3],
        iowait: opt(4),
        irq: opt(5),
        softirq: opt(6),
        steal: opt(7),
        guest: opt(8),
        guest_nice: opt(9),
    })
}

fn parse_num(tok: &str, what: &str, field: &str) -> Result<u64, Error> {
    tok.parse()
        .map_err(|_| Error::parse(what, format!("{field} {tok:?} is not a number")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_kib_reads_one_line_and_names_a_bad_value() {
        let text = "Name:\tx\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\n";
        assert_eq!(status_kib(text, "status", "VmRSS").unwrap(), Some(1024));
        assert_eq!(status_kib(text, "status", "VmHWM").unwrap(), Some(2048));
        assert_eq!(status_kib(text, "status", "VmSwap").unwrap(), None);
        // A key is matched whole: `VmRSS` is not `VmRSSx`.
        assert_eq!(
            status_kib("VmRSSx: 5 kB\n", "status", "VmRSS").unwrap(),
            None
        );
        let e = status_kib("VmRSS: lots kB\n", "/proc/1/status", "VmRSS").unwrap_err();
        assert!(e.to_string().contains("/proc/1/status"), "{e}");
    }

    #[test]
    fn busy_time_leaves_out_idle_and_iowait() {
        let t = proc_stat_cpu("cpu  10 20 30 1000 500 6 7 8 0 0\n", "stat").unwrap();
        assert_eq!(t.busy(), 10 + 20 + 30 + 6 + 7 + 8);
    }

    #[test]
    fn io_fields_are_named_as_in_the_file() {
        let io = Io {
            rchar: 1,
            wchar: 2,
            syscr: 3,
            syscw: 4,
            read_bytes: 5,
            write_bytes: 6,
            cancelled_write_bytes: 7,
        };
        let names: Vec<&str> = io.fields().iter().map(|f| f.0).collect();
        assert_eq!(
            names,
            [
                "rchar",
                "wchar",
                "syscr",
                "syscw",
                "read_bytes",
                "write_bytes",
                "cancelled_write_bytes"
            ]
        );
        assert_eq!(io.fields().iter().map(|f| f.1).sum::<u64>(), 28);
    }

    #[test]
    fn schedstat_exact() {
        let s = schedstat("1183729837 99912 4721\n", "f").unwrap();
        assert_eq!(
            s,
            Schedstat {
                cpu_ns: 1_183_729_837,
                run_delay_ns: 99_912,
                timeslices: 4721
            }
        );
        assert!(
            schedstat("12 x 3", "f")
                .unwrap_err()
                .to_string()
                .contains("run delay ns")
        );
        assert!(schedstat("12", "f").is_err());
    }

    #[test]
    fn stat_with_spaces_and_parens_in_name() {
        // A real line from a VM's kernel, with the name replaced by a hostile one.
        let line = "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 137 0 0 0 57 31 0 0 20 0 3 0 \
                    123456 12345678 456 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
        let s = stat(line, "f").unwrap();
        assert_eq!(s.comm, "a) b (c");
        assert_eq!(s.state, 'S');
        assert_eq!(s.ppid, 1);
        assert_eq!(s.utime_ticks, 57);
        assert_eq!(s.stime_ticks, 31);
        assert_eq!(s.num_threads, 3);
        assert_eq!(s.starttime_ticks, 123_456);
        assert!(
            stat("4242 (x) S 1 2", "f")
                .unwrap_err()
                .to_string()
                .contains("missing field")
        );
    }

    #[test]
    fn status_ctx() {
        let text = "Name:\tburn\nState:\tR (running)\nvoluntary_ctxt_switches:\t17\nnonvoluntary_ctxt_switches:\t203\n";
        assert_eq!(
            status_ctx_switches(text, "f").unwrap(),
            CtxSwitches {
                voluntary: 17,
                nonvoluntary: 203
            }
        );
        assert!(status_ctx_switches("Name:\tx\n", "f").is_err());
    }

    #[test]
    fn io_exact() {
        let text = "rchar: 6976\nwchar: 12\nsyscr: 10\nsyscw: 2\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n";
        let io = io(text, "f").unwrap();
        assert_eq!(
            io,
            Io {
                rchar: 6976,
                wchar: 12,
                syscr: 10,
                syscw: 2,
                read_bytes: 4096,
                write_bytes: 8192,
                cancelled_write_bytes: 0
            }
        );
        assert!(
            super::io("rchar: 1\n", "f")
                .unwrap_err()
                .to_string()
                .contains("1 of the 7")
        );
    }

    #[test]
    fn pressure_exact_and_without_full() {
        let text = "some avg10=23.78 avg60=6.93 avg300=9.70 total=110532233\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(
            pressure(text, "f").unwrap(),
            Pressure {
                some_total_us: 110_532_233,
                full_total_us: Some(0)
            }
        );
        let old = "some avg10=0.00 avg60=0.00 avg300=0.00 total=42\n";
        assert_eq!(
            pressure(old, "f").unwrap(),
            Pressure {
                some_total_us: 42,
                full_total_us: None
            }
        );
        assert!(pressure("", "f").is_err());
    }

    #[test]
    fn proc_stat_full_and_old() {
        let text =
            "cpu  153719 0 26451 45409 2604 0 172 514 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1\n";
        let c = proc_stat_cpu(text, "f").unwrap();
        assert_eq!(c.user, 153_719);
        assert_eq!(c.system, 26_451);
        assert_eq!(c.idle, 45_409);
        assert_eq!(c.steal, Some(514));
        assert_eq!(c.total(), 153_719 + 26_451 + 45_409 + 2604 + 172 + 514);
        let old = proc_stat_cpu("cpu  1 2 3 4 5\n", "f").unwrap();
        assert_eq!((old.iowait, old.steal), (Some(5), None));
        assert!(proc_stat_cpu("cpu0 1 2 3 4\n", "f").is_err());
    }
}
