//! Mirror push and pull: one side made equal to the other, deletes included, by a device that
//! remembers nothing between runs (a command-line client run once per sync). Both start from
//! the server's current listing (the change feed from seq 0, the last change of each file):
//! the push skips what the server already holds with the same content, posts the rest on top
//! of the server's heads and tombstones what the folder no longer has; the pull writes what
//! differs and removes what the server no longer lists.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use crate::error::LoadError;
use crate::protocols::obsync::client::{Device, FileState, lock_files};
use crate::stats::Recorder;
use crate::transfer::{PushOpts, TransferReport};

use super::local::{Entry, Walk, check_dir, decode_manifest, safe_rel_path};
use super::long_poll::{FeedCursor, changes_page};
use super::push::{post_version, push_vault_inner};

/// The server's live entries by path (tombstones left out), read from the whole change feed
/// (bounded by the target's feed bounds), each as this device's index keeps it.
async fn server_listing(
    dev: &Device,
    rec: &Recorder,
) -> Result<BTreeMap<String, FileState>, LoadError> {
    let mut cursor = FeedCursor::new(0, dev.target().feed_bounds());
    let mut last = BTreeMap::new();
    loop {
        let page = changes_page(dev, rec, cursor.seq).await?;
        let more = cursor.advance(&page)?;
        for c in page.changes {
            last.insert(c.file_id.clone(), c);
        }
        if !more {
            break;
        }
    }
    let mut live = BTreeMap::new();
    for c in last.into_values().filter(|c| !c.deleted) {
        let m = decode_manifest(&c)?;
        let rel = safe_rel_path(&m.path)?.to_owned();
        live.insert(
            rel,
            FileState {
                file_id: c.file_id,
                head: c.version_id,
                sids: c.sids,
                size: m.size,
                sha256: m.sha256,
                is_dir: m.kind == "dir",
            },
        );
    }
    Ok(live)
}

/// Makes the server's vault equal `dir`: files and folders the server holds with the same
/// content are skipped, changed ones get a version on top of the server's head, new ones are
/// pushed, and every path the server lists that `dir` no longer has gets a tombstone (files
/// before the folders holding them). `report.deleted` counts the tombstones; `requests`
/// every request, the listing's included.
pub async fn mirror_push(
    dev: &Device,
    dir: &Path,
    opts: &PushOpts,
) -> Result<TransferReport, LoadError> {
    check_dir(dir)?;
    let rec = Recorder::new(false);
    let t0 = Instant::now();
    let live = server_listing(dev, &rec).await?;
    for (rel, st) in &live {
        lock_files(dev).insert(rel, st.clone());
    }
    // The index holds the server's whole listing: a file it lacks is new there.
    let pushed = push_vault_inner(dev, dir, opts, true, false, &rec, false).await?;
    let mut deleted = 0;
    // Reverse path order: a folder's entries come before the folder itself.
    for (rel, st) in live.iter().rev() {
        match std::fs::symlink_metadata(dir.join(rel)) {
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(LoadError::io(dir.join(rel), e)),
        }
        post_version(
            dev,
            &rec,
            rel,
            &st.file_id,
            vec![st.head.clone()],
            vec![],
            0,
            "",
            st.is_dir,
            true,
        )
        .await?;
        deleted += 1;
    }
    let mut r = TransferReport::new(rec.snapshot(), t0.elapsed());
    r.deleted = deleted;
    r.files = pushed.files;
    r.dirs = pushed.dirs;
    r.bytes = pushed.bytes;
    r.chunks_transferred = pushed.chunks_transferred;
    r.chunks_present = pushed.chunks_present;
    r.last_seq = pushed.last_seq;
    r.checkpoints = pushed.checkpoints;
    Ok(r)
}

/// Makes `dir` (created if missing) equal the server's vault: the whole feed is pulled
/// (every file whose local copy differs is written, atomically and SHA-verified, as
/// [`pull_vault`](super::pull_vault) does), after which the device's index holds exactly what
/// the server lists; every file and folder of `dir` not in it is removed (files first, then
/// the folders left empty). `report.deleted` counts what was removed here (a device that
/// knew the files before, unlike a fresh process's, also removes them as it applies their
/// tombstones; those are not counted).
pub async fn mirror_pull(dev: &Device, dir: &Path) -> Result<TransferReport, LoadError> {
    std::fs::create_dir_all(dir).map_err(|e| LoadError::io(dir, e))?;
    check_dir(dir)?;
    let t0 = Instant::now();
    let mut r = super::pull_vault(dev, dir, 0).await?;
    let (mut files, mut dirs) = (Vec::new(), Vec::new());
    let mut walk = Walk::new(dir)?;
    while let Some(e) = walk.next_entry()? {
        let listed = |rel: &str, is_dir: bool| {
            lock_files(dev)
                .by_path
                .get(rel)
                .is_some_and(|s| s.is_dir == is_dir)
        };
        match e {
            Entry::File(abs, rel) if !listed(&rel, false) => files.push(abs),
            Entry::Dir(rel) if !listed(&rel, true) => dirs.push(dir.join(rel)),
            _ => {}
        }
    }
    let mut deleted = 0;
    for f in files {
        std::fs::remove_file(&f).map_err(|e| LoadError::io(&f, e))?;
        deleted += 1;
    }
    // Deepest first: the walk lists a folder before what it holds.
    for d in dirs.iter().rev() {
        match std::fs::remove_dir(d) {
            Ok(()) => deleted += 1,
            // A folder the server does not list but which still holds listed files stays.
            Err(e) if e.kind() == std::io::ErrorKind::DirectoryNotEmpty => {}
            Err(e) => return Err(LoadError::io(d, e)),
        }
    }
    r.deleted = deleted;
    r.wall_ns = t0.elapsed().as_nanos() as u64;
    Ok(r)
}
