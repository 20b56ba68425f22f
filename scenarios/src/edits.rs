//! A deterministic edit stream over a generated vault, shaped like real churn
//! (docs/src/vaults/real-vaults.md: median 1 note changed per save batch, p90 3-70; bulk changes of
//! 1,000-6,600 files in most vaults): mostly one note at a time (append, modify in the
//! middle), sometimes create, delete or rename a folder, rarely a bulk change.
//!
//! The stream tracks the vault's note paths as its own edits change them, so every edit
//! names a file that exists at that point. Applying an edit to disk is the caller's job
//! (`harness::prepare::vault::apply_edit`).

use std::collections::BTreeSet;

use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::plan::Plan;
use crate::profile::Profile;
use crate::rng::{Purpose, below, between, stream};
use crate::text;

/// One change to a vault. Paths are vault-relative with '/' separators.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Edit {
    /// Append `text` to the end of the note (typing at the end).
    Append {
        path: String,
        text: String,
    },
    /// Replace the line nearest the middle of the note with `text` (an empty note gets
    /// `text` and a newline).
    ModifyMiddle {
        path: String,
        text: String,
    },
    /// Create a new note (the path does not exist yet; parent folders may not either).
    Create {
        path: String,
        content: String,
    },
    Delete {
        path: String,
    },
    /// Rename a folder: every file under `from/` moves to `to/`.
    RenameFolder {
        from: String,
        to: String,
    },
    /// Several edits saved together (a batch of 2-70 notes, or a bulk change of 1,000+).
    Batch {
        edits: Vec<Edit>,
    },
}

impl Edit {
    /// How many single-file or folder operations this edit is.
    pub fn operations(&self) -> usize {
        match self {
            Edit::Batch { edits } => edits.iter().map(Edit::operations).sum(),
            _ => 1,
        }
    }

    /// A short name of the kind: `append`, `modify_middle`, `create`, ...
    pub fn kind(&self) -> &'static str {
        match self {
            Edit::Append { .. } => "append",
            Edit::ModifyMiddle { .. } => "modify_middle",
            Edit::Create { .. } => "create",
            Edit::Delete { .. } => "delete",
            Edit::RenameFolder { .. } => "rename_folder",
            Edit::Batch { .. } => "batch",
        }
    }
}

/// Applies `Edit::ModifyMiddle`'s rule to bytes (shared so callers and tests agree).
pub fn modify_middle(old: &[u8], text: &str) -> Vec<u8> {
    if old.is_empty() {
        return format!("{text}\n").into_bytes();
    }
    let lines: Vec<&[u8]> = old.split(|&b| b == b'\n').collect();
    // A trailing newline yields a last empty piece; it is not a line.
    let n = if old.ends_with(b"\n") {
        lines.len() - 1
    } else {
        lines.len()
    };
    let mid = n / 2;
    let mut out = Vec::with_capacity(old.len() + text.len());
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            out.push(b'\n');
        }
        if i == mid {
            out.extend_from_slice(text.as_bytes());
        } else {
            out.extend_from_slice(line);
        }
    }
    out
}

/// The edit stream (an endless iterator; take as many as a scenario needs).
pub struct EditStream {
    rng: ChaCha8Rng,
    notes: Vec<String>,
    paths: BTreeSet<String>,
    created: u32,
}

/// The edit stream for the vault `generate(p, seed)` makes; `stream_index` selects one of
/// many independent streams over the same vault (e.g. one per device).
pub fn edits(p: &Profile, seed: u64, stream_index: u32) -> EditStream {
    let plan = Plan::new(p, seed);
    let notes: Vec<String> = plan.notes.into_iter().map(|n| n.path).collect();
    let paths = notes.iter().cloned().collect();
    EditStream {
        rng: stream(seed, Purpose::Edits, stream_index),
        notes,
        paths,
        created: 0,
    }
}

impl EditStream {
    /// The note paths as they are after the edits so far.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    fn sentence(&mut self) -> String {
        let mut s = String::new();
        text::sentence(&mut self.rng, &mut s, 0.1);
        s
    }

    fn any_note(&mut self) -> Option<String> {
        (!self.notes.is_empty()).then(|| self.notes[below(&mut self.rng, self.notes.len())].clone())
    }

    fn append(&mut self) -> Option<Edit> {
        let path = self.any_note()?;
        Some(Edit::Append {
            path,
            text: format!("{}\n", self.sentence()),
        })
    }

    fn modify(&mut self) -> Option<Edit> {
        let path = self.any_note()?;
        Some(Edit::ModifyMiddle {
            path,
            text: self.sentence(),
        })
    }

    fn create_in(&mut self, folder: &str) -> Edit {
        let title = text::title(&mut self.rng, 0.1);
        let mut path = format!("{folder}/{title}.md");
        while self.paths.contains(&path) {
            self.created += 1;
            path = format!("{folder}/{title} {}.md", self.created);
        }
        self.paths.insert(path.clone());
        self.notes.push(path.clone());
        let content = crate::note::small_note(&mut self.rng, &title);
        Edit::Create { path, content }
    }

    fn create(&mut self) -> Edit {
        let folder = match self.any_note() {
            Some(p) => p
                .rsplit_once('/')
                .map_or("Inbox".to_owned(), |(d, _)| d.to_owned()),
            None => "Inbox".to_owned(),
        };
        self.create_in(&folder)
    }

    fn delete(&mut self) -> Option<Edit> {
        if self.notes.len() < 2 {
            return None;
        }
        let i = below(&mut self.rng, self.notes.len());
        let path = self.notes.swap_remove(i);
        self.paths.remove(&path);
        Some(Edit::Delete { path })
    }

    fn rename_folder(&mut self) -> Option<Edit> {
        let note = self.any_note()?;
        let (from, _) = note.rsplit_once('/')?;
        let from = from.to_owned();
        let parent = from.rsplit_once('/').map(|(p, _)| p.to_owned());
        let prefix_taken = |to: &str, paths: &BTreeSet<String>| {
            let pre = format!("{to}/");
            paths
                .range(pre.clone()..)
                .next()
                .is_some_and(|p| p.starts_with(&pre))
        };
        let mut to;
        loop {
            let name = text::folder_name(&mut self.rng);
            to = match &parent {
                Some(p) => format!("{p}/{name}"),
                None => name,
            };
            if to != from && !prefix_taken(&to, &self.paths) {
                break;
            }
        }
        let (old_pre, new_pre) = (format!("{from}/"), format!("{to}/"));
        for p in &mut self.notes {
            if let Some(rest) = p.strip_prefix(&old_pre) {
                *p = format!("{new_pre}{rest}");
            }
        }
        self.paths = self.notes.iter().cloned().collect();
        Some(Edit::RenameFolder { from, to })
    }

    /// A save batch of 2-70 single-note edits to distinct notes.
    fn batch(&mut self) -> Edit {
        let n = between(&mut self.rng, 2, 70) as usize;
        let mut seen = BTreeSet::new();
        let mut edits = Vec::with_capacity(n);
        for _ in 0..n.min(self.notes.len()) {
            if let Some(e) = self.append() {
                if let Edit::Append { path, .. } = &e
                    && !seen.insert(path.clone())
                {
                    continue;
                }
                edits.push(e);
            }
        }
        Edit::Batch { edits }
    }

    /// A bulk change: 1,000-6,600 notes get a line (a reorganisation), or when the vault is
    /// smaller than that, an import of 1,000 new notes into a new folder.
    fn bulk(&mut self) -> Edit {
        let n = between(&mut self.rng, 1000, 6600) as usize;
        if self.notes.len() >= 1000 {
            let mut order: Vec<usize> = (0..self.notes.len()).collect();
            let take = n.min(order.len());
            let mut edits = Vec::with_capacity(take);
            for k in 0..take {
                let j = k + below(&mut self.rng, order.len() - k);
                order.swap(k, j);
                edits.push(Edit::Append {
                    path: self.notes[order[k]].clone(),
                    text: "\n#reorganised\n".into(),
                });
            }
            Edit::Batch { edits }
        } else {
            self.created += 1;
            let folder = format!("Import {}", self.created);
            let edits = (0..1000).map(|_| self.create_in(&folder)).collect();
            Edit::Batch { edits }
        }
    }
}

impl Iterator for EditStream {
    type Item = Edit;

    fn next(&mut self) -> Option<Edit> {
        loop {
            // Shares per 1,000 edits; single-note edits dominate as in real save batches.
            let roll = below(&mut self.rng, 1000);
            let e = match roll {
                0..=429 => self.append(),
                430..=759 => self.modify(),
                760..=829 => Some(self.create()),
                830..=869 => self.delete(),
                870..=889 => self.rename_folder(),
                890..=997 => Some(self.batch()),
                _ => Some(self.bulk()),
            };
            if let Some(e) = e {
                return Some(e);
            }
            if self.notes.is_empty() {
                return Some(self.create());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::profile;

    #[test]
    fn middle_line_is_replaced() {
        assert_eq!(modify_middle(b"a\nb\nc\n", "X"), b"a\nX\nc\n");
        assert_eq!(modify_middle(b"a\nb", "X"), b"a\nX");
        assert_eq!(modify_middle(b"", "X"), b"X\n");
    }

    #[test]
    fn stream_is_deterministic_and_mixed() {
        let p = profile("small").unwrap();
        let a: Vec<Edit> = edits(&p, 1, 0).take(2000).collect();
        let b: Vec<Edit> = edits(&p, 1, 0).take(2000).collect();
        assert_eq!(a, b);
        let c: Vec<Edit> = edits(&p, 1, 1).take(50).collect();
        assert_ne!(a[..50], c[..]);
        let mut kinds = BTreeSet::new();
        for e in &a {
            kinds.insert(e.kind());
        }
        for k in [
            "append",
            "modify_middle",
            "create",
            "delete",
            "rename_folder",
            "batch",
        ] {
            assert!(kinds.contains(k), "{k} missing");
        }
        let singles = a.iter().filter(|e| e.operations() == 1).count();
        assert!(singles > 1700, "mostly one note at a time: {singles}");
        assert!(
            a.iter().any(|e| e.operations() >= 1000),
            "a bulk change in 2,000 edits"
        );
    }

    #[test]
    fn edits_name_existing_paths() {
        let p = profile("small").unwrap();
        let mut s = edits(&p, 3, 0);
        let mut live: BTreeSet<String> = s.notes().iter().cloned().collect();
        for _ in 0..500 {
            let e = s.next().unwrap();
            check(&e, &mut live);
        }
        assert_eq!(live, s.notes().iter().cloned().collect());
    }

    fn check(e: &Edit, live: &mut BTreeSet<String>) {
        match e {
            Edit::Append { path, .. } | Edit::ModifyMiddle { path, .. } => {
                assert!(live.contains(path), "{path}")
            }
            Edit::Create { path, .. } => assert!(live.insert(path.clone()), "{path} existed"),
            Edit::Delete { path } => assert!(live.remove(path), "{path}"),
            Edit::RenameFolder { from, to } => {
                let moved: Vec<String> = live
                    .iter()
                    .filter(|p| p.starts_with(&format!("{from}/")))
                    .cloned()
                    .collect();
                assert!(!moved.is_empty());
                for m in moved {
                    live.remove(&m);
                    live.insert(format!("{to}/{}", &m[from.len() + 1..]));
                }
            }
            Edit::Batch { edits } => edits.iter().for_each(|e| check(e, live)),
        }
    }
}
