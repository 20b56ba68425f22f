#!/usr/bin/env node
// A LiveSync-like sync client on PouchDB, for vaultbench's client mode against a
// CouchDB-compatible server. Each device keeps a local PouchDB (LevelDB) in its state folder:
// a file is a document `f:<path>` listing content-addressed chunk documents `h:<sha256>`
// (64 KiB of base64 each), and PouchDB's own `replicate` moves them, as Self-hosted LiveSync
// does from Obsidian.
//
//   node sync.js push|pull|sync --dir DIR --state DIR --url URL [--user U --pass P]
//   node sync.js --version
//
// push: the folder's changes (new, changed and removed files) into the local database, then
//       one replication to the server.
// pull: one replication from the server, then the folder made to match the local database
//       (files written, files whose document was removed deleted, emptied folders removed).
// sync: push, then pull (a two-way device).
//
// Exit 0 on success; 1 with one line on stderr naming what failed; 2 on a bad command line.

"use strict";

const fs = require("fs");
const path = require("path");
const crypto = require("crypto");
const PouchDB = require("pouchdb");

const CHUNK_BYTES = 64 * 1024;
const FILE_PREFIX = "f:";
const CHUNK_PREFIX = "h:";
const TMP_PREFIX = ".vb-pouch-tmp-";

function usage(msg) {
  process.stderr.write(`sync.js: ${msg} (usage: sync.js push|pull|sync --dir DIR --state DIR --url URL [--user U --pass P])\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const mode = argv[0];
  if (!["push", "pull", "sync"].includes(mode)) usage(`unknown mode ${JSON.stringify(mode)}`);
  const opts = { mode };
  for (let i = 1; i < argv.length; i += 2) {
    const k = argv[i];
    const v = argv[i + 1];
    if (!["--dir", "--state", "--url", "--user", "--pass"].includes(k)) usage(`unknown flag ${JSON.stringify(k)}`);
    if (v === undefined) usage(`${k} needs a value`);
    opts[k.slice(2)] = v;
  }
  for (const k of ["dir", "state", "url"]) if (!opts[k]) usage(`--${k} is required`);
  return opts;
}

const sha256 = (buf) => crypto.createHash("sha256").update(buf).digest("hex");

// Every regular file under `root`, as POSIX paths relative to it, sorted.
function walk(root) {
  const out = [];
  const visit = (rel) => {
    for (const e of fs.readdirSync(path.join(root, rel), { withFileTypes: true })) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) visit(r);
      else if (e.isFile() && !e.name.startsWith(TMP_PREFIX)) out.push(r);
    }
  };
  visit("");
  return out.sort();
}

// A document's path, refused when it would climb out of the folder.
function safePath(p) {
  if (typeof p !== "string" || p === "" || p.length > 4096) throw new Error(`a document names a bad path ${JSON.stringify(String(p).slice(0, 80))}`);
  const parts = p.split("/");
  if (p.startsWith("/") || p.includes("\\") || p.includes("\0") || parts.some((s) => s === "" || s === "." || s === "..")) {
    throw new Error(`a document's path ${JSON.stringify(p.slice(0, 80))} climbs out of the folder`);
  }
  return p;
}

async function liveFiles(db) {
  const r = await db.allDocs({ startkey: FILE_PREFIX, endkey: `${FILE_PREFIX}\uffff`, include_docs: true });
  const m = new Map();
  for (const row of r.rows) if (row.doc && !row.doc._deleted) m.set(row.doc.path, row.doc);
  return m;
}

async function push(db, dir) {
  const known = await liveFiles(db);
  const docs = [];
  const chunks = new Map();
  const present = new Set();
  for (const rel of walk(dir)) {
    present.add(rel);
    const body = fs.readFileSync(path.join(dir, rel));
    const sha = sha256(body);
    const old = known.get(rel);
    if (old && old.sha === sha) continue;
    const children = [];
    let at = 0;
    do {
      const part = body.subarray(at, at + CHUNK_BYTES);
      const id = CHUNK_PREFIX + sha256(part);
      children.push(id);
      chunks.set(id, { _id: id, type: "leaf", data: part.toString("base64") });
      at += CHUNK_BYTES;
    } while (at < body.length);
    const doc = { _id: FILE_PREFIX + rel, type: "plain", path: rel, size: body.length, sha, children };
    if (old) doc._rev = old._rev;
    docs.push(doc);
  }
  for (const [rel, old] of known) {
    if (!present.has(rel)) docs.push({ _id: old._id, _rev: old._rev, _deleted: true });
  }
  if (chunks.size > 0) {
    const have = await db.allDocs({ keys: [...chunks.keys()] });
    const fresh = have.rows.filter((r) => !r.value || r.value.deleted).map((r) => chunks.get(r.key));
    await bulk(db, fresh, "chunks");
  }
  await bulk(db, docs, "files");
}

async function bulk(db, docs, what) {
  for (let i = 0; i < docs.length; i += 200) {
    const r = await db.bulkDocs(docs.slice(i, i + 200));
    const bad = r.find((x) => x.error);
    if (bad) throw new Error(`local database refused ${what} ${JSON.stringify(bad.id)}: ${bad.reason || bad.error}`);
  }
}

async function replicate(from, to) {
  const r = await PouchDB.replicate(from, to, { batch_size: 100, batches_limit: 4 });
  if (!r.ok || r.doc_write_failures > 0) {
    throw new Error(`${r.doc_write_failures} documents failed to write`);
  }
}

async function materialize(db, dir) {
  const live = await liveFiles(db);
  for (const [p, doc] of live) {
    const rel = safePath(p);
    const file = path.join(dir, ...rel.split("/"));
    let same = false;
    try {
      same = sha256(fs.readFileSync(file)) === doc.sha;
    } catch (_) {
      same = false;
    }
    if (same) continue;
    if (!Array.isArray(doc.children)) throw new Error(`file ${JSON.stringify(rel)}: its document lists no chunks`);
    const got = await db.allDocs({ keys: doc.children, include_docs: true });
    const parts = got.rows.map((row, i) => {
      if (!row.doc || typeof row.doc.data !== "string") throw new Error(`file ${JSON.stringify(rel)}: chunk ${doc.children[i]} is missing`);
      return Buffer.from(row.doc.data, "base64");
    });
    const body = Buffer.concat(parts);
    if (sha256(body) !== doc.sha) throw new Error(`file ${JSON.stringify(rel)}: its chunks do not add up to its digest`);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const tmp = path.join(path.dirname(file), `${TMP_PREFIX}${process.pid}`);
    try {
      fs.writeFileSync(tmp, body);
      fs.renameSync(tmp, file);
    } catch (e) {
      fs.rmSync(tmp, { force: true });
      throw e;
    }
  }
  for (const rel of walk(dir)) {
    if (!live.has(rel)) fs.rmSync(path.join(dir, ...rel.split("/")));
  }
  pruneEmpty(dir, true);
}

// Removes the folders under `d` that hold nothing (after files were removed); returns
// whether `d` is now empty.
function pruneEmpty(d, root) {
  let empty = true;
  for (const e of fs.readdirSync(d, { withFileTypes: true })) {
    if (e.isDirectory() && pruneEmpty(path.join(d, e.name), false)) continue;
    empty = false;
  }
  if (empty && !root) fs.rmdirSync(d);
  return empty;
}

async function main() {
  if (process.argv[2] === "--version") {
    // The client's start-up: Node and PouchDB loaded, nothing opened.
    process.stdout.write(`pouchdb ${PouchDB.version} on node ${process.version}\n`);
    return;
  }
  const o = parseArgs(process.argv.slice(2));
  const local = new PouchDB(path.join(path.resolve(o.state), "pouch"));
  const remoteOpts = { skip_setup: false };
  if (o.user) remoteOpts.auth = { username: o.user, password: o.pass || "" };
  // A database URL as a target root gives it (`http://HOST:PORT/DB/`), without its last slash.
  const remote = new PouchDB(o.url.replace(/\/+$/, ""), remoteOpts);
  // Each step names itself in the error line.
  const step = async (what, f) => {
    try {
      return await f();
    } catch (e) {
      const why = (e && (e.message || e.reason || e.name)) || String(e);
      throw new Error(`${what}: ${String(why).split("\n")[0]}${e && e.status ? ` (status ${e.status})` : ""}`);
    }
  };
  try {
    if (o.mode !== "pull") {
      await step("reading the folder into the local database", () => push(local, o.dir));
      await step("replication to the server", () => replicate(local, remote));
    }
    if (o.mode !== "push") {
      await step("replication from the server", () => replicate(remote, local));
      await step("writing the folder", () => materialize(local, o.dir));
    }
  } finally {
    await local.close();
    await remote.close();
  }
}

main().catch((e) => {
  const msg = String((e && (e.message || e.reason || e.name)) || e).split("\n")[0];
  process.stderr.write(`sync.js: ${msg}\n`);
  process.exit(1);
});
