//! Machine fingerprint (what a calibration reference is keyed by) and the load average.
//!
//! Identity fields are the things that change what the channels measure: CPU model and
//! count, memory, kernel, OS, virtualisation, the data dir's filesystem and the CPU
//! governor. The portable parts come from `sysinfo`: CPU brand, total memory, kernel release
//! (`uname`, the same string as `/proc/sys/kernel/osrelease`), host name and the load
//! average. Read by hand, because `sysinfo` does not give the figure in the form the recorded
//! fingerprints hash:
//! - `os`: `/etc/os-release`'s `PRETTY_NAME` (`sysinfo` has only `NAME` and `VERSION_ID`);
//! - `virtualisation`: the `hypervisor` flag of `/proc/cpuinfo` (`sysinfo` has no CPU flags)
//!   and `/sys/class/dmi/id/{sys_vendor,product_name}` (`sysinfo`'s `Product::name` falls
//!   back to a device-tree model where DMI is absent, which would change the string);
//! - `fs_type`: `/proc/self/mountinfo` (`sysinfo`'s `Disks` leaves out tmpfs and network
//!   mounts, and is not a feature this workspace builds);
//! - `cpu_governor`: `/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor` (not read by
//!   `sysinfo` at all).
//!
//! A field that cannot be read is recorded as `unknown` rather than failing, so the
//! fingerprint works everywhere.

use std::collections::BTreeMap;
use std::path::Path;

/// The persisted fingerprint type is `contract`'s; this module fills it from the live machine.
pub use contract::machine::Fingerprint;

const UNKNOWN: &str = "unknown";

/// Reads this machine's fingerprint; `data_dir` is where the server's data (and the io
/// channel) lives, whose filesystem type is part of the identity.
pub fn fingerprint(data_dir: &Path) -> Fingerprint {
    let mut identity = BTreeMap::new();
    let cpuinfo = read("/proc/cpuinfo").unwrap_or_default();
    let sys = sysinfo::System::new_with_specifics(
        sysinfo::RefreshKind::nothing()
            .with_cpu(sysinfo::CpuRefreshKind::nothing())
            .with_memory(sysinfo::MemoryRefreshKind::nothing().with_ram()),
    )
    .ok();
    let cpu_model = sys
        .as_ref()
        .and_then(|s| s.cpus().first())
        .map(|c| c.brand().trim().to_owned())
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| UNKNOWN.to_owned());
    identity.insert("cpu_model".into(), cpu_model);
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get().to_string())
        .unwrap_or_else(|_| UNKNOWN.to_owned());
    identity.insert("logical_cpus".into(), cpus);
    identity.insert(
        "memory_gib".into(),
        sys.as_ref()
            .and_then(|s| memory_gib(s.total_memory()))
            .unwrap_or_else(|| UNKNOWN.into()),
    );
    identity.insert(
        "kernel".into(),
        known(sysinfo::System::kernel_version()).unwrap_or_else(|| UNKNOWN.into()),
    );
    identity.insert("os".into(), os_name());
    identity.insert("arch".into(), std::env::consts::ARCH.to_owned());
    identity.insert("virtualisation".into(), virtualisation(&cpuinfo));
    identity.insert(
        "fs_type".into(),
        fs_type(data_dir).unwrap_or_else(|| UNKNOWN.into()),
    );
    identity.insert(
        "cpu_governor".into(),
        read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
            .unwrap_or_else(|| "not exposed".into()),
    );
    let mut info = BTreeMap::new();
    info.insert(
        "hostname".into(),
        known(sysinfo::System::host_name()).unwrap_or_else(|| UNKNOWN.into()),
    );
    info.insert("data_dir".into(), data_dir.display().to_string());
    Fingerprint { identity, info }
}

/// The 1, 5 and 15 minute load averages (`sysinfo`, from /proc/loadavg; None where
/// unreadable; a figure that does not parse reads as 0, which the kernel never writes).
pub fn loadavg() -> Option<[f64; 3]> {
    let l = sysinfo::System::load_average().ok()?;
    Some([l.one, l.five, l.fifteen])
}

/// A `sysinfo` string as the hand reads it replaced gave it: trimmed, `None` when empty or
/// unreadable.
fn known(value: Result<String, sysinfo::Error>) -> Option<String> {
    value
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// Total memory (MemTotal, in bytes as `sysinfo` reports it) rounded to 0.1 GiB: the exact
/// figure moves by a few pages between kernels. `None` when unknown (0).
fn memory_gib(bytes: u64) -> Option<String> {
    (bytes > 0).then(|| format!("{:.1}", bytes as f64 / (1024.0 * 1024.0 * 1024.0)))
}

fn os_name() -> String {
    let release = read("/etc/os-release").unwrap_or_default();
    release
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_owned())
        .unwrap_or_else(|| std::env::consts::OS.to_owned())
}

/// A hint, not a detector: the DMI vendor/product when exposed, else the cpuinfo
/// `hypervisor` flag, else `none seen`.
fn virtualisation(cpuinfo: &str) -> String {
    let vendor = read("/sys/class/dmi/id/sys_vendor");
    let product = read("/sys/class/dmi/id/product_name");
    let hypervisor_flag = cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|f| f == "hypervisor"));
    match (vendor, product, hypervisor_flag) {
        (Some(v), Some(p), true) => format!("vm: {v} {p}"),
        (Some(v), None, true) => format!("vm: {v}"),
        (_, _, true) => "vm (cpuinfo hypervisor flag)".to_owned(),
        (_, _, false) => "none seen".to_owned(),
    }
}

/// Filesystem type of the mount holding `dir`, from /proc/self/mountinfo (longest matching
/// mount point of the canonical path).
pub fn fs_type(dir: &Path) -> Option<String> {
    let dir = std::fs::canonicalize(dir).ok()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    fs_type_from_mountinfo(&mountinfo, &dir)
}

fn fs_type_from_mountinfo(mountinfo: &str, dir: &Path) -> Option<String> {
    let mut best: Option<(usize, String)> = None;
    for line in mountinfo.lines() {
        // Fields: id parent major:minor root mount_point options [optional...] - fstype source super
        let fields: Vec<&str> = line.split_whitespace().collect();
        let Some(dash) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        let (Some(mount_point), Some(fstype)) = (fields.get(4), fields.get(dash + 1)) else {
            continue;
        };
        let mount_point = mount_point.replace("\\040", " ");
        if dir.starts_with(&mount_point) {
            let depth = Path::new(&mount_point).components().count();
            // Later lines for the same mount point shadow earlier ones (over-mounts).
            if best.as_ref().is_none_or(|(d, _)| depth >= *d) {
                best = Some((depth, (*fstype).to_owned()));
            }
        }
    }
    best.map(|(_, t)| t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_is_stable_and_depends_only_on_identity() {
        let mut a = Fingerprint {
            identity: BTreeMap::from([
                ("cpu_model".into(), "X".into()),
                ("kernel".into(), "6".into()),
            ]),
            info: BTreeMap::new(),
        };
        let id = a.id();
        assert_eq!(id.len(), 16);
        // sha256("cpu_model=X\nkernel=6\n"), first 8 bytes.
        assert_eq!(id, "0fd791adaeb3fa54");
        a.info.insert("hostname".into(), "h".into());
        assert_eq!(a.id(), id);
        a.identity.insert("kernel".into(), "7".into());
        assert_ne!(a.id(), id);
    }

    #[test]
    fn mountinfo_picks_the_longest_mount_point() {
        let text = "\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
30 22 0:25 / /tmp rw,nosuid shared:5 - tmpfs tmpfs rw
31 22 0:26 / /tmpx rw - xfs /dev/vdb rw
";
        assert_eq!(
            fs_type_from_mountinfo(text, Path::new("/tmp/a")).as_deref(),
            Some("tmpfs")
        );
        assert_eq!(
            fs_type_from_mountinfo(text, Path::new("/home/u")).as_deref(),
            Some("ext4")
        );
        assert_eq!(
            fs_type_from_mountinfo(text, Path::new("/tmpx")).as_deref(),
            Some("xfs")
        );
    }

    /// What the hand parsers this replaced read (MemTotal from /proc/meminfo, the first
    /// "model name" of /proc/cpuinfo): `sysinfo` must give the same identity values, or every
    /// stored calibration reference and recorded fingerprint of this machine would change.
    #[test]
    fn sysinfo_agrees_with_proc() {
        let dir = tempfile::tempdir().unwrap();
        let fp = fingerprint(dir.path());
        if let Some(meminfo) = read("/proc/meminfo") {
            let kib: f64 = meminfo
                .lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .unwrap()
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .unwrap();
            assert_eq!(
                fp.identity["memory_gib"],
                format!("{:.1}", kib / (1024.0 * 1024.0))
            );
        }
        let cpuinfo = read("/proc/cpuinfo").unwrap_or_default();
        if let Some(model) = cpuinfo.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == "model name").then(|| v.trim().to_owned())
        }) {
            assert_eq!(fp.identity["cpu_model"], model);
        }
        assert_eq!(memory_gib(0), None);
        assert_eq!(memory_gib(3 << 30).as_deref(), Some("3.0"));
    }

    /// What the hand reads this replaced read (`/proc/sys/kernel/osrelease`, `.../hostname`,
    /// `/proc/loadavg`): the kernel is hashed into the machine id, so `sysinfo` must give the
    /// very same string, or every stored calibration reference of this machine would change.
    #[test]
    fn sysinfo_agrees_with_proc_for_kernel_hostname_and_load() {
        let dir = tempfile::tempdir().unwrap();
        let fp = fingerprint(dir.path());
        let osrelease = read("/proc/sys/kernel/osrelease").expect("a Linux /proc");
        assert_eq!(fp.identity["kernel"], osrelease);
        let hostname = read("/proc/sys/kernel/hostname").expect("a Linux /proc");
        assert_eq!(fp.info["hostname"], hostname);
        // The kernel updates the load average every 5 s: `sysinfo`'s reading equals one taken
        // just before or just after it.
        let parse = |text: String| -> [f64; 3] {
            let mut it = text.split_whitespace().map(|s| s.parse::<f64>().unwrap());
            [it.next().unwrap(), it.next().unwrap(), it.next().unwrap()]
        };
        let before = parse(read("/proc/loadavg").unwrap());
        let got = loadavg().expect("a load average");
        let after = parse(read("/proc/loadavg").unwrap());
        assert!(
            got == before || got == after,
            "{got:?} vs {before:?} / {after:?}"
        );
    }

    #[test]
    fn this_machine_has_a_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        let fp = fingerprint(dir.path());
        for key in ["cpu_model", "logical_cpus", "kernel", "fs_type", "arch"] {
            assert!(fp.identity.contains_key(key), "{key}");
        }
        assert_eq!(fingerprint(dir.path()).id(), fp.id());
    }
}
