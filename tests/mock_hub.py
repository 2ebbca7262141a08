#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""A stand-in for the Hugging Face Hub on loopback, for tests/test_hub.cpp (CI has no internet).

    python3 tests/mock_hub.py [--serve model:ORG/NAME=DIR ...]

Prints "PORT <n>" on stdout once it listens on 127.0.0.1 (port chosen by the OS), then serves until stdin
closes (the test's QProcess ends) or it is killed. Routes and headers follow the real Hub:
  GET  /api/{models,datasets}/ID/revision/REV[?blobs=true]  -> {"id", "sha", "siblings": [{rfilename, size,
                                                               blobId, lfs: {sha256, size, pointerSize}}]}
  HEAD/GET /ID/resolve/REV/PATH, /datasets/ID/resolve/...     -> small files: 200, ETag "<git sha1>";
       LFS files: 302 to /cdn/<sha256> with X-Linked-Etag "<sha256>", X-Linked-Size; X-Repo-Commit always
  GET  /cdn/SHA256                                            -> the LFS content; honours Range (206)
  GET  /_log                                                  -> the requests seen so far (JSON), for assertions
Errors as the Hub sends them: 401 + X-Error-Code: GatedRepo (no token) / 403 (wrong token) for gated/model,
404 + X-Error-Code: RepoNotFound / RevisionNotFound. Scenario repos (content made from fixed seeds):
  org/tiny        a model: config.json, tokenizer files, model.safetensors (LFS), pytorch_model.bin (skipped)
  gated/model     needs "Authorization: Bearer good-token"
  busy/model      the first listing answers 429 with Retry-After: 1
  flaky/model     the first download of model.safetensors sends half of it, then cuts the connection
  corrupt/model   model.safetensors's content does not match the sha256 in the listing
  pickle/model    only pytorch_model.bin (+ config.json)
  org/data        a dataset repo: data/train-00000-of-00001.parquet (LFS), README.md
  slow/model      model.safetensors (2 MB) served at about 200 KB/s, for cancel (Ctrl-C) tests
--serve adds a repo whose files are those of DIR (*.safetensors and *.parquet as LFS files).
"""
import argparse
import hashlib
import json
import os
import random
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse

LFS_SUFFIXES = (".safetensors", ".bin", ".parquet", ".pt", ".gguf")


def git_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def seeded(seed, n):
    rnd = random.Random(seed)
    return bytes(rnd.getrandbits(8) for _ in range(n))


class Repo:
    def __init__(self, kind, repo_id, files, commit=None, **flags):
        self.kind, self.id, self.files, self.flags = kind, repo_id, files, flags
        self.commit = commit or hashlib.sha1(("commit " + repo_id).encode()).hexdigest()
        self.lies = {}  # path -> sha256 the listing claims instead of the real one

    def entry(self, path):
        data = self.files[path]
        lfs = path.endswith(LFS_SUFFIXES)
        e = {"rfilename": path, "size": len(data), "blobId": git_sha1(data)}
        if lfs:
            e["lfs"] = {"sha256": self.lies.get(path, hashlib.sha256(data).hexdigest()), "size": len(data),
                        "pointerSize": 134}
        return e


def scenario_repos():
    config = json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}).encode()
    tok = json.dumps({"version": "1.0", "model": {"type": "BPE"}}).encode()
    weights = seeded(1, 300_000)
    repos = [
        Repo("model", "org/tiny", {"config.json": config, "tokenizer.json": tok,
                                    "tokenizer_config.json": b'{"eos_token": "</s>"}',
                                    "generation_config.json": b'{"do_sample": false}',
                                    "model.safetensors": weights, "pytorch_model.bin": seeded(2, 1000),
                                    "README.md": b"# tiny\n", "original/consolidated.pth": seeded(3, 100)}),
        Repo("model", "gated/model", {"config.json": config, "model.safetensors": seeded(4, 5000)}),
        Repo("model", "busy/model", {"config.json": config, "model.safetensors": seeded(5, 5000)}),
        Repo("model", "flaky/model", {"config.json": config, "model.safetensors": seeded(6, 200_000)}),
        Repo("model", "corrupt/model", {"config.json": config, "model.safetensors": seeded(7, 5000)}),
        Repo("model", "pickle/model", {"config.json": config, "pytorch_model.bin": seeded(8, 50_000)}),
        Repo("model", "slow/model", {"config.json": config, "model.safetensors": seeded(10, 2_000_000)}),
        Repo("dataset", "org/data", {"data/train-00000-of-00001.parquet": seeded(9, 4000),
                                     "README.md": b"---\nlicense: mit\n---\n"}),
    ]
    repos[4].lies["model.safetensors"] = hashlib.sha256(b"something else").hexdigest()
    return repos


class State:
    def __init__(self, repos):
        self.repos = {(r.kind, r.id): r for r in repos}
        self.cdn = {}
        for r in repos:
            for path, data in r.files.items():
                self.cdn[hashlib.sha256(data).hexdigest()] = (r, path)
        self.log = []
        self.counts = {}
        self.lock = threading.Lock()

    def count(self, key):
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + 1
            return self.counts[key]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state = None

    def log_message(self, *args):
        pass

    def record(self):
        with self.state.lock:
            self.state.log.append({"method": self.command, "path": self.path,
                                   "range": self.headers.get("Range"),
                                   "authorization": self.headers.get("Authorization")})

    def send(self, code, body=b"", headers=None, ctype="application/json", slow=False):
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command == "HEAD":
            return
        if not slow:
            self.wfile.write(body)
            return
        try:
            for k in range(0, len(body), 20_000):  # about 200 KB/s
                self.wfile.write(body[k:k + 20_000])
                self.wfile.flush()
                time.sleep(0.1)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def error(self, code, error_code, message):
        self.send(code, json.dumps({"error": message}).encode(),
                  {"X-Error-Code": error_code, "X-Error-Message": message})

    def find_repo(self, kind, rid):
        repo = self.state.repos.get((kind, rid))
        if repo is None:
            self.error(404, "RepoNotFound", "Repository Not Found for url: " + self.path)
            return None
        if rid == "gated/model":
            auth = self.headers.get("Authorization")
            if auth is None:
                self.error(401, "GatedRepo", "Access to model gated/model is restricted. You must have access to it "
                                             "and be authenticated to access it. Please log in.")
                return None
            if auth != "Bearer good-token":
                self.error(403, "GatedRepo", "Access to model gated/model is restricted and you are not in the "
                                             "authorized list. Visit https://huggingface.co/gated/model to ask for "
                                             "access.")
                return None
        return repo

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        self.record()
        url = urlparse(self.path)
        parts = [unquote(p) for p in url.path.split("/")[1:]]
        if parts == ["_log"]:
            return self.send(200, json.dumps(self.state.log).encode())
        if parts[:1] == ["api"] and len(parts) >= 6 and parts[4] == "revision":
            kind = {"models": "model", "datasets": "dataset"}.get(parts[1])
            return self.listing(kind, parts[2] + "/" + parts[3], "/".join(parts[5:]))
        if parts[:1] == ["cdn"] and len(parts) == 2:
            return self.cdn(parts[1])
        kind = "model"
        if parts[:1] == ["datasets"]:
            kind, parts = "dataset", parts[1:]
        if len(parts) >= 5 and parts[2] == "resolve":
            return self.resolve(kind, parts[0] + "/" + parts[1], parts[3], "/".join(parts[4:]))
        self.send(404, b"{}")

    def listing(self, kind, rid, rev):
        repo = self.find_repo(kind, rid)
        if repo is None:
            return
        if rid == "busy/model" and self.state.count("busy-listing") == 1:
            return self.send(429, b'{"error": "rate limited"}', {"Retry-After": "1"})
        if rev not in ("main", repo.commit):
            return self.error(404, "RevisionNotFound", "Invalid rev id: " + rev)
        body = {"id": rid, "sha": repo.commit, "siblings": [repo.entry(p) for p in sorted(repo.files)]}
        self.send(200, json.dumps(body).encode())

    def resolve(self, kind, rid, rev, path):
        repo = self.find_repo(kind, rid)
        if repo is None:
            return
        if rev not in ("main", repo.commit):
            return self.error(404, "RevisionNotFound", "Invalid rev id: " + rev)
        if path not in repo.files:
            return self.error(404, "EntryNotFound", path + " does not exist on \"" + rev + "\"")
        data = repo.files[path]
        headers = {"X-Repo-Commit": repo.commit, "ETag": '"%s"' % git_sha1(data)}
        if path.endswith(LFS_SUFFIXES):
            sha = hashlib.sha256(data).hexdigest()
            headers.update({"X-Linked-Etag": '"%s"' % sha, "X-Linked-Size": str(len(data)),
                            # Another host name, as the real CDN: the client must not send the token there.
                            "Location": "http://localhost:%d/cdn/%s?repo=%s" % (self.server.server_address[1], sha,
                                                                                rid)})
            return self.send(302, b"", headers)
        self.send_ranged(data, headers)

    def cdn(self, sha):
        hit = self.state.cdn.get(sha)
        if hit is None:
            return self.send(404, b"{}")
        repo, path = hit
        data = repo.files[path]
        if self.headers.get("Authorization"):
            return self.send(400, b'{"error": "the CDN must not receive the Hub token"}')
        if repo.id == "corrupt/model":
            data = bytes(b ^ 1 for b in data)
        if repo.id == "flaky/model" and self.command == "GET" and self.state.count("flaky-cdn") == 1:
            # Announce everything, send half, cut the connection.
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self.send_ranged(data, {"ETag": '"%s"' % sha, "Accept-Ranges": "bytes"}, slow=repo.id == "slow/model")

    def send_ranged(self, data, headers, slow=False):
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes="):
            start_s, _, end_s = rng[len("bytes="):].partition("-")
            start = int(start_s)
            end = int(end_s) if end_s else len(data) - 1
            if start >= len(data):
                return self.send(416, b"", {"Content-Range": "bytes */%d" % len(data)})
            headers = dict(headers, **{"Content-Range": "bytes %d-%d/%d" % (start, end, len(data))})
            return self.send(206, data[start:end + 1], headers, "application/octet-stream", slow)
        self.send(200, data, headers, "application/octet-stream", slow)


def serve_dir(spec):
    kind, _, rest = spec.partition(":")
    rid, _, folder = rest.partition("=")
    files = {}
    for root, _, names in os.walk(folder):
        for n in names:
            full = os.path.join(root, n)
            with open(full, "rb") as f:
                files[os.path.relpath(full, folder).replace(os.sep, "/")] = f.read()
    return Repo(kind, rid, files)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", action="append", default=[], help="KIND:ORG/NAME=DIR")
    args = ap.parse_args()
    repos = scenario_repos() + [serve_dir(s) for s in args.serve]
    Handler.state = State(repos)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print("PORT %d" % server.server_address[1], flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # Runs until stdin closes (the test ends) or a 10-minute safety limit.
    stopper = threading.Timer(600, lambda: os._exit(0))
    stopper.daemon = True
    stopper.start()
    try:
        sys.stdin.read()
    except Exception:
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
