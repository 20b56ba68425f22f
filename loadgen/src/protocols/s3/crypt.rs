//! The Remotely Save plugin's `openssl-base64` encryption, as its `encryptOpenSSL.ts` and
//! `fsEncrypt.ts` write a remote:
//! - a body is `Salted__`, an 8-byte salt, then AES-256-CBC with PKCS#7 padding, key and IV
//!   the 48 bytes of PBKDF2-HMAC-SHA256 over the password and the salt, 20,000 rounds:
//!   OpenSSL's `enc -aes-256-cbc -pbkdf2 -iter 20000 -md sha256` format, which that command
//!   decrypts;
//! - a name is the whole vault path (a folder's with its trailing `/`) encrypted the same
//!   way and written in unpadded base64url, so every key starts `U2FsdGVkX` and holds no `/`:
//!   the remote is flat, a folder is a zero-byte object of its own, and no listing can be
//!   narrowed by a prefix;
//! - a stored body is `(n / 16 + 1) * 16 + 16` bytes for `n` plain ones.
//!
//! Every name read back costs a PBKDF2 of 20,000 rounds, as it does the plugin. The plugin
//! draws each salt at random; here a salt is the first 8 bytes of SHA-256 over the run's
//! seed, what is encrypted (a name or a body) and the plain bytes, so a run writes the same
//! objects every time and no two names share a salt.

use aes::cipher::{BlockCipherDecrypt, BlockCipherEncrypt, KeyInit};
use base64::Engine as _;
use hmac::{Hmac, KeyInit as HmacKeyInit, Mac};
use sha2::{Digest, Sha256};

/// PBKDF2 rounds (`DEFAULT_ITER` of the plugin).
pub const ROUNDS: u32 = 20_000;
/// The first bytes of every encrypted body.
const MAGIC: &[u8; 8] = b"Salted__";
/// What every encrypted name starts with: `Salted__` in base64url.
pub const NAME_PREFIX: &str = "U2FsdGVkX";

/// A password and the seed its salts are drawn from.
#[derive(Clone)]
pub struct Cipher {
    password: String,
    seed: u64,
}

impl std::fmt::Debug for Cipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cipher").field("seed", &self.seed).finish()
    }
}

/// The stored size of a body of `n` plain bytes.
pub fn stored_size(n: u64) -> u64 {
    (n / 16 + 1) * 16 + 16
}

impl Cipher {
    pub fn new(password: &str, seed: u64) -> Cipher {
        Cipher {
            password: password.to_owned(),
            seed,
        }
    }

    fn salt(&self, what: &[u8], plain: &[u8]) -> [u8; 8] {
        let mut h = Sha256::new();
        h.update(self.seed.to_le_bytes());
        h.update(what);
        h.update((plain.len() as u64).to_le_bytes());
        h.update(plain);
        let d = h.finalize();
        let mut s = [0u8; 8];
        s.copy_from_slice(&d[..8]);
        s
    }

    /// Key and IV for `salt`.
    fn key_iv(&self, salt: &[u8]) -> ([u8; 32], [u8; 16]) {
        let mut out = [0u8; 48];
        pbkdf2_sha256(self.password.as_bytes(), salt, ROUNDS, &mut out);
        let (mut key, mut iv) = ([0u8; 32], [0u8; 16]);
        key.copy_from_slice(&out[..32]);
        iv.copy_from_slice(&out[32..]);
        (key, iv)
    }

    fn seal(&self, what: &[u8], plain: &[u8]) -> Vec<u8> {
        let salt = self.salt(what, plain);
        let (key, iv) = self.key_iv(&salt);
        let mut out = Vec::with_capacity(stored_size(plain.len() as u64) as usize);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&salt);
        cbc_encrypt(&key, &iv, plain, &mut out);
        out
    }

    /// A body as the plugin stores it.
    pub fn encrypt(&self, plain: &[u8]) -> Vec<u8> {
        self.seal(b"body", plain)
    }

    /// A stored body back to its plain bytes; `Err` names what is wrong with it.
    pub fn decrypt(&self, stored: &[u8]) -> Result<Vec<u8>, String> {
        if stored.len() < 32 || !stored.starts_with(MAGIC) || !stored.len().is_multiple_of(16) {
            return Err(format!(
                "{} bytes that are not the plugin's encrypted format (Salted__, a salt, whole AES blocks)",
                stored.len()
            ));
        }
        let (key, iv) = self.key_iv(&stored[8..16]);
        cbc_decrypt(&key, &iv, &stored[16..])
            .ok_or_else(|| "its padding is wrong after decryption (a wrong password?)".to_owned())
    }

    /// A vault path (a folder with its trailing `/`) as the plugin names its object.
    pub fn encrypt_name(&self, path: &str) -> String {
        let sealed = self.seal(b"name", path.as_bytes());
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sealed)
    }

    /// A listed key back to its vault path; `Err` says why it is not one of the plugin's
    /// encrypted names under this password.
    pub fn decrypt_name(&self, key: &str) -> Result<String, String> {
        if !key.starts_with(NAME_PREFIX) {
            return Err(format!(
                "is not an encrypted name (they start {NAME_PREFIX}): the bucket holds objects this password did not write"
            ));
        }
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(key)
            .map_err(|_| "is not base64url".to_owned())?;
        let plain = self.decrypt(&raw)?;
        String::from_utf8(plain).map_err(|_| "decrypts to bytes that are not UTF-8".to_owned())
    }
}

/// PBKDF2 (RFC 8018) with HMAC-SHA256, filling `out`.
fn pbkdf2_sha256(password: &[u8], salt: &[u8], rounds: u32, out: &mut [u8]) {
    // HMAC accepts a key of any length; this cannot fail.
    let Ok(prf) = <Hmac<Sha256> as HmacKeyInit>::new_from_slice(password) else {
        return;
    };
    for (i, chunk) in out.chunks_mut(32).enumerate() {
        let mut m = prf.clone();
        m.update(salt);
        m.update(&(i as u32 + 1).to_be_bytes());
        let mut u: [u8; 32] = m.finalize().into_bytes().into();
        let mut t = u;
        for _ in 1..rounds {
            let mut m = prf.clone();
            m.update(&u);
            u = m.finalize().into_bytes().into();
            for (a, b) in t.iter_mut().zip(u.iter()) {
                *a ^= b;
            }
        }
        chunk.copy_from_slice(&t[..chunk.len()]);
    }
}

/// AES-256-CBC of `plain` with PKCS#7 padding, appended to `out`.
fn cbc_encrypt(key: &[u8; 32], iv: &[u8; 16], plain: &[u8], out: &mut Vec<u8>) {
    let aes = aes::Aes256::new(&(*key).into());
    let pad = 16 - plain.len() % 16;
    let mut prev = *iv;
    let mut blocks = plain.chunks_exact(16);
    let mut step = |bytes: [u8; 16], out: &mut Vec<u8>| {
        let mut b = [0u8; 16];
        for i in 0..16 {
            b[i] = bytes[i] ^ prev[i];
        }
        let mut block = aes::Block::from(b);
        aes.encrypt_block(&mut block);
        prev.copy_from_slice(&block);
        out.extend_from_slice(&block);
    };
    for c in blocks.by_ref() {
        let mut b = [0u8; 16];
        b.copy_from_slice(c);
        step(b, out);
    }
    let rest = blocks.remainder();
    let mut last = [pad as u8; 16];
    last[..rest.len()].copy_from_slice(rest);
    step(last, out);
}

/// AES-256-CBC decryption of whole blocks, its PKCS#7 padding checked and removed.
fn cbc_decrypt(key: &[u8; 32], iv: &[u8; 16], data: &[u8]) -> Option<Vec<u8>> {
    if data.is_empty() || !data.len().is_multiple_of(16) {
        return None;
    }
    let aes = aes::Aes256::new(&(*key).into());
    let mut out = Vec::with_capacity(data.len());
    let mut prev = *iv;
    for c in data.chunks_exact(16) {
        let mut b = [0u8; 16];
        b.copy_from_slice(c);
        let mut block = aes::Block::from(b);
        aes.decrypt_block(&mut block);
        for i in 0..16 {
            out.push(block[i] ^ prev[i]);
        }
        prev = b;
    }
    let pad = *out.last()? as usize;
    if pad == 0 || pad > 16 || out[out.len() - pad..].iter().any(|&x| x as usize != pad) {
        return None;
    }
    out.truncate(out.len() - pad);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pbkdf2_matches_rfc_7914s_vector() {
        // RFC 7914 section 11: PBKDF2-HMAC-SHA256, P "passwd", S "salt", c 1, 64 bytes.
        let mut out = [0u8; 64];
        pbkdf2_sha256(b"passwd", b"salt", 1, &mut out);
        assert_eq!(
            hex::encode(out),
            "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc\
             49ca9cccf179b645991664b39d77ef317c71b845b1e30bd509112041d3a19783"
        );
    }

    #[test]
    fn aes_256_matches_fips_197s_vector() {
        // FIPS-197 appendix C.3: one block, so CBC with a zero IV is the cipher itself.
        let key: [u8; 32] = core::array::from_fn(|i| i as u8);
        let plain: [u8; 16] = core::array::from_fn(|i| (i as u8) * 0x11);
        let mut out = Vec::new();
        cbc_encrypt(&key, &[0; 16], &plain, &mut out);
        assert_eq!(hex::encode(&out[..16]), "8ea2b7ca516745bfeafc49904b496089");
        assert_eq!(out.len(), 32, "a whole block of padding follows");
    }

    #[test]
    fn bodies_and_names_round_trip_at_the_plugins_sizes() {
        let c = Cipher::new("hunter2", 7);
        for n in [0usize, 1, 15, 16, 17, 1000] {
            let plain: Vec<u8> = (0..n).map(|i| i as u8).collect();
            let sealed = c.encrypt(&plain);
            assert_eq!(sealed.len() as u64, stored_size(n as u64), "{n}");
            assert!(sealed.starts_with(b"Salted__"));
            assert_eq!(c.decrypt(&sealed).unwrap(), plain);
        }
        for path in ["Wiki/Café crème.md", "Wiki/", "a"] {
            let key = c.encrypt_name(path);
            assert!(key.starts_with(NAME_PREFIX) && !key.contains('/'), "{key}");
            assert_eq!(c.decrypt_name(&key).unwrap(), path);
            assert_eq!(key, c.encrypt_name(path), "the same run names it the same");
        }
        assert_ne!(
            c.encrypt_name("a"),
            Cipher::new("hunter2", 8).encrypt_name("a")
        );
    }

    #[test]
    fn a_wrong_password_or_a_plain_key_is_an_error() {
        let key = Cipher::new("right", 1).encrypt_name("Wiki/a.md");
        let e = Cipher::new("wrong", 1).decrypt_name(&key);
        // A wrong key leaves bad padding 255 times in 256; when it does not, the bytes are
        // still not the name.
        assert!(e.as_ref().map_or(true, |p| p != "Wiki/a.md"), "{e:?}");
        let e = Cipher::new("right", 1)
            .decrypt_name("Wiki/a.md")
            .unwrap_err();
        assert!(e.contains("not an encrypted name"), "{e}");
        let e = Cipher::new("right", 1)
            .decrypt(b"Salted__short")
            .unwrap_err();
        assert!(e.contains("13 bytes"), "{e}");
    }
}
