//! The `openssl` command as the consumer of the S3 adapter's encrypted objects (the Remotely
//! Save plugin's `openssl-base64` format is OpenSSL's `enc -pbkdf2` one).

/// `openssl enc -d -aes-256-cbc -pbkdf2 -iter 20000 -md sha256` of `sealed` with `password`.
pub fn openssl_decrypt(sealed: &[u8], password: &str) -> Vec<u8> {
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
