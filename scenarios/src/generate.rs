//! The file stream: `generate(profile, seed)` yields every file of the vault in a fixed
//! order (notes, attachments, extras), each made only when the iterator reaches it.

use std::io::Read;

use crate::binary::{RandomReader, png_of_size, tiny_png};
use crate::hazards::{Extra, extras};
use crate::plan::{AttachmentKind, Plan};
use crate::profile::Profile;
use crate::rng::{Purpose, below, stream};

/// One generated file: its vault-relative path ('/' separators), size, and bytes.
#[derive(Debug)]
pub struct GenFile {
    pub path: String,
    pub size: u64,
    content: Content,
}

#[derive(Debug)]
enum Content {
    Bytes(Vec<u8>),
    /// Incompressible bytes from (seed, attachment index): pulled in pieces.
    Random {
        seed: u64,
        index: u32,
    },
}

impl GenFile {
    /// A reader over the bytes; large files are produced as they are read.
    pub fn reader(&self) -> FileReader<'_> {
        match &self.content {
            Content::Bytes(b) => FileReader::Bytes(b.as_slice()),
            Content::Random { seed, index } => FileReader::Random(Box::new(RandomReader::new(
                stream(*seed, Purpose::AttachmentBody, *index),
                self.size,
            ))),
        }
    }

    /// The bytes when they are held in memory (everything but large streamed attachments).
    pub fn bytes(&self) -> Option<&[u8]> {
        match &self.content {
            Content::Bytes(b) => Some(b),
            Content::Random { .. } => None,
        }
    }

    /// All the bytes (buffers a streamed file whole: for tests and small files).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.size as usize);
        // Reading from memory or a seeded generator cannot fail.
        let _ = self.reader().read_to_end(&mut v);
        v
    }
}

/// Reads a [`GenFile`]'s bytes.
pub enum FileReader<'a> {
    Bytes(&'a [u8]),
    Random(Box<RandomReader>),
}

impl Read for FileReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            FileReader::Bytes(b) => b.read(buf),
            FileReader::Random(r) => r.read(buf),
        }
    }
}

/// The iterator returned by [`generate`].
pub struct Files {
    profile: Profile,
    seed: u64,
    plan: Plan,
    extras: Vec<Extra>,
    /// Text appended to planted notes (empty unless the profile plants queries).
    planting: crate::plant::Planting,
    next: usize,
}

/// Every file of `profile` made from `seed`, in a deterministic order.
pub fn generate(p: &Profile, seed: u64) -> Files {
    let plan = Plan::new(p, seed);
    let planting = crate::plant::plant(p, &plan, seed);
    Files {
        profile: p.clone(),
        seed,
        plan,
        extras: extras(p),
        planting,
        next: 0,
    }
}

impl Files {
    /// Total number of files this iterator yields.
    pub fn file_count(&self) -> usize {
        self.plan.notes.len() + self.plan.attachments.len() + self.extras.len()
    }
}

impl Iterator for Files {
    type Item = GenFile;

    fn next(&mut self) -> Option<GenFile> {
        let i = self.next;
        self.next += 1;
        let (n_notes, n_att) = (self.plan.notes.len(), self.plan.attachments.len());
        if i < n_notes {
            let mut bytes = crate::note::render(&self.profile, &self.plan, self.seed, i as u32);
            if let Some(text) = self.planting.appended.get(&(i as u32)) {
                bytes.extend_from_slice(text.as_bytes());
            }
            return Some(GenFile {
                path: self.plan.notes[i].path.clone(),
                size: bytes.len() as u64,
                content: Content::Bytes(bytes),
            });
        }
        if i < n_notes + n_att {
            let k = i - n_notes;
            let a = &self.plan.attachments[k];
            let mut rng = stream(self.seed, Purpose::AttachmentBody, k as u32);
            let content = match a.kind {
                AttachmentKind::TinyPng => {
                    let rgb = [
                        below(&mut rng, 256) as u8,
                        below(&mut rng, 256) as u8,
                        below(&mut rng, 256) as u8,
                    ];
                    Content::Bytes(tiny_png(rgb))
                }
                AttachmentKind::Image => Content::Bytes(png_of_size(&mut rng, a.size as usize)),
                AttachmentKind::Bytes => {
                    let mut b = vec![0u8; (a.size as usize).next_multiple_of(64)];
                    crate::rng::fill_blocks(&mut rng, &mut b);
                    b.truncate(a.size as usize);
                    Content::Bytes(b)
                }
                AttachmentKind::Large => Content::Random {
                    seed: self.seed,
                    index: k as u32,
                },
            };
            return Some(GenFile {
                path: a.path.clone(),
                size: a.size,
                content,
            });
        }
        let k = i - n_notes - n_att;
        let extra = self.extras.get(k)?;
        let p = &self.profile;
        let bytes = if p.hazard_names.is_some() && !p.hazards && extra.is_name() {
            extra.twin_body(self.seed, k as u32, f64::from(p.size_median), p.size_sigma)
        } else {
            extra.render(self.seed, k as u32)
        };
        Some(GenFile {
            path: extra.path(),
            size: bytes.len() as u64,
            content: Content::Bytes(bytes),
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.file_count().saturating_sub(self.next);
        (left, Some(left))
    }
}
