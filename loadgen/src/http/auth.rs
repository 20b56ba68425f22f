//! HTTP Basic credentials (RFC 7617): what a target demands and the client sends, and the
//! htpasswd line a started server's configuration reads them from.

use base64::Engine as _;
use sha1::{Digest, Sha1};

/// HTTP Basic credentials a target is configured to demand, and the client sends.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BasicAuth {
    pub user: String,
    pub password: String,
}

impl BasicAuth {
    pub fn new(user: &str, password: &str) -> BasicAuth {
        BasicAuth {
            user: user.to_owned(),
            password: password.to_owned(),
        }
    }

    /// The `Authorization` header value (RFC 7617).
    pub fn header_value(&self) -> String {
        let raw = format!("{}:{}", self.user, self.password);
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(raw)
        )
    }

    /// One htpasswd line in the `{SHA}` scheme (base64 of the password's SHA-1): the one
    /// scheme both Apache's `mod_authn_file` and nginx's `auth_basic_user_file` read that
    /// costs the same to check in both (a bcrypt line would make every request pay a
    /// deliberately slow hash, and nginx does not read bcrypt at all).
    pub fn htpasswd_line(&self) -> String {
        let digest = Sha1::digest(self.password.as_bytes());
        format!(
            "{}:{{SHA}}{}\n",
            self.user,
            base64::engine::general_purpose::STANDARD.encode(digest)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn htpasswd_sha_line_matches_htpasswd_s() {
        // `htpasswd -nbs bench secret` prints this line.
        assert_eq!(
            BasicAuth::new("bench", "secret").htpasswd_line(),
            "bench:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=\n"
        );
        assert_eq!(
            BasicAuth::new("Aladdin", "open sesame").header_value(),
            "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
    }
}
