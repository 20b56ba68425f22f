//! Scenario definitions: a vault profile plus phases (see issue 6).
