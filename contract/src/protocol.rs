//! A protocol's name, as scenario files, target files, `--protocol` and recordings spell it:
//! the one type every layer uses for "which protocol". It holds a name, not a list: which
//! names exist, their aliases and what each protocol can do is the harness's one registry
//! (`harness/src/sample/protocols/`), so a new protocol is a folder and a registry line, with
//! nothing to add here. A name read from a file is checked for its shape when it is read and
//! against the registry before anything runs; an unknown one is refused with the known ones,
//! never taken for the default.

use std::borrow::Cow;

/// A protocol's canonical name (`s3`), or a name as given before the registry resolved it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct Protocol(Cow<'static, str>);

/// The protocol a scenario or target speaks when it names none: the signed protocol the
/// reference server speaks.
pub const DEFAULT_NAME: &str = "obsync-v1";

/// Longest accepted name: names are short words, and a name is echoed in messages.
pub const MAX_NAME_BYTES: usize = 32;

impl Protocol {
    /// A protocol by its canonical name (the registry's own spelling).
    pub const fn named(name: &'static str) -> Protocol {
        Protocol(Cow::Borrowed(name))
    }

    /// A name as given (a flag, a file): lower-case letters, digits and `-`, at most
    /// [`MAX_NAME_BYTES`]. Whether a protocol of that name exists is the registry's answer.
    pub fn parse(s: &str) -> Result<Protocol, String> {
        let ok = !s.is_empty()
            && s.len() <= MAX_NAME_BYTES
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if ok {
            Ok(Protocol(Cow::Owned(s.to_owned())))
        } else {
            let shown: String = s
                .chars()
                .take(MAX_NAME_BYTES)
                .flat_map(char::escape_default)
                .collect();
            Err(format!(
                "protocol \"{shown}\" is not a protocol name (lower-case letters, digits and -, at most {MAX_NAME_BYTES} bytes)"
            ))
        }
    }

    pub fn name(&self) -> &str {
        &self.0
    }

    /// Whether this is [`DEFAULT_NAME`] (scenario documents leave it out).
    pub fn is_default(&self) -> bool {
        self.0 == DEFAULT_NAME
    }
}

impl Default for Protocol {
    fn default() -> Protocol {
        Protocol::named(DEFAULT_NAME)
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for Protocol {
    type Err = String;
    fn from_str(s: &str) -> Result<Protocol, String> {
        Protocol::parse(s)
    }
}

impl<'de> serde::Deserialize<'de> for Protocol {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Protocol, D::Error> {
        let s = <Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
        Protocol::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_short_lower_case_words() {
        assert_eq!(Protocol::parse("s3").unwrap().name(), "s3");
        assert!(Protocol::default().is_default());
        for bad in ["", "S3", "a b", "x\u{1b}[2J", &"a".repeat(33)] {
            let e = Protocol::parse(bad).unwrap_err();
            assert!(!e.contains('\u{1b}') && e.len() < 200, "{e}");
        }
        let p: Protocol = serde_json::from_str("\"s3\"").unwrap();
        assert_eq!(serde_json::to_string(&p).unwrap(), "\"s3\"");
        assert!(serde_json::from_str::<Protocol>("\"No\"").is_err());
    }
}
