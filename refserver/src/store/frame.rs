//! The journal frame codec: `u32 LE payload length`, `u32 LE CRC-32 of the payload`, payload.
//!
//! Used by both append-only logs (the journal and the nonce log). A frame that does not fit in
//! what is left of the file, or whose CRC does not match, ends the log: on replay everything
//! from it on is a torn tail and is truncated.

/// Bytes before the payload: length + CRC.
pub const HEADER: usize = 8;

/// Largest payload a frame may carry. A version post is at most a 4 MiB JSON body (protocol
/// page, "Limits"), so a record never comes near this; a larger length field is corruption.
pub const MAX_PAYLOAD: usize = 16 * 1024 * 1024;

/// Appends one frame holding `payload` to `out`.
pub fn encode_into(out: &mut Vec<u8>, payload: &[u8]) {
    debug_assert!(payload.len() <= MAX_PAYLOAD);
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// One frame holding `payload`.
pub fn encode(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + payload.len());
    encode_into(&mut out, payload);
    out
}

/// What is at the front of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A whole, intact frame of `consumed` bytes.
    Frame { payload: &'a [u8], consumed: usize },
    /// The buffer is empty: a clean end.
    End,
    /// A partial or corrupt frame: the log ends here.
    Torn,
}

/// Decodes the frame at the front of `buf`.
pub fn decode(buf: &[u8]) -> Decoded<'_> {
    if buf.is_empty() {
        return Decoded::End;
    }
    if buf.len() < HEADER {
        return Decoded::Torn;
    }
    let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    let crc = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]);
    if len > MAX_PAYLOAD || buf.len() - HEADER < len {
        return Decoded::Torn;
    }
    let payload = &buf[HEADER..HEADER + len];
    if crc32fast::hash(payload) != crc {
        return Decoded::Torn;
    }
    Decoded::Frame {
        payload,
        consumed: HEADER + len,
    }
}

/// Every intact frame from the start of `buf`, and the length of the intact prefix (where a
/// torn tail begins, or `buf.len()`).
pub fn decode_all(buf: &[u8]) -> (Vec<&[u8]>, usize) {
    let mut frames = Vec::new();
    let mut at = 0;
    while let Decoded::Frame { payload, consumed } = decode(&buf[at..]) {
        frames.push(payload);
        at += consumed;
    }
    (frames, at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn layout_is_length_crc_payload() {
        let f = encode(b"abc");
        assert_eq!(&f[..4], &3u32.to_le_bytes());
        assert_eq!(&f[4..8], &crc32fast::hash(b"abc").to_le_bytes());
        assert_eq!(&f[8..], b"abc");
    }

    #[test]
    fn empty_buffer_is_a_clean_end_and_short_header_is_torn() {
        assert_eq!(decode(&[]), Decoded::End);
        assert_eq!(decode(&[1, 0, 0]), Decoded::Torn);
    }

    #[test]
    fn absurd_length_is_torn_not_an_allocation() {
        let mut f = encode(b"x");
        f[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(decode(&f), Decoded::Torn);
    }

    proptest! {
        #[test]
        fn round_trip(payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..20)) {
            let mut buf = Vec::new();
            for p in &payloads {
                encode_into(&mut buf, p);
            }
            let (frames, valid) = decode_all(&buf);
            prop_assert_eq!(valid, buf.len());
            prop_assert_eq!(frames.len(), payloads.len());
            for (f, p) in frames.iter().zip(&payloads) {
                prop_assert_eq!(*f, p.as_slice());
            }
        }

        #[test]
        fn a_cut_anywhere_keeps_exactly_the_whole_frames_before_it(
            payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..100), 1..10),
            cut_frac in 0.0f64..1.0,
        ) {
            let mut buf = Vec::new();
            let mut ends = vec![0usize];
            for p in &payloads {
                encode_into(&mut buf, p);
                ends.push(buf.len());
            }
            let cut = ((buf.len() as f64) * cut_frac) as usize;
            let (frames, valid) = decode_all(&buf[..cut]);
            let whole = ends.iter().filter(|&&e| e <= cut).count() - 1;
            prop_assert_eq!(frames.len(), whole);
            prop_assert_eq!(valid, ends[whole]);
        }

        #[test]
        fn a_flipped_bit_never_yields_a_wrong_payload(
            payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..100), 1..6),
            pos_frac in 0.0f64..1.0,
            bit in 0u8..8,
        ) {
            let mut buf = Vec::new();
            for p in &payloads {
                encode_into(&mut buf, p);
            }
            let pos = ((buf.len() as f64) * pos_frac) as usize;
            buf[pos] ^= 1 << bit;
            let (frames, _) = decode_all(&buf);
            // Every frame that decodes is an original payload, in order: a corrupt frame ends
            // the log instead of producing a wrong record.
            prop_assert!(frames.len() <= payloads.len());
            for (f, p) in frames.iter().zip(&payloads) {
                prop_assert_eq!(*f, p.as_slice());
            }
        }
    }
}
