#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""The Hugging Face cache layout that huggingface_hub writes for tests/mock_hub.py's repos
-> tests/fixtures/hub/expected_layout.json (tests/test_hub.cpp compares Tandem's cache with it).

    python3 tests/reference/make_hub_layout_fixture.py > tests/fixtures/hub/expected_layout.json   # rules only
    python3 tests/reference/make_hub_layout_fixture.py --check      # also runs huggingface_hub against the mock

The rules, from huggingface_hub's documentation ("Understand caching", file_download.py):
  <cache>/<models|datasets>--ORG--NAME/
     blobs/<etag>                     etag = sha256 of the content for LFS files (X-Linked-Etag),
                                      the git blob sha1 for other files (ETag)
     refs/main                        the commit hash, no newline
     snapshots/<commit>/<path>        a relative symlink: ../../blobs/<etag> (one more ../ per folder in path)
Checked on the GPU machine with huggingface_hub 1.33.0 (hf_hub_download against a minimal loopback server with a
small file, an LFS file and an LFS file in a folder): it wrote exactly these names, links and ref.
Only the files Tandem selects by default (what training needs) are listed. With --check (needs
huggingface_hub; no network: it talks to the mock on loopback) the script downloads the same files with
hf_hub_download and asserts that huggingface_hub produced exactly this layout.
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import mock_hub  # noqa: E402

SELECTED = {"org/tiny": ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                         "tokenizer_config.json"],
            "org/data": ["data/train-00000-of-00001.parquet"]}


def layout_by_rules():
    out = {}
    for repo in mock_hub.scenario_repos():
        if repo.id not in SELECTED:
            continue
        folder = ("models--" if repo.kind == "model" else "datasets--") + repo.id.replace("/", "--")
        entries = ["blobs/", "refs/", "snapshots/", "refs/main = " + repo.commit, "snapshots/" + repo.commit + "/"]
        for path in SELECTED[repo.id]:
            data = repo.files[path]
            lfs = path.endswith(mock_hub.LFS_SUFFIXES)
            etag = hashlib.sha256(data).hexdigest() if lfs else mock_hub.git_sha1(data)
            entries.append("blobs/" + etag)
            depth = path.count("/")
            for k in range(depth):
                entries.append("snapshots/%s/%s/" % (repo.commit, "/".join(path.split("/")[:k + 1])))
            entries.append("snapshots/%s/%s -> %sblobs/%s" % (repo.commit, path, "../" * (2 + depth), etag))
        out[folder] = sorted(set(entries))
    return out


def layout_of(repo_dir):
    out = []
    for root, dirs, files in os.walk(repo_dir):
        for d in dirs:
            full = os.path.join(root, d)
            rel = os.path.relpath(full, repo_dir)
            out.append(rel + (" -> " + os.readlink(full) if os.path.islink(full) else "/"))
        for f in files:
            full = os.path.join(root, f)
            rel = os.path.relpath(full, repo_dir)
            if os.path.islink(full):
                out.append(rel + " -> " + os.readlink(full))
            elif rel.startswith("refs/"):
                out.append(rel + " = " + open(full).read())
            else:
                out.append(rel)
    return sorted(out)


def check_with_huggingface_hub(expected):
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "..", "mock_hub.py")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline().split()[1])
    with tempfile.TemporaryDirectory() as cache:
        os.environ["HF_ENDPOINT"] = "http://127.0.0.1:%d" % port
        os.environ["HF_HUB_DISABLE_XET"] = "1"
        import huggingface_hub
        from huggingface_hub import hf_hub_download
        for rid, paths in SELECTED.items():
            kind = "dataset" if rid == "org/data" else "model"
            for p in paths:
                hf_hub_download(rid, p, repo_type=kind, cache_dir=cache)
        ok = True
        for folder, want in expected.items():
            got = [e for e in layout_of(os.path.join(cache, folder)) if not e.startswith(".no_exist")]
            if got != want:
                ok = False
                print("MISMATCH", folder, json.dumps({"huggingface_hub": got, "rules": want}, indent=1))
        print("huggingface_hub %s: %s" % (huggingface_hub.__version__, "same layout" if ok else "DIFFERENT"))
    proc.stdin.close()
    proc.wait(timeout=10)
    return ok


if __name__ == "__main__":
    expected = layout_by_rules()
    if "--check" in sys.argv:
        sys.exit(0 if check_with_huggingface_hub(expected) else 1)
    print(json.dumps(expected, indent=1))
