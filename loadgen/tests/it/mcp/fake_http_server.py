"""A small MCP server over Streamable HTTP for the MCP client's tests (standard library only).

Usage: fake_http_server.py MODE ROOT PORT_FILE|PORT

It listens on 127.0.0.1, on PORT, or on a free port that it writes to PORT_FILE, and serves
POST and DELETE on /mcp.

Modes:
  json        the handshake era (2025-11-25): initialize gives an Mcp-Session-Id, every later
              request must carry it and MCP-Protocol-Version: 2025-11-25 (else 400);
              answers are application/json; notifications 202; DELETE ends the session
  sse         as json, but every answer is an SSE stream: a priming event (an id and empty
              data), a progress notification, then the answer, with CRLF line ends
  stateless   the 2026-07-28 revision over HTTP: server/discover, no session; every request
              needs MCP-Protocol-Version: 2026-07-28 matching its _meta, and Mcp-Method
  trickle     as sse, but the answer to initialize is an SSE stream that sends a comment
              byte every 50 ms and never the answer
  hugeline    as sse, but initialize's stream sends 1 GiB of data without a line end
  unknown-ids as json, but initialize's SSE stream carries answers with other ids only

Every request must Accept both application/json and text/event-stream (else 406). The tools
are fake_server.py's, over ROOT. If the environment has FAKE_MCP_PID_FILE, the server writes
its pid there first.
"""

import json
import os
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fake_server import MODERN, TOOLS, call  # noqa: E402

LEGACY = "2025-11-25"
MODE = sys.argv[1]
ROOT = os.path.realpath(sys.argv[2])
SESSIONS = set()
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def plain(self, status, obj=None, headers=()):
        body = b"" if obj is None else json.dumps(obj).encode()
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        if obj is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def refuse(self, status, code, message, mid=None):
        self.plain(status, {"jsonrpc": "2.0", "id": mid, "error": {"code": code, "message": message}})

    def sse_head(self, headers=()):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def answer(self, mid, result=None, error=None, headers=()):
        msg = {"jsonrpc": "2.0", "id": mid}
        if error is not None:
            msg["error"] = error
        else:
            msg["result"] = result
        if MODE in ("json", "stateless"):
            self.plain(200, msg, headers)
            return
        self.sse_head(headers)
        ev = "id: %s\r\ndata:\r\n\r\n" % uuid.uuid4()
        ev += "data: %s\r\n\r\n" % json.dumps(
            {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}})
        ev += "event: message\r\ndata: %s\r\n\r\n" % json.dumps(msg)
        self.wfile.write(ev.encode())
        self.wfile.flush()

    def do_DELETE(self):
        sid = self.headers.get("Mcp-Session-Id")
        with LOCK:
            if MODE == "stateless" or sid not in SESSIONS:
                self.refuse(404 if MODE != "stateless" else 405, -32000, "no such session")
                return
            SESSIONS.discard(sid)
        self.plain(200)

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        msg = json.loads(self.rfile.read(length))
        accept = self.headers.get("Accept", "")
        if "application/json" not in accept or "text/event-stream" not in accept:
            self.refuse(406, -32000, "Accept must list application/json and text/event-stream")
            return
        mid, method = msg.get("id"), msg.get("method")
        params = msg.get("params") or {}
        header_version = self.headers.get("MCP-Protocol-Version")
        if MODE == "stateless":
            meta = params.get("_meta") or {}
            if header_version != MODERN or meta.get("io.modelcontextprotocol/protocolVersion") != MODERN:
                self.refuse(400, -32004, "unsupported protocol version", mid)
                return
            if self.headers.get("Mcp-Method") != method:
                self.refuse(400, -32001, "HeaderMismatch: Mcp-Method", mid)
                return
            if method == "server/discover":
                self.answer(mid, {
                    "resultType": "complete",
                    "supportedVersions": [MODERN],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "fake-http-stateless", "version": "1.0.0"},
                })
                return
        else:
            if method == "initialize":
                sid = str(uuid.uuid4())
                with LOCK:
                    SESSIONS.add(sid)
                head = [("Mcp-Session-Id", sid)]
                if MODE == "trickle":
                    self.sse_head(head)
                    try:
                        while True:
                            self.wfile.write(b":")
                            self.wfile.flush()
                            time.sleep(0.05)
                    except OSError:
                        return
                if MODE == "hugeline":
                    self.sse_head(head)
                    chunk = b"x" * (1 << 20)
                    try:
                        self.wfile.write(b"data: ")
                        for _ in range(1024):
                            self.wfile.write(chunk)
                    except OSError:
                        pass
                    return
                if MODE == "unknown-ids":
                    self.sse_head(head)
                    try:
                        for i in range(10000):
                            self.wfile.write(("data: %s\n\n" % json.dumps(
                                {"jsonrpc": "2.0", "id": mid + 1000 + i, "result": {}})).encode())
                            self.wfile.flush()
                    except OSError:
                        pass
                    return
                self.answer(mid, {
                    "protocolVersion": LEGACY,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "fake-http-" + MODE, "version": "1.0.0"},
                }, headers=head)
                return
            sid = self.headers.get("Mcp-Session-Id")
            with LOCK:
                known = sid in SESSIONS
            if not known:
                # The SDK's answer to a request outside a session (server/discover included).
                self.refuse(400, -32000, "Bad Request: No valid session ID provided", mid)
                return
            if header_version != LEGACY:
                self.refuse(400, -32000, "Bad Request: Unsupported protocol version", mid)
                return
            if mid is None:
                self.plain(202)
                return
        if method == "tools/list":
            start = int(params.get("cursor", "0"))
            page = TOOLS[start:start + 2]
            result = {"tools": [{"name": t, "inputSchema": {"type": "object"}} for t in page]}
            if start + 2 < len(TOOLS):
                result["nextCursor"] = str(start + 2)
            if MODE == "stateless":
                result["resultType"] = "complete"
            self.answer(mid, result)
            return
        if method == "tools/call":
            text = call(ROOT, params.get("name"), params.get("arguments") or {})
            result = {"content": [{"type": "text", "text": text or "no such file"}]}
            if text is None:
                result["isError"] = True
            if MODE == "stateless":
                result["resultType"] = "complete"
            self.answer(mid, result)
            return
        self.answer(mid, error={"code": -32601, "message": "Method not found"})


def main():
    pid_file = os.environ.get("FAKE_MCP_PID_FILE")
    if pid_file:
        with open(pid_file, "w") as f:
            f.write(str(os.getpid()))
    where = sys.argv[3]
    server = ThreadingHTTPServer(("127.0.0.1", int(where) if where.isdigit() else 0), Handler)
    server.daemon_threads = True
    if not where.isdigit():
        with open(where + ".tmp", "w") as f:
            f.write(str(server.server_address[1]))
        os.rename(where + ".tmp", where)
    server.serve_forever()


if __name__ == "__main__":
    main()
