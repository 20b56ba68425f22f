//! The S3 adapter's encrypted objects against their real consumer: OpenSSL's `enc` command,
//! whose `-pbkdf2` format the Remotely Save plugin's `openssl-base64` encryption is, decrypts
//! a stored body and a stored name back to the plain bytes.

use base64::Engine as _;
use loadgen::protocols::s3::crypt::{Cipher, stored_size};

/// `openssl enc -d` of `sealed` with `password`.
fn openssl_decrypt(sealed: &[u8], password: &str) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::write(&input, sealed).unwrap();
    let out = std::process::Command::new("openssl")
        .args([
            "enc",
            "-d",
            "-aes-256-cbc",
            "-pbkdf2",
            "-iter",
            "20000",
            "-md",
            "sha256",
        ])
        .arg("-pass")
        .arg(format!("pass:{password}"))
        .arg("-in")
        .arg(&input)
        .output()
        .expect("the openssl command (Debian's openssl package)");
    assert!(
        out.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn openssl_decrypts_what_the_adapter_stores() {
    let c = Cipher::new("correct horse", 0x5eed);
    let plain = "# Café crème\n\nA note with [[links]] and ünïcode.\n".repeat(40);
    let sealed = c.encrypt(plain.as_bytes());
    assert_eq!(sealed.len() as u64, stored_size(plain.len() as u64));
    assert_eq!(openssl_decrypt(&sealed, "correct horse"), plain.as_bytes());

    let name = c.encrypt_name("Wiki/Café crème.md");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(&name)
        .unwrap();
    assert_eq!(
        openssl_decrypt(&raw, "correct horse"),
        "Wiki/Café crème.md".as_bytes()
    );
}
