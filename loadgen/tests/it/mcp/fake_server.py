"""A small MCP server over stdio for the MCP client's tests (standard library only).

Usage: fake_server.py MODE ROOT [VERSION]

Modes:
  stateless       speaks only the 2026-07-28 revision: server/discover, and every request
                  must carry _meta with that protocol version; initialize is unknown
  legacy          speaks only the handshake era: server/discover before initialize is
                  refused as invalid (-32602), initialize answers VERSION (default
                  2025-11-25), tools/list before notifications/initialized is refused
  legacy-mute     as legacy, but server/discover gets no answer at all
  silent          reads requests and never answers
  nonjson         answers the first request with a line that is not JSON
  hugeline        answers the first request with a line of 1 GiB and no newline
  unknown-ids     answers every request with an id no request had
  endless-cursor  stateless, and every tools/list page has a nextCursor
  deep            answers server/discover with a result nested 100,000 levels deep

Tools (stateless and legacy): read_text_file, read_multiple_files, list_directory and
search_files over ROOT; tools/list pages two tools at a time. If the environment has
FAKE_MCP_PID_FILE, the server writes its pid there first.
"""

import fnmatch
import json
import os
import sys

MODERN = "2026-07-28"
TOOLS = ["read_text_file", "read_multiple_files", "list_directory", "search_files"]


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def error(mid, code, message, data=None):
    e = {"code": code, "message": message}
    if data is not None:
        e["data"] = data
    send({"jsonrpc": "2.0", "id": mid, "error": e})


def inside(root, path):
    real = os.path.realpath(path)
    return real == root or real.startswith(root + os.sep)


def call(root, name, args):
    """A CallToolResult's content text, or None for a tool error."""
    if name == "read_text_file":
        p = args.get("path", "")
        if not inside(root, p) or not os.path.isfile(p):
            return None
        with open(p, encoding="utf-8", errors="replace") as f:
            return f.read()
    if name == "read_multiple_files":
        out = []
        for p in args.get("paths", []):
            if inside(root, p) and os.path.isfile(p):
                with open(p, encoding="utf-8", errors="replace") as f:
                    out.append(p + ":\n" + f.read())
        return "\n---\n".join(out)
    if name == "list_directory":
        p = args.get("path", "")
        if not inside(root, p) or not os.path.isdir(p):
            return None
        return "\n".join(
            ("[DIR] " if os.path.isdir(os.path.join(p, n)) else "[FILE] ") + n
            for n in sorted(os.listdir(p))
        )
    if name == "search_files":
        pat = args.get("pattern", "*")
        hits = []
        for d, _, files in os.walk(root):
            hits += [os.path.join(d, f) for f in files if fnmatch.fnmatch(f, pat)]
        return "\n".join(sorted(hits))
    return None


def main():
    mode, root = sys.argv[1], os.path.realpath(sys.argv[2])
    version = sys.argv[3] if len(sys.argv) > 3 else "2025-11-25"
    pid_file = os.environ.get("FAKE_MCP_PID_FILE")
    if pid_file:
        with open(pid_file, "w") as f:
            f.write(str(os.getpid()))
    modern = mode in ("stateless", "endless-cursor")
    initialized = False
    for line in sys.stdin:
        msg = json.loads(line)
        mid, method = msg.get("id"), msg.get("method")
        params = msg.get("params") or {}
        if mid is None:
            if method == "notifications/initialized":
                initialized = True
            continue
        if mode == "silent":
            continue
        if mode == "nonjson":
            sys.stdout.write("Starting server on stdio...\n")
            sys.stdout.flush()
            continue
        if mode == "hugeline":
            chunk = "x" * (1 << 20)
            try:
                for _ in range(1024):
                    sys.stdout.write(chunk)
                sys.stdout.flush()
            except BrokenPipeError:
                return
            continue
        if mode == "unknown-ids":
            send({"jsonrpc": "2.0", "id": mid + 1000, "result": {}})
            continue
        if mode == "deep":
            sys.stdout.write('{"jsonrpc":"2.0","id":%d,"result":' % mid)
            sys.stdout.write("[" * 100000 + "]" * 100000 + "}\n")
            sys.stdout.flush()
            continue
        if modern:
            meta = params.get("_meta") or {}
            if meta.get("io.modelcontextprotocol/protocolVersion") != MODERN or not isinstance(
                meta.get("io.modelcontextprotocol/clientCapabilities"), dict
            ):
                error(mid, -32004, "unsupported protocol version", {"supported": [MODERN]})
                continue
            if method == "server/discover":
                send({"jsonrpc": "2.0", "id": mid, "result": {
                    "resultType": "complete",
                    "supportedVersions": [MODERN],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "fake-stateless", "version": "1.0.0"},
                }})
                continue
        else:
            if method == "server/discover":
                if mode != "legacy-mute":
                    error(mid, -32602, "Invalid request parameters")
                continue
            if method == "initialize":
                send({"jsonrpc": "2.0", "id": mid, "result": {
                    "protocolVersion": version,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "fake-legacy", "version": "1.0.0"},
                }})
                continue
            if not initialized:
                error(mid, -32600, "not initialized")
                continue
        if method == "tools/list":
            if mode == "endless-cursor":
                n = int(params.get("cursor", "c0")[1:]) + 1
                send({"jsonrpc": "2.0", "id": mid, "result": {
                    "resultType": "complete",
                    "tools": [{"name": "t%d" % n, "inputSchema": {"type": "object"}}],
                    "nextCursor": "c%d" % n}})
                continue
            start = int(params.get("cursor", "0"))
            page = TOOLS[start:start + 2]
            result = {"tools": [{"name": t, "inputSchema": {"type": "object"}} for t in page]}
            if start + 2 < len(TOOLS):
                result["nextCursor"] = str(start + 2)
            if modern:
                result["resultType"] = "complete"
            send({"jsonrpc": "2.0", "id": mid, "result": result})
            continue
        if method == "tools/call":
            text = call(root, params.get("name"), params.get("arguments") or {})
            result = {"content": [{"type": "text", "text": text or "no such file"}]}
            if text is None:
                result["isError"] = True
            if modern:
                result["resultType"] = "complete"
            send({"jsonrpc": "2.0", "id": mid, "result": result})
            continue
        error(mid, -32601, "Method not found")


if __name__ == "__main__":
    main()
