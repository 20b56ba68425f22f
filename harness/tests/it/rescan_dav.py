# A small WebDAV server for the growth tests: serves the folder ARGV[2] on 127.0.0.1:ARGV[1]
# (OPTIONS, MKCOL, PUT, GET, PROPFIND Depth 0 and 1); with --rescan it re-reads the whole
# tree after every PUT and prints one line per file, so an import through it is quadratic.
import os, sys, urllib.parse, email.utils
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = os.path.abspath(sys.argv[2])
RESCAN = len(sys.argv) > 3 and sys.argv[3] == "--rescan"

def local(path):
    p = urllib.parse.unquote(urllib.parse.urlsplit(path).path)
    full = os.path.abspath(os.path.join(ROOT, p.lstrip("/")))
    if full != ROOT and not full.startswith(ROOT + os.sep):
        raise ValueError(path)
    return full

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def answer(self, code, body=b"", ctype="text/plain"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("DAV", "1")
        self.end_headers()
        self.wfile.write(body)
    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""
    def do_OPTIONS(self):
        self.body(); self.answer(200)
    def do_MKCOL(self):
        self.body()
        os.makedirs(local(self.path), exist_ok=True)
        self.answer(201)
    def do_PUT(self):
        data = self.body()
        f = local(self.path)
        os.makedirs(os.path.dirname(f), exist_ok=True)
        with open(f, "wb") as out:
            out.write(data)
        if RESCAN:
            # Re-read the whole tree after every upload, one log line per file.
            lines = []
            for d, _, names in os.walk(ROOT):
                for n in names:
                    with open(os.path.join(d, n), "rb") as g:
                        g.read()
                    lines.append("rescan " + os.path.relpath(os.path.join(d, n), ROOT))
            sys.stdout.write("\n".join(lines) + "\n")
            sys.stdout.flush()
        self.answer(201)
    def do_GET(self):
        self.body()
        f = local(self.path)
        if not os.path.isfile(f):
            return self.answer(404)
        with open(f, "rb") as g:
            self.answer(200, g.read(), "application/octet-stream")
    def do_PROPFIND(self):
        self.body()
        f = local(self.path)
        if not os.path.exists(f):
            return self.answer(404)
        base = urllib.parse.urlsplit(self.path).path
        if os.path.isdir(f) and not base.endswith("/"):
            base += "/"
        def entry(href, full):
            st = os.stat(full)
            mod = email.utils.formatdate(st.st_mtime, usegmt=True)
            if os.path.isdir(full):
                props = "<D:resourcetype><D:collection/></D:resourcetype>"
            else:
                props = ("<D:resourcetype/><D:getcontentlength>%d</D:getcontentlength>"
                         '<D:getetag>"%x-%x"</D:getetag>' % (st.st_size, st.st_size, st.st_mtime_ns))
            return ("<D:response><D:href>%s</D:href><D:propstat><D:prop>%s"
                    "<D:getlastmodified>%s</D:getlastmodified></D:prop>"
                    "<D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>"
                    % (urllib.parse.quote(href), props, mod))
        out = [entry(base, f)]
        if os.path.isdir(f) and self.headers.get("Depth", "1") != "0":
            for n in sorted(os.listdir(f)):
                full = os.path.join(f, n)
                out.append(entry(base + n + ("/" if os.path.isdir(full) else ""), full))
        body = ('<?xml version="1.0" encoding="utf-8"?><D:multistatus xmlns:D="DAV:">'
                + "".join(out) + "</D:multistatus>").encode()
        self.answer(207, body, "application/xml; charset=utf-8")

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
