//! The histogram codec: a latency histogram persists as base64 (standard alphabet, padded) of
//! its HdrHistogram V2 + DEFLATE serialisation, values in microseconds. The sample writes it,
//! the reports read it; both go through here.

use base64::Engine;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};

/// Why a persisted histogram could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HistogramError {
    #[error("not base64: {0}")]
    Base64(String),
    #[error("not an HdrHistogram V2 serialisation: {0}")]
    Hdr(String),
}

/// Encodes a histogram; `None` only when the serialiser fails (it does not for a valid one).
pub fn encode(h: &Histogram<u64>) -> Option<String> {
    let mut buf = Vec::new();
    V2DeflateSerializer::new().serialize(h, &mut buf).ok()?;
    Some(base64::engine::general_purpose::STANDARD.encode(buf))
}

/// Decodes what [`encode`] wrote (surrounding whitespace ignored).
pub fn decode(b64: &str) -> Result<Histogram<u64>, HistogramError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|e| HistogramError::Base64(e.to_string()))?;
    Deserializer::new()
        .deserialize(&mut std::io::Cursor::new(bytes))
        .map_err(|e| HistogramError::Hdr(format!("{e:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_every_count() {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for v in [1u64, 7, 7, 250, 12_345, 9_000_000] {
            h.record(v).unwrap();
        }
        let back = decode(&encode(&h).unwrap()).unwrap();
        assert_eq!(back, h);
        assert_eq!(back.len(), 6);
        assert_eq!(back.count_at(7), 2);
    }

    #[test]
    fn garbage_is_named() {
        assert!(matches!(
            decode("not base64!"),
            Err(HistogramError::Base64(_))
        ));
        assert!(matches!(decode("AAAA"), Err(HistogramError::Hdr(_))));
    }
}
