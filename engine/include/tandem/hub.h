// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem hub — models and datasets from the Hugging Face Hub into the standard Hugging Face cache, so that
// files Tandem downloads are reused by Python tools (transformers, datasets, huggingface_hub) and the reverse.
// Decisions a reader must know:
//  * Cache layout as huggingface_hub writes it: CACHE/models--ORG--NAME/{blobs,refs,snapshots} (datasets--...
//    for datasets); blobs/X named by the file's etag (the sha256 for LFS files, the git blob sha1 for small
//    ones); refs/REVISION holds the commit; snapshots/COMMIT/PATH is a relative symlink to ../../blobs/X.
//    A snapshot entry is created only after its blob is complete and verified, so a failure (network, cancel,
//    wrong checksum) never leaves a partial file in snapshots/; partial downloads stay in blobs/X.incomplete
//    and resume with an HTTP Range request next time.
//  * Only what a training run needs is downloaded by default (config, safetensors + index, tokenizer and
//    chat-template files, generation_config); a model repo with pickle weights only is refused before any
//    transfer. `include` globs replace that choice.
//  * Environment as huggingface_hub reads it: HF_ENDPOINT, HF_HOME, HF_HUB_CACHE, HF_TOKEN, HF_TOKEN_PATH,
//    HF_HUB_OFFLINE. Offline, nothing is contacted and only the cache is used.
//  * For front ends: plan_download() is the size preview (files, bytes, what is cached); download() reports
//    DownloadProgress (bytes, speed, ETA) from its worker threads through a callback and stops when the cancel
//    flag turns true (Error{Cancelled}; the .incomplete files are kept for resuming). Both are blocking: call
//    them off the GUI thread.
// Plain structs and functions; no Qt.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::hub {

enum class RepoType { Model, Dataset };
std::string_view repo_type_name(RepoType type) noexcept;  // "model", "dataset"

struct HubOptions {
    std::string endpoint = "https://huggingface.co";  // HF_ENDPOINT
    std::filesystem::path cache_dir;                   // HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub
    std::string token;                                 // HF_TOKEN, else the file $HF_TOKEN_PATH or $HF_HOME/token
    bool offline = false;                              // HF_HUB_OFFLINE=1
    int parallel_files = 4;                            // files downloaded at once
    int max_retries = 5;                               // per file, for cut connections, 429 and 5xx answers
    double max_retry_wait_s = 60;                      // a longer Retry-After is refused
    long connect_timeout_s = 20;
    long stall_timeout_s = 60;  // a transfer slower than 1 KB/s for this long is cut and retried
    std::function<void(const std::string&)> notice;  // one-line notes (retries, offline fallback); may be empty
};

// Defaults overridden by the environment, as huggingface_hub reads it.
HubOptions hub_options_from_env();

// "ORG/NAME" (or "NAME"): letters, digits, '-', '_', '.'; no "--" or "..", no leading/trailing '-' or '.'.
bool is_repo_id(std::string_view id) noexcept;

struct DownloadRequest {
    RepoType type = RepoType::Model;
    std::string repo_id;
    std::string revision = "main";
    std::vector<std::string> include;  // fnmatch globs on repo paths ('*' crosses '/'); empty: what training needs
};

struct RepoFile {
    std::string path;     // inside the repo, '/'-separated
    int64_t size = -1;    // bytes (-1: unknown)
    std::string blob;     // the blob's name: the sha256 for LFS files, the git blob sha1 else
    bool lfs = false;
    bool cached = false;  // blobs/<blob> already complete in the cache
};

// What a download would do: the size preview.
struct RepoPlan {
    DownloadRequest request;
    std::string commit;                 // the revision resolved to a commit
    std::vector<RepoFile> files;        // the selected files
    std::vector<std::string> skipped;   // files of the repo not selected
    int64_t total_bytes = 0;            // of the selected files
    int64_t cached_bytes = 0;           // of those, already in the cache
    std::filesystem::path snapshot;     // where the files will be: CACHE/<repo folder>/snapshots/<commit>
};

struct DownloadProgress {
    int64_t bytes_done = 0;   // this run's bytes (cached files count as done)
    int64_t bytes_total = 0;
    double bytes_per_s = 0;   // over the last few seconds
    double eta_s = -1;        // -1 while unknown
    int files_done = 0;
    int files_total = 0;
    std::string file;         // a file in flight
};
// Called from the download's worker threads, one call at a time, at most every 200 ms (and once at the end):
// keep it short (copy the struct, post it to the GUI thread).
using ProgressFn = std::function<void(const DownloadProgress&)>;

// Lists the repo at the revision (one request) and selects the files. Errors (Error with a category and a
// message saying what to do): InvalidInput for a bad id or a repo / revision that does not exist (404), for
// a gated or private repo (401/403: accept the licence on the model page, set HF_TOKEN); Unsupported for a
// model repo with pickle weights only; Io when the Hub cannot be reached. Offline: from the cache alone.
RepoPlan plan_download(const DownloadRequest& request, const HubOptions& options);

// Downloads what plan_download selected into the cache and returns the snapshot folder. Files already in
// the cache are not transferred again. `cancel` (may be null) is polled during transfers: Error{Cancelled}.
// A wrong sha256 (LFS) or git sha1 (small files) removes the blob and refuses (InvalidInput).
std::filesystem::path download(const RepoPlan& plan, const HubOptions& options, const ProgressFn& progress = {},
                               const std::atomic<bool>* cancel = nullptr);
std::filesystem::path download(const DownloadRequest& request, const HubOptions& options,
                               const ProgressFn& progress = {}, const std::atomic<bool>* cancel = nullptr);

// The cache folder of a repo: CACHE/models--ORG--NAME (datasets--ORG--NAME).
std::filesystem::path repo_cache_dir(RepoType type, std::string_view repo_id, const HubOptions& options);

// The cached snapshot of a revision (a branch or tag through refs/, or a commit), if it exists. Contacts
// nothing.
std::optional<std::filesystem::path> cached_snapshot(RepoType type, std::string_view repo_id,
                                                     std::string_view revision, const HubOptions& options);

// What `train --model X` / `--dataset X` do with X: an existing path is returned as it is; otherwise X must
// be a repo id ("ORG/NAME", optionally "ORG/NAME@REVISION"), resolved from the cache when offline (or when
// the cached snapshot holds every selected file) and downloaded otherwise.
std::filesystem::path resolve_path_or_repo(std::string_view path_or_id, RepoType type, const HubOptions& options,
                                           const ProgressFn& progress = {},
                                           const std::atomic<bool>* cancel = nullptr);

// The files of a repo listing that a training run needs (the default selection), for tests and previews.
bool needed_for_training(RepoType type, std::string_view path) noexcept;

// Human-readable byte count: "1.5 GB", "312 KB".
std::string format_bytes(int64_t bytes);

}  // namespace tandem::hub
