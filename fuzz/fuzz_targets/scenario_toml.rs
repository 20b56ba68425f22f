//! The scenario TOML loader: arbitrary text parses or fails with one line naming the origin,
//! and an accepted scenario writes back to TOML that loads to the same scenario.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match scenarios::scenario::parse(text, "fuzz.toml") {
        Ok(s) => {
            let written = toml::to_string(&s).expect("an accepted scenario serialises");
            let back = scenarios::scenario::parse(&written, "written")
                .unwrap_or_else(|e| panic!("a written scenario loads again: {e}\n{written}"));
            assert_eq!(back, s);
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("fuzz.toml"), "the error names the file: {msg}");
        }
    }
});
