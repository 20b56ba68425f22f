//! A reference server and seeded vaults on disk, and a directory read back for comparison.

use std::collections::BTreeMap;
use std::path::Path;

/// Starts a reference server on 127.0.0.1:0 with a temp data dir (dropped with the server).
pub fn server() -> (refserver::TestServer, tempfile::TempDir) {
    let data = tempfile::tempdir().unwrap();
    let srv = refserver::TestServer::start(refserver::ServerConfig::new(data.path())).unwrap();
    (srv, data)
}

/// Writes profile `name` (seed 0x5eed) under `dir`, streaming each file.
pub fn write_vault(dir: &Path, name: &str) {
    let p = scenarios::profile(name).unwrap();
    for f in scenarios::generate(&p, scenarios::DEFAULT_SEED) {
        let path = dir.join(&f.path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut out = std::fs::File::create(&path).unwrap();
        std::io::copy(&mut f.reader(), &mut out).unwrap();
    }
}

/// Writes the `small` profile (seed 0x5eed) under `dir`, plus one 2.5 MiB file so that
/// multi-chunk files and batched chunk reads are exercised.
pub fn write_small_vault(dir: &Path) {
    write_vault(dir, "small");
    let big: Vec<u8> = (0..(5 * 512 * 1024u32))
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::create_dir_all(dir.join("attachments")).unwrap();
    std::fs::write(dir.join("attachments/big.bin"), big).unwrap();
}

/// Every file under `dir` (relative path -> bytes), and every folder, sorted.
pub fn tree(dir: &Path) -> (BTreeMap<String, Vec<u8>>, Vec<String>) {
    fn walk(root: &Path, d: &Path, files: &mut BTreeMap<String, Vec<u8>>, dirs: &mut Vec<String>) {
        for e in std::fs::read_dir(d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if e.file_type().unwrap().is_dir() {
                dirs.push(rel);
                walk(root, &p, files, dirs);
            } else {
                files.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut files = BTreeMap::new();
    let mut dirs = Vec::new();
    walk(dir, dir, &mut files, &mut dirs);
    dirs.sort();
    (files, dirs)
}
