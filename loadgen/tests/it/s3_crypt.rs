//! The S3 adapter's encrypted objects against their real consumer: OpenSSL's `enc` command,
//! whose `-pbkdf2` format the Remotely Save plugin's `openssl-base64` encryption is, decrypts
//! a stored body and a stored name back to the plain bytes.

use base64::Engine as _;
use loadgen::protocols::s3::crypt::{Cipher, stored_size};
use testkit::openssl_decrypt;

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
