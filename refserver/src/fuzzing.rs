//! The on-disk codecs on arbitrary bytes, for the fuzz targets in `fuzz/` and the codec
//! property tests: the journal (CRC frames of JSON records replayed into the state) and the
//! nonce log (CRC frames of 40-byte records). Hidden from the docs; not the server's API.

use std::path::Path;

pub use crate::state::Record;
use crate::store::frame;

/// What replaying a journal's bytes gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalReplay {
    /// Intact frames before the first torn or corrupt one.
    pub frames: usize,
    /// Bytes of the intact prefix (where a torn tail would be truncated).
    pub valid_len: usize,
    /// The rebuilt state's head seq, or the one-line replay error.
    pub head_seq: Result<u64, String>,
}

/// Decodes the frames of a journal and replays their records into a fresh state, as the
/// server does on start.
pub fn replay_journal_bytes(buf: &[u8]) -> JournalReplay {
    let (frames, valid_len) = frame::decode_all(buf);
    let records: Vec<Vec<u8>> = frames.iter().map(|f| f.to_vec()).collect();
    JournalReplay {
        frames: frames.len(),
        valid_len,
        head_seq: crate::state::State::replay(&records)
            .map(|s| s.head_seq())
            .map_err(|e| e.to_string()),
    }
}

/// The journal bytes of `records`: one CRC frame of JSON per record, as the server appends.
pub fn encode_journal(records: &[Record]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        let json = serde_json::to_vec(r).unwrap_or_default();
        frame::encode_into(&mut out, &json);
    }
    out
}

/// The `(accepted_at_s, device ‖ nonce)` records a nonce log's bytes hold, as the server
/// reads them on start (records of the wrong size are skipped), and the intact prefix length.
pub fn replay_nonce_log_bytes(buf: &[u8]) -> (Vec<(i64, [u8; 32])>, usize) {
    let (frames, valid_len) = frame::decode_all(buf);
    let records = frames
        .into_iter()
        .filter_map(crate::nonces::decode)
        .collect();
    (records, valid_len)
}

/// The nonce-log bytes of `records`, one frame each, as the server appends them.
pub fn encode_nonce_log(records: &[(i64, [u8; 32])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (at, key) in records {
        frame::encode_into(&mut out, &crate::nonces::encode(*at, key));
    }
    out
}

/// Replays the log file at `path` as the server does on start: reads every intact frame and
/// truncates (fsynced) a torn tail. Returns the records and the number of bytes dropped.
pub fn replay_log_file(path: &Path) -> std::io::Result<(Vec<Vec<u8>>, u64)> {
    crate::store::log::replay(path)
}
