//! Binary attachments: valid PNGs (1x1 and image-sized, CRCs and Adler-32 correct), base64,
//! and a seeded incompressible byte stream that is pulled in pieces, never buffered whole.

use std::io::Read;

use rand_chacha::ChaCha8Rng;

use crate::rng::fill_blocks;

const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'];
/// Largest stored (uncompressed) deflate block (RFC 1951 section 3.2.4).
const STORED_MAX: usize = 65_535;

/// Length of a 1x1 RGB PNG made by [`tiny_png`]: signature 8 + IHDR 25 + IDAT 12+15 + IEND 12.
pub(crate) const TINY_PNG_LEN: usize = 72;

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let start = out.len();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

/// Adler-32 (RFC 1950), the zlib trailer.
fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    // 5552 is the largest run before `b` can overflow u32 (zlib's NMAX).
    for block in data.chunks(5552) {
        for &x in block {
            a += u32::from(x);
            b += a;
        }
        a %= 65_521;
        b %= 65_521;
    }
    (b << 16) | a
}

/// zlib stream of stored deflate blocks: valid, and as incompressible as its input.
fn zlib_stored(raw: &[u8]) -> Vec<u8> {
    let blocks = raw.len().div_ceil(STORED_MAX).max(1);
    let mut out = Vec::with_capacity(raw.len() + 5 * blocks + 6);
    out.extend_from_slice(&[0x78, 0x01]);
    let mut pieces = raw.chunks(STORED_MAX).peekable();
    if raw.is_empty() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(piece) = pieces.next() {
        out.push(u8::from(pieces.peek().is_none()));
        let len = piece.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(piece);
    }
    out.extend_from_slice(&adler32(raw).to_be_bytes());
    out
}

fn ihdr(width: u32, height: u32) -> [u8; 13] {
    let mut h = [0u8; 13];
    h[..4].copy_from_slice(&width.to_be_bytes());
    h[4..8].copy_from_slice(&height.to_be_bytes());
    h[8] = 8; // bit depth
    h[9] = 2; // colour type: RGB
    h
}

/// A valid 1x1 RGB PNG of one colour.
pub(crate) fn tiny_png(rgb: [u8; 3]) -> Vec<u8> {
    let mut out = Vec::with_capacity(TINY_PNG_LEN);
    out.extend_from_slice(&PNG_SIGNATURE);
    chunk(&mut out, b"IHDR", &ihdr(1, 1));
    chunk(
        &mut out,
        b"IDAT",
        &zlib_stored(&[0, rgb[0], rgb[1], rgb[2]]),
    );
    chunk(&mut out, b"IEND", &[]);
    debug_assert_eq!(out.len(), TINY_PNG_LEN);
    out
}

/// Row width of image-sized PNGs: 256 RGB pixels plus the filter byte.
const ROW: usize = 1 + 3 * 256;

/// Bytes a 256-wide PNG of `h` rows takes before the padding chunk.
fn png_len(h: usize) -> usize {
    let raw = h * ROW;
    8 + 25 + 12 + 2 + raw + 5 * raw.div_ceil(STORED_MAX) + 4 + 12
}

/// A valid PNG of exactly `size` bytes (size >= 1024): 256 px wide, random (incompressible)
/// pixels like a photo, padded to the byte with a private ancillary `vbPd` chunk, which PNG
/// decoders skip (PNG spec section 5.4: lowercase first letter = ancillary).
pub(crate) fn png_of_size(rng: &mut ChaCha8Rng, size: usize) -> Vec<u8> {
    let mut h = (size / ROW).max(1);
    while h > 1 && png_len(h) + 12 > size {
        h -= 1;
    }
    let mut raw = vec![0u8; (h * ROW).next_multiple_of(64)];
    fill_blocks(rng, &mut raw);
    raw.truncate(h * ROW);
    for row in raw.chunks_mut(ROW) {
        row[0] = 0; // filter type None
    }
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&PNG_SIGNATURE);
    chunk(&mut out, b"IHDR", &ihdr(256, h as u32));
    chunk(&mut out, b"IDAT", &zlib_stored(&raw));
    drop(raw);
    let pad = size.saturating_sub(png_len(h) + 12);
    chunk(&mut out, b"vbPd", &vec![0u8; pad]);
    chunk(&mut out, b"IEND", &[]);
    out
}

/// Standard base64 (RFC 4648) with padding.
pub(crate) fn base64(data: &[u8], out: &mut String) {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        out.push(A[(n >> 18) as usize & 63] as char);
        out.push(A[(n >> 12) as usize & 63] as char);
        out.push(if c.len() > 1 {
            A[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if c.len() > 2 {
            A[n as usize & 63] as char
        } else {
            '='
        });
    }
}

/// Incompressible bytes from a seeded stream, produced 64 KiB at a time.
pub struct RandomReader {
    rng: ChaCha8Rng,
    remaining: u64,
    buf: Box<[u8; 65_536]>,
    pos: usize,
}

impl RandomReader {
    pub(crate) fn new(rng: ChaCha8Rng, len: u64) -> RandomReader {
        RandomReader {
            rng,
            remaining: len,
            buf: Box::new([0; 65_536]),
            pos: 65_536,
        }
    }
}

impl Read for RandomReader {
    fn read(&mut self, dst: &mut [u8]) -> std::io::Result<usize> {
        let mut n = 0;
        while n < dst.len() && self.remaining > 0 {
            if self.pos == self.buf.len() {
                fill_blocks(&mut self.rng, &mut self.buf[..]);
                self.pos = 0;
            }
            let take = (dst.len() - n)
                .min(self.buf.len() - self.pos)
                .min(self.remaining as usize);
            dst[n..n + take].copy_from_slice(&self.buf[self.pos..self.pos + take]);
            self.pos += take;
            n += take;
            self.remaining -= take as u64;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Purpose, stream};

    /// Walks a PNG's chunks, checking every CRC and the zlib Adler-32; returns chunk types.
    pub(crate) fn check_png(png: &[u8]) -> Vec<String> {
        assert_eq!(&png[..8], &PNG_SIGNATURE);
        let mut i = 8;
        let mut kinds = Vec::new();
        let mut idat = Vec::new();
        while i < png.len() {
            let len = u32::from_be_bytes(png[i..i + 4].try_into().unwrap()) as usize;
            let body = &png[i + 4..i + 8 + len];
            let crc = u32::from_be_bytes(png[i + 8 + len..i + 12 + len].try_into().unwrap());
            assert_eq!(crc32fast::hash(body), crc, "chunk CRC");
            kinds.push(String::from_utf8_lossy(&body[..4]).into_owned());
            if &body[..4] == b"IDAT" {
                idat.extend_from_slice(&body[4..]);
            }
            i += 12 + len;
        }
        assert_eq!(i, png.len());
        // Inflate the stored blocks by hand and check the Adler-32.
        assert_eq!(&idat[..2], &[0x78, 0x01]);
        let mut j = 2;
        let mut raw = Vec::new();
        loop {
            let last = idat[j] & 1 == 1;
            assert_eq!(idat[j] >> 1, 0, "stored block");
            let len = u16::from_le_bytes([idat[j + 1], idat[j + 2]]);
            let nlen = u16::from_le_bytes([idat[j + 3], idat[j + 4]]);
            assert_eq!(len, !nlen);
            raw.extend_from_slice(&idat[j + 5..j + 5 + usize::from(len)]);
            j += 5 + usize::from(len);
            if last {
                break;
            }
        }
        assert_eq!(
            u32::from_be_bytes(idat[j..j + 4].try_into().unwrap()),
            adler32(&raw)
        );
        let w = u32::from_be_bytes(png[16..20].try_into().unwrap()) as usize;
        let h = u32::from_be_bytes(png[20..24].try_into().unwrap()) as usize;
        assert_eq!(raw.len(), h * (1 + 3 * w));
        kinds
    }

    #[test]
    fn tiny_png_is_valid() {
        let png = tiny_png([10, 20, 30]);
        assert_eq!(png.len(), TINY_PNG_LEN);
        assert_eq!(check_png(&png), ["IHDR", "IDAT", "IEND"]);
        // Known-good CRC of IEND from the PNG spec examples.
        assert_eq!(&png[png.len() - 4..], &[0xae, 0x42, 0x60, 0x82]);
    }

    #[test]
    fn sized_png_is_exact_and_valid() {
        let mut rng = stream(1, Purpose::AttachmentBody, 0);
        for size in [1024, 5000, 61_440, 200_003, 1_000_000] {
            let png = png_of_size(&mut rng, size);
            assert_eq!(png.len(), size);
            assert_eq!(check_png(&png), ["IHDR", "IDAT", "vbPd", "IEND"]);
        }
    }

    #[test]
    fn adler_known_value() {
        // RFC 1950 / Wikipedia example.
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
    }

    #[test]
    fn base64_known_values() {
        let mut s = String::new();
        base64(b"foobar", &mut s);
        base64(b"fo", &mut s);
        assert_eq!(s, "Zm9vYmFyZm8=");
    }

    #[test]
    fn random_reader_ignores_read_sizes() {
        let len = 200_001;
        let mut a = Vec::new();
        RandomReader::new(stream(3, Purpose::AttachmentBody, 1), len)
            .read_to_end(&mut a)
            .unwrap();
        let mut r = RandomReader::new(stream(3, Purpose::AttachmentBody, 1), len);
        let mut b = Vec::new();
        let mut buf = [0u8; 777];
        loop {
            let n = r.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            b.extend_from_slice(&buf[..n]);
        }
        assert_eq!(a.len() as u64, len);
        assert_eq!(a, b);
    }
}
