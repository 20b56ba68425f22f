//! Calibration: the two channels that run beside every sample, the variance gate that refuses
//! noisy recordings, the machine fingerprint and reference, the machine lock and the fsync probe.
//!
//! Pipeline order: [`channels`](mod@channels) (readings) -> [`gate`](mod@gate) (judge them,
//! against [`reference`](mod@reference) keyed by [`fingerprint`](mod@fingerprint)) -> the
//! harness writes or refuses the recording. [`lock`](mod@lock) keeps recordings from
//! overlapping; [`probe`](mod@probe) measures what the storage can flush.

pub mod channels;
pub mod fingerprint;
pub mod gate;
pub mod lock;
pub mod probe;
pub mod reference;

pub use channels::{Reading, cpu_kernel_ms, io_kernel_ms, read_channels};
pub use fingerprint::{Fingerprint, fingerprint, loadavg};
pub use gate::{
    ChannelBounds, ChannelStats, ConfigError, GateConfig, GateFile, GateVerdict, judge,
};
pub use lock::{LockBusy, MachineLock};
pub use reference::{Reference, ReferenceError, load_reference, reference_path, store_reference};

/// The gate refused: the machine was too noisy. The contract's one refusal type (exit code 3).
pub use contract::exit::Refused;
